package host

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/disktest"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// diskFullEngine puts a host's store on the file system mounted at mnt:
// config returns the config of a host (each with a data directory of its
// own), and check checks the database's integrity.
type diskFullEngine struct {
	size  string // the tmpfs's size
	setup func(t *testing.T, mnt string) (config func(name string) *config.Config, check func() error)
}

// TestDiskFullSQLite: see testDiskFull; each host's data directory, and so
// its SQLite database, is on the small file system.
func TestDiskFullSQLite(t *testing.T) {
	testDiskFull(t, diskFullEngine{size: "4m", setup: func(t *testing.T, mnt string) (func(string) *config.Config, func() error) {
		var dbs []string
		cfg := func(name string) *config.Config {
			dir := filepath.Join(mnt, name)
			dbs = append(dbs, filepath.Join(dir, "toolhost.db"))
			return &config.Config{DataDir: dir}
		}
		return cfg, func() error {
			for _, path := range dbs {
				if err := sqliteIntegrity(path); err != nil {
					return err
				}
			}
			return nil
		}
	}})
}

// TestDiskFullPostgres: see testDiskFull; the hosts share a database of a
// cluster whose data directory (with its WAL) is on the small file system.
func TestDiskFullPostgres(t *testing.T) {
	testDiskFull(t, diskFullEngine{size: "48m", setup: func(t *testing.T, mnt string) (func(string) *config.Config, func() error) {
		c := pgtest.NewIn(t, mnt)
		dsn := c.CreateDB(t)
		cfg := func(string) *config.Config {
			return &config.Config{DataDir: t.TempDir(), Store: config.Store{Driver: store.DriverPostgres, DSN: dsn}}
		}
		return cfg, func() error { return postgresIntegrity(dsn) }
	}})
}

