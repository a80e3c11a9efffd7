package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/toolhost/toolhost/store"
)

// retentionName is the name of the retention measurement, which -paths may
// match to run it alone.
const retentionName = "retention"

// retentionCallers is how many callers call the no-op tool while a pass
// runs, and without one.
const retentionCallers = 8

// retentionResult is the retention measurement: what a retention pass costs
// the calls of a host serving them, on each engine.
type retentionResult struct {
	Callers int
	Runs    []retentionRun // SQLite, then PostgreSQL when it ran
}

// retentionRun is one engine's figures.
type retentionRun struct {
	Engine string
	// Old is how many events, two days old, the pass found, and Pass what
	// it did and how long it took.
	Old  int
	Pass store.RetentionResult
	Took time.Duration
	// Without are the calls made before the pass, With those made while it
	// ran (as many rounds as it lasted).
	Without, With *Series
	// BytesPerEvent is the events' bytes (store.EventBytes) divided by
	// their number, before the pass.
	BytesPerEvent float64
	// ExportPerEvent is the export files' bytes (gzipped JSON lines)
	// divided by the events they hold.
	ExportPerEvent float64
}

// measureRetention starts a host with the no-op plugin and audit {
// retention = "1d" } on each engine, writes old events of no-op calls into
// its store, and measures its calls' latency without a pass, then while
// one exports and deletes those events.
func measureRetention(ctx context.Context, tmp, noop string, pg *pgCluster, old, calls int) (*retentionResult, error) {
	res := &retentionResult{Callers: retentionCallers}
	dsns := []string{""}
	if pg != nil {
		dsn, err := pg.createDB(ctx)
		if err != nil {
			return nil, err
		}
		dsns = append(dsns, dsn)
	}
	for _, dsn := range dsns {
		run, err := retentionOn(ctx, tmp, noop, dsn, old, calls)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", run.Engine, err)
		}
		logf("  %-10s pass over %d events: %d exported, %d deleted in %s; calls p50/p99 %s / %s without, %s / %s with (%d calls); %.0f bytes per event, %.0f exported",
			run.Engine, run.Old, run.Pass.Exported, run.Pass.Deleted, run.Took.Round(time.Millisecond),
			fmtDur(run.Without.P(.5)), fmtDur(run.Without.P(.99)), fmtDur(run.With.P(.5)), fmtDur(run.With.P(.99)), run.With.Calls, run.BytesPerEvent, run.ExportPerEvent)
		res.Runs = append(res.Runs, *run)
	}
	return res, nil
}

// retentionOn measures one engine: SQLite when dsn is "", else PostgreSQL.
func retentionOn(ctx context.Context, tmp, noop, dsn string, old, calls int) (*retentionRun, error) {
	run := &retentionRun{Engine: engineSQLite, Old: old}
	exports, err := os.MkdirTemp(tmp, "export-")
	if err != nil {
		return run, err
	}
	body := fmt.Sprintf("audit {\n  retention = \"1d\"\n  export = %q\n}\nplugin \"noop\" {\n  path = %q\n  sandbox = \"off\"\n}\n", exports, noop)
	if dsn != "" {
		run.Engine = enginePostgres
		body = fmt.Sprintf("store {\n  driver = \"postgres\"\n  dsn    = %q\n}\n%s", dsn, body)
	}
	h, err := startHost(ctx, tmp, body, nil)
	if err != nil {
		return run, err
	}
	defer h.Close()
	agent, err := benchAgent(ctx, h, "noop")
	if err != nil {
		return run, err
	}
	// The old events: those of no-op calls, over the two whole UTC days
	// before yesterday, so that PostgreSQL has two days' partitions to
	// drop, both older than the retention.
	w := h.Store().NewEventWriter(nil)
	start := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
	for i := range old {
		e := callEvent(i)
		e.Time = start.Add(time.Duration(i) * 48 * time.Hour / time.Duration(old))
		w.Emit(e)
	}
	if err := w.Close(); err != nil {
		return run, err
	}
	if err := h.Store().MaintainEvents(ctx, time.Now()); err != nil {
		return run, err
	}
	bytes, err := h.Store().EventBytes(ctx)
	if err != nil {
		return run, err
	}
	run.BytesPerEvent = float64(bytes) / float64(old)
	call := hostCall(h, agent.ID)
	if _, _, err := runRound(ctx, call, retentionCallers, calls/4); err != nil { // warm-up
		return run, err
	}
	lat, wall, err := runRound(ctx, call, retentionCallers, calls)
	if err != nil {
		return run, err
	}
	run.Without = &Series{Path: "without a pass", Conc: retentionCallers, Calls: len(lat), Lat: lat, Wall: wall}
	run.Without.Finish()
	type outcome struct {
		res  store.RetentionResult
		err  error
		took time.Duration
	}
	passed := make(chan outcome, 1)
	go func() {
		t0 := time.Now()
		res, err := h.Events().Retain(ctx)
		passed <- outcome{res, err, time.Since(t0)}
	}()
	run.With = &Series{Path: "during a pass", Conc: retentionCallers}
	for {
		lat, wall, err := runRound(ctx, call, retentionCallers, calls/20)
		if err != nil {
			return run, err
		}
		select {
		case o := <-passed: // the pass ended during this round: it counts whole
			if o.err != nil {
				return run, o.err
			}
			run.Pass, run.Took = o.res, o.took
			run.With.Lat = slices.Concat(run.With.Lat, lat)
			run.With.Wall += wall
			run.With.Calls = len(run.With.Lat)
			run.With.Finish()
			if run.Pass.Deleted != int64(old) {
				return run, fmt.Errorf("the pass deleted %d events, want %d", run.Pass.Deleted, old)
			}
			var exported int64
			for _, f := range run.Pass.Files {
				st, err := os.Stat(f)
				if err != nil {
					return run, err
				}
				exported += st.Size()
			}
			run.ExportPerEvent = float64(exported) / float64(run.Pass.Exported)
			return run, nil
		default:
		}
		run.With.Lat = slices.Concat(run.With.Lat, lat)
		run.With.Wall += wall
	}
}
