package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// writeEvents emits events through a new writer, closes it, and returns
// every stored event.
func writeEvents(t *testing.T, s *Store, events []Event) []Event {
	t.Helper()
	w := s.NewEventWriter(nil)
	for _, e := range events {
		w.Emit(e)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Events(context.Background(), EventFilter{Limit: len(events) + 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events) {
		t.Fatalf("stored %d events, want %d", len(got), len(events))
	}
	return got
}

func ids(events []Event) []int64 {
	out := []int64{}
	for _, e := range events {
		out = append(out, e.ID)
	}
	return out
}

// TestEmitConcurrently: every event emitted by many goroutines is written
// exactly once, in batches, with the default queue and with one so small
// that emitters keep waiting for room.
func TestEmitConcurrently(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		for _, tc := range []struct {
			name            string
			goroutines, per int
			opts            *WriterOptions
		}{
			{"defaults", 64, 2000, nil},
			{"tiny queue", 8, 200, &WriterOptions{QueueSize: 4, maxBatch: 3}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := open(t, t.TempDir())
				w := s.NewEventWriter(tc.opts)
				var wg sync.WaitGroup
				for g := range tc.goroutines {
					wg.Go(func() {
						for i := range tc.per {
							w.Emit(Event{Type: EventCallCompleted, Tool: "noop", Payload: map[string]any{"n": g*tc.per + i}})
						}
					})
				}
				wg.Wait()
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				total := tc.goroutines * tc.per
				if w.Written() != int64(total) || w.Dropped() != 0 {
					t.Fatalf("written %d, dropped %d, want %d, 0", w.Written(), w.Dropped(), total)
				}
				got, err := s.Events(context.Background(), EventFilter{Limit: 2 * total})
				if err != nil {
					t.Fatal(err)
				}
				seen := make([]bool, total)
				for i, e := range got {
					n, _ := e.Payload["n"].(float64)
					if int(n) < 0 || int(n) >= total || seen[int(n)] {
						t.Fatalf("event %+v: payload n out of range or repeated", e)
					}
					seen[int(n)] = true
					if i > 0 && e.ID <= got[i-1].ID {
						t.Fatalf("ids not ascending: %d after %d", e.ID, got[i-1].ID)
					}
				}
				if len(got) != total {
					t.Fatalf("stored %d events, want %d", len(got), total)
				}
			})
		}
	})
}

// TestFlushMakesEventsVisible: after Flush, a query sees what was emitted
// before it, with every field as emitted.
func TestFlushMakesEventsVisible(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		w := s.NewEventWriter(nil)
		defer w.Close()
		at := time.Date(2025, 3, 1, 12, 0, 0, 5, time.FixedZone("CET", 3600))
		full := Event{Time: at, Type: EventCallCompleted, CallID: "c1", AgentID: "a1", Role: "dev", Tool: "read_file", Group: "workspace", ParentID: "p1",
			Payload: map[string]any{"ok": true, "ms": 1.5, "out": map[string]any{"lines": 3.0}}}
		before := time.Now()
		w.Emit(full)
		w.Emit(Event{Type: EventGroupRegistered, Group: "workspace"})
		w.Emit(Event{Type: EventCallFailed, Payload: map[string]any{"bad": func() {}}})
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := s.Events(ctx, EventFilter{})
		if err != nil || len(got) != 3 {
			t.Fatalf("events = %+v, %v", got, err)
		}
		if w.Written() != 3 {
			t.Fatalf("written = %d", w.Written())
		}
		full.ID, full.Time = got[0].ID, at.UTC()
		if !reflect.DeepEqual(got[0], full) || got[0].Time.Location() != time.UTC {
			t.Fatalf("read back\n%+v\nwant\n%+v", got[0], full)
		}
		if e := got[1]; e.Payload != nil || e.Group != "workspace" || e.Time.Sub(before).Abs() > time.Minute {
			t.Fatalf("event with defaults = %+v", e)
		}
		if msg, _ := got[2].Payload["encode_error"].(string); !strings.Contains(msg, "unsupported type") {
			t.Fatalf("unencodable payload stored as %+v", got[2].Payload)
		}
	})
}

