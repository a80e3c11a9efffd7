package store

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// agedEvents returns two events a day for the ten days up to today (UTC),
// at 01:00 and 13:00, and the midnight that begins today.
func agedEvents() ([]Event, time.Time) {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	var events []Event
	for d := 9; d >= 0; d-- {
		for _, h := range []int{1, 13} {
			t := today.AddDate(0, 0, -d).Add(time.Duration(h) * time.Hour)
			events = append(events, Event{Time: t, Type: EventCallStarted, CallID: "call_" + t.Format(time.RFC3339),
				Payload: map[string]any{"day": float64(d), "hour": float64(h)}})
		}
	}
	return events, today
}

// readExport reads back the events of the export files, in file order.
func readExport(t *testing.T, files []string) []Event {
	t.Helper()
	var out []Event
	for _, f := range files {
		if ok, _ := filepath.Match(exportPattern, filepath.Base(f)); !ok {
			t.Fatalf("export file %s does not match %s", f, exportPattern)
		}
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		gz, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(gz)
		for {
			var e Event
			if err := dec.Decode(&e); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		r.Close()
	}
	return out
}

// TestPruneEventsExportsWhatItDeletes: a pass deletes the events older than
// the cutoff, and only those; its export holds exactly the events it
// deleted; a second pass finds nothing to do. On PostgreSQL the old days
// start in the default partition (written before the partitions were
// made), and the pass makes their partitions, exports and drops them.
func TestPruneEventsExportsWhatItDeletes(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t, t.TempDir())
		events, today := agedEvents()
		if err := s.MaintainEvents(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		stored := writeEvents(t, s, events)
		before := today.AddDate(0, 0, -4)
		i := slices.IndexFunc(stored, func(e Event) bool { return !e.Time.Before(before) })
		old, kept := stored[:i], stored[i:]
		if len(old) != 10 {
			t.Fatalf("%d events older than the cutoff, want 10", len(old))
		}
		exports := filepath.Join(t.TempDir(), "exports")
		res, err := s.PruneEvents(ctx, Retention{Before: before, ExportDir: exports, batch: 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Exported != int64(len(old)) || res.Deleted != int64(len(old)) || res.Skipped {
			t.Fatalf("pass %+v, want %d exported and deleted", res, len(old))
		}
		if got := readExport(t, res.Files); !reflect.DeepEqual(got, old) {
			t.Fatalf("exported\n%v\nwant the deleted\n%v", got, old)
		}
		left, err := s.Events(ctx, EventFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(left, kept) {
			t.Fatalf("left %v, want %v", ids(left), ids(kept))
		}
		again, err := s.PruneEvents(ctx, Retention{Before: before, ExportDir: exports})
		if err != nil || again.Exported != 0 || again.Deleted != 0 || len(again.Files) != 0 {
			t.Fatalf("second pass %+v, %v: want nothing done", again, err)
		}
		if n, err := s.EventBytes(ctx); err != nil || n <= 0 {
			t.Fatalf("EventBytes = %d, %v", n, err)
		}
	})
}

// TestPruneEventsFailedExportDeletesNothing: when the export cannot be
// written (its directory is a file), the pass fails and every event stays.
func TestPruneEventsFailedExportDeletesNothing(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t, t.TempDir())
		events, today := agedEvents()
		stored := writeEvents(t, s, events)
		blocked := filepath.Join(t.TempDir(), "a-file")
		if err := os.WriteFile(blocked, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := s.PruneEvents(ctx, Retention{Before: today, ExportDir: blocked})
		if err == nil || res.Deleted != 0 {
			t.Fatalf("pass %+v, %v: want an error and nothing deleted", res, err)
		}
		left, err := s.Events(ctx, EventFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(left, stored) {
			t.Fatalf("left %v, want every event %v", ids(left), ids(stored))
		}
	})
}

// TestPruneEventsInterleavesWithWrites: on SQLite, an event emitted while a
// pass deletes thousands of events, a small batch at a time, is committed
// before the pass ends: the writer's batches take turns with the
// deletion's instead of waiting for all of it.
func TestPruneEventsInterleavesWithWrites(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	old := time.Now().Add(-48 * time.Hour)
	w := s.NewEventWriter(&WriterOptions{linger: -1})
	const n = 20_000
	for i := range n {
		w.Emit(Event{Time: old.Add(time.Duration(i) * time.Millisecond), Type: EventCallCompleted})
	}
	w.Emit(Event{Type: EventCallStarted}) // the newest, kept
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	written := w.Written()
	batches, committedAt := 0, 0
	res, err := s.PruneEvents(ctx, Retention{Before: time.Now().Add(-time.Hour), ExportDir: t.TempDir(), batch: 20,
		afterBatch: func(int) {
			batches++
			if batches == 1 {
				w.Emit(Event{Type: EventCallStarted, CallID: "during"})
			} else if committedAt == 0 && w.Written() > written {
				committedAt = batches
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if res.Deleted != n || batches != n/20 {
		t.Fatalf("deleted %d in %d batches, want %d in %d", res.Deleted, batches, n, n/20)
	}
	if committedAt == 0 || committedAt == batches {
		t.Fatalf("the event emitted after batch 1 of %d was committed after batch %d: want before the last", batches, committedAt)
	}
	t.Logf("emitted after batch 1 of %d, committed by batch %d", batches, committedAt)
}

// TestEventsMigrationToPartitions: a PostgreSQL database whose events
// table predates partitioning keeps its events and their ids through
// migration 014, and through the split of the default partition into
// days; reads by id and new writes go on as before.
func TestEventsMigrationToPartitions(t *testing.T) {
	ctx := context.Background()
	dir, o := t.TempDir(), Options{Driver: DriverPostgres, DSN: pgtest.Start(t)}
	old, err := openUpTo(ctx, dir, o, 13)
	if err != nil {
		t.Fatal(err)
	}
	events, _ := agedEvents()
	// The writer writes the columns of today's table (migration 022): the
	// events of that older table are inserted with its own.
	for _, e := range events {
		var b batchBuf
		if _, err := old.db.exec(ctx, `INSERT INTO events (ts, type, call_id, agent_id, role, tool, group_id, parent_id, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			stamp(e.Time), e.Type, e.CallID, e.AgentID, e.Role, e.Tool, e.Group, e.ParentID, string(b.appendPayload(nil, e.Payload))); err != nil {
			t.Fatal(err)
		}
	}
	before, err := old.Events(ctx, EventFilter{Limit: len(events) + 1})
	if err != nil || len(before) != len(events) {
		t.Fatalf("stored %d events, %v; want %d", len(before), err, len(events))
	}
	var kind string
	if err := old.db.queryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = 'events'`).Scan(&kind); err != nil || kind != "r" {
		t.Fatalf("events before 014: relkind %q, %v: want an ordinary table", kind, err)
	}
	old.Close()

	s := openWith(t, dir, o)
	check := func(when string) {
		t.Helper()
		got, err := s.Events(ctx, EventFilter{Limit: 100})
		if err != nil || !reflect.DeepEqual(got, before) {
			t.Fatalf("%s: events %v, %v: want %v", when, ids(got), err, ids(before))
		}
		page, err := s.Events(ctx, EventFilter{AfterID: before[4].ID, Limit: 3, first: true})
		if err != nil || !reflect.DeepEqual(page, before[5:8]) {
			t.Fatalf("%s: page after id %d: %v, %v", when, before[4].ID, ids(page), err)
		}
	}
	if err := s.db.queryRow(ctx, `SELECT relkind::text FROM pg_class WHERE relname = 'events'`).Scan(&kind); err != nil || kind != "p" {
		t.Fatalf("events after 014: relkind %q, %v: want a partitioned table", kind, err)
	}
	check("migrated")
	if err := s.MaintainEvents(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	check("split into days")
	var inDefault int
	if err := s.db.queryRow(ctx, `SELECT count(*) FROM events_default`).Scan(&inDefault); err != nil || inDefault != 0 {
		t.Fatalf("%d events left in the default partition, %v", inDefault, err)
	}
	days, err := dayPartitions(ctx, s.db)
	if err != nil || len(days) != 10+partitionsAhead {
		t.Fatalf("partitions %v, %v: want the 10 days and %d ahead", days, err, partitionsAhead)
	}
	w := s.NewEventWriter(nil)
	w.Emit(Event{Type: EventCallCompleted})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := s.Events(ctx, EventFilter{AfterID: before[len(before)-1].ID})
	if err != nil || len(after) != 1 {
		t.Fatalf("events after the migrated ones: %v, %v: want the new one", ids(after), err)
	}
}

// TestPruneEventsOneHostAtATime: two hosts on one PostgreSQL database run
// their passes at once: one holds the retention lock and does the work,
// the other skips; once the first is done, the lock is free again.
func TestPruneEventsOneHostAtATime(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Start(t)
	a := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: dsn})
	b := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: dsn})
	events, today := agedEvents()
	writeEvents(t, a, events)
	exports := t.TempDir()
	r := Retention{Before: today.AddDate(0, 0, -4), ExportDir: exports}
	var other RetentionResult
	var otherErr error
	ra := r
	ra.held = func() { other, otherErr = b.PruneEvents(ctx, r) }
	first, err := a.PruneEvents(ctx, ra)
	if err != nil || otherErr != nil {
		t.Fatal(err, otherErr)
	}
	if !other.Skipped || other.Deleted != 0 {
		t.Fatalf("the second host's pass during the first's: %+v, want skipped", other)
	}
	if first.Skipped || first.Deleted != 10 || first.Partitions != 5 {
		t.Fatalf("the first host's pass: %+v, want 10 events in 5 partitions deleted", first)
	}
	then, err := b.PruneEvents(ctx, r)
	if err != nil || then.Skipped || then.Deleted != 0 {
		t.Fatalf("the second host's pass after: %+v, %v: want run, nothing to delete", then, err)
	}
}

// TestEventsCopiedIntoTheirDay: on PostgreSQL a batch of one day's events
// is copied straight into that day's partition once the store knows it,
// a batch across midnight into the events table; a partition another host
// dropped sends the batch to the events table at its next attempt, losing
// nothing (before, each attempt failed on the missing table and the batch
// was dropped).
func TestEventsCopiedIntoTheirDay(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Start(t)
	s := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: dsn})
	today := time.Now().UTC().Truncate(24 * time.Hour)
	at := today.Add(time.Hour)
	if got := s.copyTable([]Event{{Time: at}}); got != "events" {
		t.Fatalf("before the partitions are made: %q, want events", got)
	}
	if err := s.MaintainEvents(ctx, at); err != nil {
		t.Fatal(err)
	}
	day := partitionPrefix + today.Format(dayName)
	for _, tt := range []struct {
		name   string
		events []Event
		want   string
	}{
		{"one day", []Event{{Time: at}, {Time: at.Add(time.Minute)}}, day},
		{"across midnight", []Event{{Time: at}, {Time: today.Add(-time.Minute)}}, "events"},
		{"a day without a partition", []Event{{Time: today.AddDate(0, 0, -30)}}, "events"},
	} {
		if got := s.copyTable(tt.events); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}

	other := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: dsn})
	if _, err := other.db.exec(ctx, `DROP TABLE `+day); err != nil {
		t.Fatal(err)
	}
	w := s.NewEventWriter(&WriterOptions{linger: -1})
	w.Emit(Event{Type: "after the drop", Time: at})
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Events(ctx, EventFilter{Type: "after the drop"})
	if err != nil || len(got) != 1 {
		t.Fatalf("%d events written after the partition was dropped, %v", len(got), err)
	}
}
