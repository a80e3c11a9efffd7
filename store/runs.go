package store

import (
	"context"
	"fmt"
	"time"
)

// Run is one host process's run on the store (see [Store.BeginRun]).
type Run struct {
	ID        string
	HostID    string
	Pid       int
	ProcStart string // the process's start time, to tell it from a reused pid
	FromEvent int64  // the newest event id when the run began
}

// BeginRun records a run of the host hostID by this process and returns it;
// it forgets runs that ended cleanly over a week ago.
func (s *Store) BeginRun(ctx context.Context, hostID string, pid int, procStart string) (Run, error) {
	r := Run{ID: newID("run_"), HostID: hostID, Pid: pid, ProcStart: procStart}
	// Runs that ended cleanly a week ago are of no more use.
	_, err := s.db.exec(ctx, `DELETE FROM host_runs WHERE ended_at != '' AND ended_at < ?`, stamp(time.Now().Add(-7*24*time.Hour)))
	if err == nil {
		err = s.db.queryRow(ctx, `SELECT COALESCE(MAX(id), 0) FROM events`).Scan(&r.FromEvent)
	}
	if err == nil {
		_, err = s.db.exec(ctx, `INSERT INTO host_runs (run_id, host_id, pid, proc_start, from_event, started_at) VALUES (?, ?, ?, ?, ?, ?)`,
			r.ID, r.HostID, r.Pid, r.ProcStart, r.FromEvent, now())
	}
	if err != nil {
		return r, fmt.Errorf("store: begin run: %w", err)
	}
	return r, nil
}

// EndRun records that a run ended cleanly.
func (s *Store) EndRun(ctx context.Context, runID string) error {
	if _, err := s.db.exec(ctx, `UPDATE host_runs SET ended_at = ? WHERE run_id = ?`, now(), runID); err != nil {
		return fmt.Errorf("store: end run: %w", err)
	}
	return nil
}

// OpenRuns returns the runs of hostID that never ended, but the one given.
func (s *Store) OpenRuns(ctx context.Context, hostID, except string) ([]Run, error) {
	return queryAll(ctx, s.db, "open runs", func(row scanner) (r Run, err error) {
		err = row.Scan(&r.ID, &r.HostID, &r.Pid, &r.ProcStart, &r.FromEvent)
		return r, err
	}, `SELECT run_id, host_id, pid, proc_start, from_event FROM host_runs WHERE host_id = ? AND ended_at = '' AND run_id != ?`, hostID, except)
}

// OpenCalls returns the tool_call.started events of a run (their payload's
// run) that have no terminal event after them.
func (s *Store) OpenCalls(ctx context.Context, r Run) ([]Event, error) {
	return queryAll(ctx, s.db, "open calls of "+r.ID, scanEvent,
		`SELECT `+eventColumns+` FROM events s WHERE s.id > ? AND s.type = ? AND `+s.eng.jsonText("s.payload", "run")+` = ?
		AND NOT EXISTS (SELECT 1 FROM events e WHERE e.call_id = s.call_id AND e.id > s.id AND e.type IN (?, ?)) ORDER BY s.id`,
		r.FromEvent, EventCallStarted, r.ID, EventCallCompleted, EventCallFailed)
}