// filterEvents are the events the filter tests query, with ids 1 to 7 in a
// new store.
func filterEvents(base time.Time) []Event {
	sec := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	return []Event{
		{Time: sec(0), Type: EventCallStarted, CallID: "c1", AgentID: "a1", Tool: "read"},
		{Time: sec(1), Type: EventCallCompleted, CallID: "c1", AgentID: "a1", Tool: "read"},
		{Time: sec(2), Type: EventCallStarted, CallID: "c2", AgentID: "a2", Tool: "write"},
		{Time: sec(3), Type: EventCallFailed, CallID: "c2", AgentID: "a2", Tool: "write"},
		{Time: sec(4), Type: EventGroupRegistered, Group: "workspace"},
		{Time: sec(5), Type: EventCallStarted, CallID: "c3", AgentID: "a1", Tool: "read"},
		{Time: sec(6), Type: EventCallCompleted, CallID: "c3", AgentID: "a1", Tool: "read"},
	}
}

func TestEventsFilter(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		if all := writeEvents(t, s, filterEvents(base)); !slices.Equal(ids(all), []int64{1, 2, 3, 4, 5, 6, 7}) {
			t.Fatalf("ids = %v", ids(all))
		}
		for _, tc := range []struct {
			name   string
			filter EventFilter
			want   []int64
		}{
			{"none", EventFilter{}, []int64{1, 2, 3, 4, 5, 6, 7}},
			{"tool", EventFilter{Tool: "read"}, []int64{1, 2, 6, 7}},
			{"agent", EventFilter{Agent: "a2"}, []int64{3, 4}},
			{"call id", EventFilter{Call: "c1"}, []int64{1, 2}},
			{"type exact", EventFilter{Type: EventCallStarted}, []int64{1, 3, 6}},
			{"type prefix", EventFilter{Type: "tool_call."}, []int64{1, 2, 3, 4, 6, 7}},
			{"other prefix", EventFilter{Type: "group."}, []int64{5}},
			{"prefix without dot is exact", EventFilter{Type: "tool_call"}, []int64{}},
			{"since", EventFilter{Since: base.Add(3*time.Second + 999*time.Millisecond)}, []int64{5, 6, 7}},
			// Within a second: as RFC3339Nano text, "…:04Z" would sort after "…:04.5Z".
			{"since within a second", EventFilter{Since: base.Add(4500 * time.Millisecond)}, []int64{6, 7}},
			{"since in another zone", EventFilter{Since: base.Add(4 * time.Second).In(time.FixedZone("X", -5*3600))}, []int64{5, 6, 7}},
			{"after id", EventFilter{AfterID: 5}, []int64{6, 7}},
			{"limit keeps the most recent", EventFilter{Limit: 2}, []int64{6, 7}},
			{"tool and limit", EventFilter{Tool: "read", Limit: 3}, []int64{2, 6, 7}},
			{"agent, prefix, after id", EventFilter{Agent: "a1", Type: "tool_call.", AfterID: 1}, []int64{2, 6, 7}},
			{"no match", EventFilter{Tool: "nope"}, []int64{}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.Events(context.Background(), tc.filter)
				if err != nil || !slices.Equal(ids(got), tc.want) {
					t.Fatalf("ids = %v, %v; want %v", ids(got), err, tc.want)
				}
			})
		}
	})
}

// matches is the model of EventFilter without its limit.
func matches(e Event, f EventFilter) bool {
	typeOK := e.Type == f.Type || f.Type == "" || strings.HasSuffix(f.Type, ".") && strings.HasPrefix(e.Type, f.Type)
	return typeOK && (f.Tool == "" || e.Tool == f.Tool) && (f.Agent == "" || e.AgentID == f.Agent) &&
		(f.Call == "" || e.CallID == f.Call) && (f.Role == "" || e.Role == f.Role) && !e.Time.Before(f.Since) &&
		(f.Until.IsZero() || e.Time.Before(f.Until)) && e.ID > f.AfterID && (f.BeforeID == 0 || e.ID < f.BeforeID)
}

