package store

import (
	"bufio"
	"compress/gzip"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Retention says which events a retention pass ([Store.PruneEvents])
// removes and where it exports them first.
type Retention struct {
	// Before is the cutoff: events older than it are exported, then
	// deleted. On PostgreSQL a day's partition goes once the whole day is
	// older, so events stay up to a day past it.
	Before time.Time
	// ExportDir is the directory the events are exported into, as gzipped
	// JSON lines (events-*.jsonl.gz), each file written and synced before the
	// events in it are deleted. It is created private ([DirMode]) when
	// missing. Required.
	ExportDir string
	// batch is how many events one deletion transaction removes on SQLite
	// (0: 500): the event writer's batches take turns with them.
	batch int

	afterBatch func(n int) // tests: called after each committed deletion batch (SQLite)
	pace       *pacer      // rests between the pass's stretches of work
	held       func()      // tests: called while the pass holds the retention lock (PostgreSQL)
}

// exportPattern is the glob of the files a retention pass exports into
// [Retention.ExportDir]: events-<first id>-<last id>.jsonl.gz on SQLite
// (one per pass, or per maxExportRows events), events-<day>.jsonl.gz on
// PostgreSQL (one per dropped partition). Each line is one [Event] as JSON.
const exportPattern = "events-*.jsonl.gz"

// RetentionResult is what a retention pass did.
type RetentionResult struct {
	// Exported and Deleted count the events written to the export and
	// removed from the store; they are equal unless the pass failed midway.
	Exported, Deleted int64
	// Files are the export files written, in the order written.
	Files []string
	// Partitions counts the partitions dropped (PostgreSQL).
	Partitions int
	// Skipped says that another host was running a pass on the same
	// database (PostgreSQL), so this one did nothing.
	Skipped bool
}

// eventRetention is what each engine does its own way for retention: keep
// the events table ready for writes ahead of time (PostgreSQL's
// partitions), remove the old events after exporting them, and measure the
// events' size on disk.
type eventRetention interface {
	maintainEvents(ctx context.Context, s *Store, now time.Time) error
	pruneEvents(ctx context.Context, s *Store, r Retention, res *RetentionResult) error
	eventBytes(ctx context.Context, s *Store) (int64, error)
}

// MaintainEvents prepares the events table for the coming days' writes: on
// PostgreSQL it creates the partitions of today and the next two days, and
// moves into partitions of their own any events that reached the default
// partition. Nothing on SQLite. A host calls it at start and at each
// retention pass, whether retention is on or not.
func (s *Store) MaintainEvents(ctx context.Context, now time.Time) error {
	if err := s.eng.(eventRetention).maintainEvents(ctx, s, now); err != nil {
		return fmt.Errorf("store: maintain events: %w", err)
	}
	return nil
}

// PruneEvents exports the events older than r.Before into r.ExportDir, then
// deletes them: on SQLite in transactions of r.batch events that the event
// writer's batches interleave with; on PostgreSQL by dropping the whole
// day partitions older than r.Before, one host at a time (an advisory
// lock: a host that finds it taken skips the pass). A failed export
// deletes nothing it would have held. The newest event is always kept, so
// that ids keep growing after a pass.
func (s *Store) PruneEvents(ctx context.Context, r Retention) (RetentionResult, error) {
	var res RetentionResult
	if r.ExportDir == "" {
		return res, fmt.Errorf("store: prune events: %w: no export directory", ErrInvalid)
	}
	if r.batch <= 0 {
		r.batch = 500
	}
	r.pace = &pacer{mark: time.Now()}
	if err := s.eng.(eventRetention).pruneEvents(ctx, s, r, &res); err != nil {
		return res, fmt.Errorf("store: prune events: %w", err)
	}
	return res, nil
}

// EventBytes returns the bytes the events take on disk: on SQLite the
// pages of the events table and its indexes (dbstat), on PostgreSQL the
// total size of its partitions with their indexes and TOAST.
func (s *Store) EventBytes(ctx context.Context) (int64, error) {
	n, err := s.eng.(eventRetention).eventBytes(ctx, s)
	if err != nil {
		return 0, fmt.Errorf("store: event bytes: %w", err)
	}
	return n, nil
}

// maxExportRows bounds the events of one export file on SQLite: a first
// pass over months of events makes several files rather than one huge.
const maxExportRows = 100_000

// exportFile is an export being written: gzipped JSON lines into a
// temporary file, renamed to its name once complete and synced.
type exportFile struct {
	dir  string
	f    *os.File
	buf  *bufio.Writer
	gz   *gzip.Writer
	enc  *json.Encoder
	rows int64
}

// newExport starts an export file in dir, creating dir if needed.
func newExport(dir string) (*exportFile, error) {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".events-*.tmp")
	if err != nil {
		return nil, err
	}
	x := &exportFile{dir: dir, f: f, buf: bufio.NewWriterSize(f, 1<<16)}
	x.gz = gzip.NewWriter(x.buf)
	x.enc = json.NewEncoder(x.gz)
	x.enc.SetEscapeHTML(false)
	return x, nil
}

// restFactor is how long a retention pass rests after each stretch of its
// work (an export's paceRows events, a deletion batch), as a multiple of
// the time the stretch took: a pass works a quarter of its time at most, so
// that one over months of events leaves the calls served beside it their
// CPU. An hourly pass, over an hour of events, takes little either way.
const restFactor = 3

// paceRows is how many events an export writes between two rests.
const paceRows = 1000

// pacer spaces a retention pass's stretches of work with rests.
type pacer struct {
	mark time.Time // when the current stretch of work began
}

// rest waits restFactor times as long as the work since the last rest took,
// or until ctx ends.
func (p *pacer) rest(ctx context.Context) error {
	t := time.NewTimer(restFactor * time.Since(p.mark))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	p.mark = time.Now()
	return nil
}

// add writes the events of rows (read by scanEvent) as lines, resting on p
// every paceRows events, and returns the first and last ids read (0 when
// none).
func (x *exportFile) add(ctx context.Context, rows *sql.Rows, p *pacer) (first, last int64, err error) {
	defer rows.Close()
	for rows.Next() {
		if x.rows > 0 && x.rows%paceRows == 0 {
			if err := p.rest(ctx); err != nil {
				return first, last, err
			}
		}
		e, err := scanEvent(rows)
		if err != nil {
			return first, last, err
		}
		if err := x.enc.Encode(e); err != nil {
			return first, last, err
		}
		if first == 0 {
			first = e.ID
		}
		last = e.ID
		x.rows++
	}
	return first, last, rows.Err()
}

// commit completes the file, syncs it, and renames it to name in its
// directory, synced too: once it returns, the export survives a crash.
func (x *exportFile) commit(name string) (string, error) {
	err := x.gz.Close()
	if err == nil {
		err = x.buf.Flush()
	}
	if err == nil {
		err = x.f.Sync()
	}
	if cerr := x.f.Close(); err == nil {
		err = cerr
	}
	path := filepath.Join(x.dir, name)
	if err == nil {
		err = os.Rename(x.f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(x.f.Name())
		return "", fmt.Errorf("export: %w", err)
	}
	d, err := os.Open(x.dir)
	if err == nil {
		err = d.Sync()
		d.Close()
	}
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	return path, nil
}

// abort removes an export that will not be completed.
func (x *exportFile) abort() {
	x.f.Close()
	_ = os.Remove(x.f.Name())
}
