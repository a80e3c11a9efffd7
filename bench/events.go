package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/store"
)

// eventsName is the name of the events/s measurement, which -paths may
// match to run it with the call paths it matches.
const eventsName = "events/s"

// The engines of the events/s measurement, as the report names them:
// PostgreSQL's events table partitioned by day (migration 014, today's
// partition made as a host makes it), and the one table it was before,
// measured beside it.
const (
	engineSQLite        = "SQLite"
	enginePostgres      = "PostgreSQL"
	enginePostgresTable = "PostgreSQL, one table"
)

// unpartitionSQL turns a fresh store's partitioned events table back into
// one table, with the same columns and indexes, for the measurement's
// baseline.
const unpartitionSQL = `ALTER TABLE events RENAME TO events_partitioned;
ALTER INDEX events_call RENAME TO events_partitioned_call;
ALTER TABLE events_partitioned RENAME CONSTRAINT events_pkey TO events_partitioned_pkey;
CREATE TABLE events (LIKE events_partitioned INCLUDING DEFAULTS INCLUDING INDEXES);`

// eventsResult is the events/s measurement: how fast a store.EventWriter
// writes the events of tool calls, on each engine.
type eventsResult struct {
	Emitters, Rounds, Warmup int
	Runs                     []eventsRun // SQLite, then PostgreSQL when it ran
}

// eventsRun is one engine's figures.
type eventsRun struct {
	Engine string // engineSQLite or enginePostgres
	Where  string // where its database is
	Events int
	Wall   time.Duration // from the first Emit to Flush's return, summed over the rounds
	// CPU is the CPU time the bench process used in the rounds (the
	// emitters, the writer, and SQLite or pgx); ServerCPU the PostgreSQL
	// server's, -1 when not known or not PostgreSQL.
	CPU, ServerCPU time.Duration
}