// TestPropertyEventsFilter: for any filter, Events returns the last Limit
// stored events that the model says match (with First, the first Limit),
// in id order.
func TestPropertyEventsFilter(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		types := []string{EventCallStarted, EventCallCompleted, EventCallFailed, EventGroupRegistered, EventGroupUnregistered,
			EventPluginExited, EventPluginRestarted, "tool_call", "tool_callx"}
		tools, agents, roles := []string{"", "read", "write", "grep"}, []string{"", "a1", "a2", "a3"}, []string{"", "dev", "ops"}
		var emitted []Event
		for i := range 240 {
			emitted = append(emitted, Event{Time: base.Add(time.Duration(i/2) * 500 * time.Millisecond), Type: types[i%len(types)],
				Tool: tools[i%len(tools)], AgentID: agents[i/3%len(agents)], CallID: fmt.Sprintf("c%d", i/5), Role: roles[i/7%len(roles)]})
		}
		stored := writeEvents(t, s, emitted)
		rapid.Check(t, func(t *rapid.T) {
			f := EventFilter{
				Tool:     rapid.SampledFrom(append(tools, "nope")).Draw(t, "tool"),
				Agent:    rapid.SampledFrom(append(agents, "nope")).Draw(t, "agent"),
				Call:     rapid.SampledFrom([]string{"", "c0", "c7", "c47", "nope"}).Draw(t, "call"),
				Role:     rapid.SampledFrom(append(roles, "nope")).Draw(t, "role"),
				Type:     rapid.SampledFrom(append(types, "", "tool_call.", "group.", "plugin.", "nope.")).Draw(t, "type"),
				AfterID:  rapid.Int64Range(0, int64(len(stored))+1).Draw(t, "after"),
				BeforeID: rapid.Int64Range(0, int64(len(stored))+2).Draw(t, "before"),
				Limit:    rapid.IntRange(0, len(stored)+2).Draw(t, "limit"),
				first:    rapid.Bool().Draw(t, "first"),
			}
			if rapid.Bool().Draw(t, "since") {
				f.Since = base.Add(time.Duration(rapid.IntRange(-1, 130).Draw(t, "since_ms")) * 500 * time.Millisecond)
			}
			if rapid.Bool().Draw(t, "until") {
				f.Until = base.Add(time.Duration(rapid.IntRange(-1, 130).Draw(t, "until_ms")) * 500 * time.Millisecond)
			}
			var want []int64
			for _, e := range stored {
				if matches(e, f) {
					want = append(want, e.ID)
				}
			}
			switch {
			case f.Limit <= 0 || len(want) <= f.Limit:
			case f.first: // a follower pages forward from its cursor
				want = want[:f.Limit]
			default:
				want = want[len(want)-f.Limit:]
			}
			got, err := s.Events(context.Background(), f)
			if err != nil || !slices.Equal(ids(got), want) {
				t.Fatalf("ids = %v, %v; want %v", ids(got), err, want)
			}
		})
	})
}

// TestCloseIsIdempotent: Close twice is fine; Emit after Close drops and
// counts the event; Flush after Close has nothing to wait for.
func TestCloseIsIdempotent(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		w := s.NewEventWriter(nil)
		w.Emit(Event{Type: EventPluginExited})
		for range 2 {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		w.Emit(Event{Type: EventPluginRestarted})
		w.Emit(Event{Type: EventPluginRestarted})
		if err := w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if w.Written() != 1 || w.Dropped() != 2 {
			t.Fatalf("written %d, dropped %d; want 1, 2", w.Written(), w.Dropped())
		}
	})
}

// TestEventsSurviveReopen: events written by one Store are read by the next
// one opened on the same directory.
func TestEventsSurviveReopen(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		s := open(t, dir)
		want := writeEvents(t, s, filterEvents(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)))
		s.Close()
		got, err := open(t, dir).Events(context.Background(), EventFilter{})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("after reopening: %+v, %v; want %+v", got, err, want)
		}
	})
}

// TestWriteFailureIsReported: a batch that cannot be written is retried, then
// passed to OnError and dropped; Flush and Close report it, and Flush gives
// up when its context ends first.
func TestWriteFailureIsReported(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		s.Close() // every write now fails
		reported := make(chan error, 1)
		release := make(chan struct{})
		w := s.NewEventWriter(&WriterOptions{OnError: func(err error) {
			reported <- err
			<-release
		}})
		w.Emit(Event{Type: EventCallStarted})
		if err := <-reported; !strings.Contains(err.Error(), "database is closed") {
			t.Fatalf("reported %v", err)
		}
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		if err := w.Flush(cancelled); err != context.Canceled {
			t.Fatalf("Flush with a cancelled context while the batch is pending = %v", err)
		}
		if w.Queued() != 1 || w.failed() != 0 {
			t.Fatalf("while the batch is pending: queued %d, failed %d; want 1, 0", w.Queued(), w.failed())
		}
		close(release)
		if err := w.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), "1 events not written") {
			t.Fatalf("Flush = %v", err)
		}
		if w.Queued() != 0 || w.failed() != 1 {
			t.Fatalf("after: queued %d, failed %d; want 0, 1", w.Queued(), w.failed())
		}
		if err := w.Close(); err == nil {
			t.Fatal("Close reported no lost events")
		}
		if w.Written() != 0 {
			t.Fatalf("written = %d", w.Written())
		}
	})
}