// testDiskFull: hosts whose store's disk fills up keep serving. A host in
// the default audit mode runs every call, its events waiting in memory up
// to their bound (counted when lost past it), and /metrics and Degraded say
// the disk is full while /readyz stays 200. A host in strict audit mode
// refuses a call whose started event cannot be written, with internal, and
// never dispatches it (its plugin's tool leaves a marker when it runs), and
// is not Ready. Once space is freed, the events waiting are written, the
// strict host runs calls again, the database passes its integrity check,
// and every call acknowledged has its started and terminal events in the
// store, except exactly those counted as lost.
func testDiskFull(t *testing.T, e diskFullEngine) {
	mnt := disktest.Mount(t, e.size)
	configOf, check := e.setup(t, mnt)
	marker := filepath.Join(t.TempDir(), "ran")
	const queue = 64 // the default host's bound, in events
	host := func(name, mode string, opts *Options) *Host {
		cfg := configOf(name)
		cfg.Limits = config.Limits{Timeout: 10 * time.Second}
		cfg.Audit.Mode = mode
		cfg.Plugins = []config.Plugin{testPlugin("good", "good", map[string]string{startFileEnv: marker})}
		return runHost(t, cfg, opts)
	}
	opts := testOptions(t)
	opts.EventQueue = queue
	def := host("default", "", opts)
	strict := host("strict", "strict", testOptions(t))

	// Every call acknowledged (a result returned), by host, by its echo's
	// text.
	acked := map[*Host][]string{}
	echo := func(h *Host, text string) error {
		res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "echo", Arguments: mustJSON(map[string]string{"text": text})})
		if err == nil && !res.OK {
			err = fmt.Errorf("not ok: %+v", res.Error)
		}
		if err == nil {
			acked[h] = append(acked[h], text)
		}
		return err
	}
	// sleep calls the tool that leaves the marker, and reports whether it
	// ran: whether the marker is there.
	sleep := func() (bool, error) {
		if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), proctest.Patience)
		defer cancel()
		_, err := strict.Call(ctx, &toolhost.CallRequest{Tool: "sleep", Arguments: []byte(`{"ms":0}`)})
		_, statErr := os.Stat(marker)
		return statErr == nil, err
	}
	for i := range 4 {
		for _, h := range []*Host{def, strict} {
			if err := echo(h, fmt.Sprintf("before-%s-%d", h.cfg.Audit.Mode, i)); err != nil {
				t.Fatalf("before the disk fills: %v", err)
			}
		}
	}
	if ran, err := sleep(); !ran || err != nil {
		t.Fatalf("the marking tool before the disk fills: ran %v, %v", ran, err)
	}
	proctest.Eventually(t, "the events before the disk fills are written", func() bool { return def.events.Queued() == 0 && strict.events.Queued() == 0 })

	fill := disktest.Fill(t, mnt)
	start := time.Now()

	// The default host serves every call, until its writer finds the disk
	// full and holds the events.
	var n int
	proctest.Eventually(t, "the default host's writer finds the disk full", func() bool {
		n++
		if err := echo(def, fmt.Sprintf("full-default-%d", n)); err != nil {
			t.Fatalf("a call on the default host while the disk is full: %v", err)
		}
		return errors.Is(def.events.Down(), store.ErrDiskFull)
	})
	if err := def.Ready(context.Background()); err != nil {
		t.Errorf("the default host is not ready while the disk is full: %v", err)
	}
	if d := def.Events().Degraded()["events"]; !strings.Contains(d, "disk is full") {
		t.Errorf("the default host's Degraded: %q", d)
	}
	if v, _ := gathered(t, def.Metrics(), "toolhost_store_down", "reason=disk_full"); v != 1 {
		t.Errorf("toolhost_store_down{reason=disk_full} = %v while the disk is full", v)
	}
	// Past its bound, the default host drops events, counting them.
	for range queue {
		n++
		if err := echo(def, fmt.Sprintf("full-default-%d", n)); err != nil {
			t.Fatalf("a call on the default host past its events' bound: %v", err)
		}
	}
	_, lost := def.events.Lost()
	if lost == 0 {
		t.Errorf("%d calls on the default host with the disk full, and no event lost past its bound of %d", n, queue)
	}
	if v, _ := gathered(t, def.Metrics(), "toolhost_events_lost_total", "reason=queue_full"); v != float64(lost) {
		t.Errorf("toolhost_events_lost_total{reason=queue_full} = %v, want %d", v, lost)
	}

	// The strict host refuses the call whose started event cannot be
	// written, and its tool does not run.
	var refused error
	proctest.Eventually(t, "the strict host refuses a call", func() bool {
		ran, err := sleep()
		if err != nil {
			if ran {
				t.Fatalf("the strict host refused a call (%v) whose tool ran", err)
			}
			refused = err
		} else if !ran {
			t.Fatal("the strict host's call succeeded without running its tool")
		}
		return err != nil
	})
	if !errors.Is(refused, toolhost.ErrInternal) || !errors.Is(refused, store.ErrDiskFull) || !strings.Contains(refused.Error(), "does not run") {
		t.Errorf("the strict host's refusal: %v", refused)
	}
	t.Logf("the strict host refused: %v", refused)
	if err := strict.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "disk is full") {
		t.Errorf("the strict host while the disk is full: ready: %v", err)
	}
	t.Logf("disk full for %v: %d calls on the default host, %d events lost past its bound", time.Since(start).Round(time.Millisecond), n, lost)

	// Space is back: the events waiting are written, calls run again.
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the events waiting are written once space is back", func() bool {
		return def.events.Down() == nil && def.events.Queued() == 0 && strict.events.Down() == nil && strict.events.Queued() == 0
	})
	if err := strict.Ready(context.Background()); err != nil || def.Events().Degraded() != nil {
		t.Errorf("with space back: strict ready: %v; default degraded: %v", err, def.Events().Degraded())
	}
	if v, _ := gathered(t, def.Metrics(), "toolhost_store_down", "reason=disk_full"); v != 0 {
		t.Errorf("toolhost_store_down{reason=disk_full} = %v with space back", v)
	}
	if ran, err := sleep(); !ran || err != nil {
		t.Fatalf("the marking tool with space back: ran %v, %v", ran, err)
	}
	if err := check(); err != nil {
		t.Fatalf("the database after the disk was full: %v", err)
	}

	// Every acknowledged call's events are there, but those counted lost.
	for _, h := range []*Host{def, strict} {
		evs, err := h.Store().Events(context.Background(), store.EventFilter{Tool: "echo", Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		byCall, callOf := map[string][]string{}, map[string]string{}
		for _, ev := range evs {
			byCall[ev.CallID] = append(byCall[ev.CallID], ev.Type)
			if ev.Type == store.EventCallStarted {
				var args struct{ Text string }
				if err := json.Unmarshal([]byte(fmt.Sprint(ev.Payload["arguments"])), &args); err != nil {
					t.Fatalf("a started event's arguments: %v", err)
				}
				callOf[args.Text] = ev.CallID
			}
		}
		var missing int64
		for _, text := range acked[h] {
			types := byCall[callOf[text]]
			if len(types) == 2 && types[0] == store.EventCallStarted && types[1] == store.EventCallCompleted {
				continue
			}
			missing += 2 - int64(len(types))
			if h == strict || !strings.HasPrefix(text, "full-") {
				t.Errorf("the %q host's call %q, acknowledged: events %v", h.cfg.Audit.Mode, text, types)
			}
		}
		if _, lost := h.events.Lost(); missing != lost {
			t.Errorf("the %q host: %d events of acknowledged calls missing, %d counted lost", h.cfg.Audit.Mode, missing, lost)
		}
	}
}

// mustJSON encodes v.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// sqliteIntegrity runs SQLite's integrity check on the database at path.
func sqliteIntegrity(path string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	var res string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil {
		return err
	}
	if res != "ok" {
		return fmt.Errorf("%s: integrity_check: %s", path, res)
	}
	return nil
}

// postgresIntegrity checks every table and B-tree index of the database,
// partitions included, with amcheck (verify_heapam, bt_index_check with
// heapallindexed): PostgreSQL's equivalent of SQLite's integrity_check.
func postgresIntegrity(dsn string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS amcheck`); err != nil {
		return err
	}
	var bad []string
	rows, err := conn.Query(ctx, `SELECT c.relname || ': ' || v.msg FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace, verify_heapam(c.oid) v
		WHERE n.nspname = 'public' AND c.relkind = 'r'`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		bad = append(bad, s)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT bt_index_check(c.oid, true) FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND a.amname = 'btree' AND c.relkind = 'i'`); err != nil {
		return fmt.Errorf("bt_index_check: %w", err)
	}
	if len(bad) > 0 {
		return fmt.Errorf("verify_heapam: %s", strings.Join(bad, "; "))
	}
	return nil
}