// perEvent returns d per event, in µs; -1 when d is not known.
func (e eventsRun) perEvent(d time.Duration) float64 {
	if d < 0 || e.Events == 0 {
		return -1
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(e.Events)
}

// Rate returns events per second.
func (e eventsRun) Rate() float64 {
	if e.Wall <= 0 {
		return 0
	}
	return float64(e.Events) / e.Wall.Seconds()
}

// run returns the engine's figures, nil when it did not run.
func (r *eventsResult) run(engine string) *eventsRun {
	if r == nil {
		return nil
	}
	for i := range r.Runs {
		if r.Runs[i].Engine == engine {
			return &r.Runs[i]
		}
	}
	return nil
}

// measureEvents writes n events through an EventWriter (the host's
// defaults) on a fresh SQLite store and, when pg is not nil, on a fresh
// database of pg: emitters goroutines emit them as fast as Emit returns,
// in rounds in which the engines take turns, each round timed from its
// first Emit to the return of Flush.
func measureEvents(ctx context.Context, tmp string, pg *pgCluster, n, rounds int) (_ *eventsResult, err error) {
	res := &eventsResult{Emitters: 4, Rounds: rounds, Warmup: 2000}
	type engine struct {
		st *store.Store
		w  *store.EventWriter
	}
	var engines []engine
	defer func() {
		for _, e := range engines {
			if cerr := e.w.Close(); cerr != nil && err == nil {
				err = cerr
			}
			e.st.Close()
		}
	}()
	open := func(name, where string, o store.Options, prepare func(*store.Store, string) error) error {
		dir, err := os.MkdirTemp(tmp, "events-")
		if err != nil {
			return err
		}
		st, err := store.OpenWith(ctx, dir, o)
		if err == nil {
			err = prepare(st, o.DSN)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		engines = append(engines, engine{st: st, w: st.NewEventWriter(nil)})
		res.Runs = append(res.Runs, eventsRun{Engine: name, Where: where, ServerCPU: -1})
		return nil
	}
	maintain := func(st *store.Store, _ string) error { return st.MaintainEvents(ctx, time.Now()) }
	if err := open(engineSQLite, "its data directory, in "+dirOn(os.TempDir()), store.Options{Driver: store.DriverSQLite}, maintain); err != nil {
		return nil, err
	}
	if pg != nil {
		for _, e := range []struct {
			name, where string
			prepare     func(*store.Store, string) error
		}{
			{enginePostgres, "a database of its own on the server of -pg-dsn, over TCP on loopback; events partitioned by day", maintain},
			{enginePostgresTable, "the same, with the one events table of before partitioning", func(_ *store.Store, dsn string) error { return execDSN(ctx, dsn, unpartitionSQL) }},
		} {
			dsn, err := pg.createDB(ctx)
			if err != nil {
				return nil, err
			}
			if err := open(e.name, e.where, store.Options{Driver: store.DriverPostgres, DSN: dsn}, e.prepare); err != nil {
				return nil, err
			}
		}
	}
	for _, e := range engines {
		if _, err := emitEvents(ctx, e.w, res.Emitters, res.Warmup); err != nil {
			return nil, err
		}
	}
	per := n / rounds
	for round := range rounds {
		for k := range engines {
			i := (k + round) % len(engines) // a different order each round
			run := &res.Runs[i]
			cpu0, server0 := selfCPU(), pg.cpu()
			wall, err := emitEvents(ctx, engines[i].w, res.Emitters, per)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", run.Engine, err)
			}
			cpu, server := selfCPU()-cpu0, pg.cpu()-server0
			run.Events += per / res.Emitters * res.Emitters
			run.Wall += wall
			run.CPU += cpu
			if run.Engine != engineSQLite && server0 >= 0 {
				run.ServerCPU = max(run.ServerCPU, 0) + server
			}
		}
	}
	for i, e := range engines {
		run := &res.Runs[i]
		if got, want := e.w.Written(), int64(res.Warmup/res.Emitters*res.Emitters+run.Events); got != want {
			return nil, fmt.Errorf("%s: %d events written, want %d", run.Engine, got, want)
		}
		server := ""
		if v := run.perEvent(run.ServerCPU); v >= 0 {
			server = fmt.Sprintf(", %.1f µs in the server", v)
		}
		logf("  %-10s %8d events in %-8s %8.0f events/s, CPU per event: %.1f µs in the bench%s",
			run.Engine, run.Events, run.Wall.Round(time.Millisecond), run.Rate(), run.perEvent(run.CPU), server)
	}
	return res, nil
}

// emitEvents emits n events (rounded down to a multiple of emitters) from
// emitters goroutines and returns the time from the first Emit to the
// return of Flush.
func emitEvents(ctx context.Context, w *store.EventWriter, emitters, n int) (time.Duration, error) {
	per := n / emitters
	var start, done sync.WaitGroup
	start.Add(1)
	for g := range emitters {
		done.Go(func() {
			start.Wait()
			for i := range per {
				w.Emit(callEvent(g*per + i))
			}
		})
	}
	t0 := time.Now()
	start.Done()
	done.Wait()
	err := w.Flush(ctx)
	return time.Since(t0), err
}

// callEvent returns the i-th event of a stream like the host's for no-op
// calls: a tool_call.started, then its tool_call.completed, with the
// payloads the host gives them (a fresh map each, as the host makes) and
// call ids that sort in the order made, as the host's do.
func callEvent(i int) store.Event {
	e := store.Event{CallID: fmt.Sprintf("call_%024x", i/2), AgentID: "agent_bench", Role: "bench", Tool: "noop", Group: "noop"}
	if i%2 == 0 {
		e.Type = store.EventCallStarted
		e.Payload = map[string]any{"arguments": "{}", "channel": "bench", "run": "run_bench"}
	} else {
		e.Type = store.EventCallCompleted
		e.Payload = map[string]any{"latency_ms": 0.091, "exit_code": 0, "truncated_lines": 0, "truncated_bytes": 0, "redacted": false}
	}
	return e
}

// selfCPU returns the CPU time this process has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