// benchEvent is a typical completed call.
func benchEvent(i int) Event {
	return Event{Type: EventCallCompleted, CallID: "call_0123456789abcdef", AgentID: "agent_0123456789abcdef", Role: "dev",
		Tool: "read_file", Group: "workspace", Payload: map[string]any{"ok": true, "ms": 0.42, "n": i}}
}

// BenchmarkEmit measures sustained end-to-end throughput: b.N events emitted
// by 8 goroutines and all written (Close) in events/s.
func BenchmarkEmit(b *testing.B) {
	s := open(b, b.TempDir())
	w := s.NewEventWriter(nil)
	const emitters = 8
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range emitters {
		wg.Go(func() {
			for i := g; i < b.N; i += emitters {
				w.Emit(benchEvent(i))
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkEmitEnqueue measures Emit alone (ns/op) on a caller's path while
// the writer runs beside it. Every round events, the queue is flushed
// untimed, so Emit never waits for room: with short rounds the queue stays
// as short as when the writer keeps up, and its chunks are reused; with
// rounds of QueueSize it fills as in a burst.
func BenchmarkEmitEnqueue(b *testing.B) {
	for _, round := range []int{4096, 65536} {
		b.Run(fmt.Sprintf("round=%d", round), func(b *testing.B) {
			s := open(b, b.TempDir())
			w := s.NewEventWriter(&WriterOptions{QueueSize: round})
			defer w.Close()
			events := make([]Event, 1024)
			for i := range events {
				events[i] = benchEvent(i)
			}
			b.ResetTimer()
			for i := range b.N {
				if i > 0 && i%round == 0 {
					b.StopTimer()
					if err := w.Flush(context.Background()); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				w.Emit(events[i%len(events)])
			}
		})
	}
}

// TestEventsSurviveAnOutage: with PostgreSQL stopped, Emit does not block:
// events wait in the queue up to its bound, and those past it are counted
// as lost (Failed) rather than stalling the emitters; Flush says the
// database is unavailable; once PostgreSQL is back the queued events are
// written without a restart, and the loss is reported.
func TestEventsSurviveAnOutage(t *testing.T) {
	cluster := pgtest.New(t)
	s := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: cluster.CreateDB(t)})
	ctx := context.Background()
	reported := make(chan error, 16)
	w := s.NewEventWriter(&WriterOptions{QueueSize: 64, maxBatch: 16, OnError: func(err error) { reported <- err }})
	defer w.Close()
	w.Emit(Event{Type: "before"})
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	cluster.Stop()
	emitted := make(chan struct{})
	go func() {
		for i := range 1000 {
			w.Emit(Event{Type: "during", Payload: map[string]any{"n": i}})
		}
		close(emitted)
	}()
	select {
	case <-emitted:
	case <-time.After(proctest.Patience):
		t.Fatal("Emit blocked while the database was down")
	}
	if err := w.Flush(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Flush while down: %v", err)
	}
	lost := w.failed()
	if lost < 1000-64 || lost == 1000 {
		t.Fatalf("%d of 1000 events lost with a queue of 64", lost)
	}

	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	deadline, flushCtx := time.Now().Add(20*time.Second), context.Background()
	for {
		err := w.Flush(flushCtx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events not written 20s after PostgreSQL came back: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err := s.Events(ctx, EventFilter{Type: "during", Limit: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got))+lost != 1000 {
		t.Fatalf("%d written and %d lost of 1000", len(got), lost)
	}
	select {
	case err := <-reported:
		if !strings.Contains(err.Error(), "events lost") {
			t.Fatalf("reported %v", err)
		}
	case <-time.After(proctest.Patience):
		t.Fatal("the loss was not reported")
	}
	t.Logf("%d events queued through the outage and written after it, %d lost past the queue's bound", len(got), lost)
}

// TestCloseThroughAnOutage: a writer closed while PostgreSQL is down, with
// batches queued, gives them one grace in all, not one each: before, a full
// queue of 64 batches took 64 graces (more than 5 minutes) to close, and
// these 8 took 40 s.
func TestCloseThroughAnOutage(t *testing.T) {
	cluster := pgtest.New(t)
	s := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: cluster.CreateDB(t)})
	const events, batch = 128, 16
	w := s.NewEventWriter(&WriterOptions{QueueSize: events, maxBatch: batch, linger: -1})
	w.Emit(Event{Type: "before"})
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	cluster.Stop()
	for i := range events {
		w.Emit(Event{Type: "during", Payload: map[string]any{"n": i}})
	}
	start := time.Now()
	err := w.Close()
	took := time.Since(start)
	if err == nil {
		t.Fatal("Close through an outage reported no loss")
	}
	if took > 3*closeGrace {
		t.Fatalf("Close took %s with the database down: more than one grace of %s for the %d batches left", took, closeGrace, events/batch)
	}
	t.Logf("closed in %s, %d events lost", took.Round(time.Millisecond), w.failed())
}

// TestFollowAcrossWriters: two hosts writing events into one PostgreSQL
// database at once, and a follower paging by id: it sees every event. Ids
// are taken when a batch is inserted; if a later batch could commit first,
// the follower would page past the earlier batch's ids before it committed.
func TestFollowAcrossWriters(t *testing.T) {
	dir, dsn := t.TempDir(), pgtest.Start(t)
	a := openWith(t, dir, Options{Driver: DriverPostgres, DSN: dsn})
	b := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: dsn})
	const per = 5000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := map[int64]bool{}
	followed := make(chan error, 1)
	go func() {
		followed <- a.Follow(ctx, EventFilter{Limit: 100}, time.Millisecond, func(events []Event) error {
			for _, e := range events {
				seen[e.ID] = true
			}
			if len(seen) == 2*per {
				cancel()
			}
			return nil
		})
	}()
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		wg.Go(func() {
			w := s.NewEventWriter(&WriterOptions{maxBatch: 7, linger: -1})
			for i := range per {
				w.Emit(Event{Type: EventCallStarted, Payload: map[string]any{"n": i}})
			}
			if err := w.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	select {
	case err := <-followed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		cancel()
		<-followed
		t.Fatalf("the follower saw %d of %d events", len(seen), 2*per)
	}
}

// TestFirstQueriesAfterARestart: PostgreSQL restarted (an upgrade, a
// failover) closes every connection of the store's pool. The first query
// on each idle one used to fail ("terminating connection due to
// administrator command"), so the first requests a host served once the
// database was back failed too; now the pool's peek before reusing a
// connection (shouldPing) finds each one ended, and every query succeeds.
func TestFirstQueriesAfterARestart(t *testing.T) {
	cluster := pgtest.New(t)
	s := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: cluster.CreateDB(t)})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 { // several connections, of which the pool keeps some idle
		wg.Go(func() {
			if _, err := s.Roles(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if idle := s.sqlDB.Stats().Idle; idle == 0 {
		t.Fatal("no idle connection in the pool: the test shows nothing")
	}
	cluster.Stop()
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := s.Roles(ctx); err != nil {
			t.Fatalf("query %d after the restart: %v", i+1, err)
		}
	}
}

// TestQueryAfterItsConnectionWasEnded: a pooled connection whose backend
// was ended while it sat idle (pg_terminate_backend here; a restart or a
// failover alike) is not used for the next query, which would fail with
// 57P01: the pool peeks at it first, finds the server's goodbye, and takes
// another. The listener keeps its own connection, so nothing else drops
// the pool's.
func TestQueryAfterItsConnectionWasEnded(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Start(t)
	s := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: dsn})
	s.sqlDB.SetMaxOpenConns(1) // one connection: the one ended
	var pid int
	if err := s.sqlDB.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var ended bool
	if err := admin.QueryRowContext(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ended); err != nil || !ended {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ended, err)
	}
	// Once the backend's process is gone, its goodbye is in our socket (a
	// process's files close before it exits); the connection stays idle
	// under a second, as the pool's peek allows.
	proctest.Eventually(t, "the ended backend's process is gone", func() bool { return !proctest.Alive(pid) })
	for i := range 3 {
		if _, err := s.Roles(ctx); err != nil {
			t.Fatalf("query %d after its connection was ended: %v", i+1, err)
		}
	}
}
