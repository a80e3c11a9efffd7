package store

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/toolhost/toolhost/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// opener opens the store of a data directory, closed when t ends.
type opener func(t testing.TB, dir string) *Store

// engines runs f on each engine, as a subtest named after it. On
// PostgreSQL, each data directory f opens gets a fresh database of its
// own on the test binary's throwaway cluster (pgtest), the same one each
// time it is opened again.
func engines(t *testing.T, f func(t *testing.T, open opener)) {
	t.Run(DriverSQLite, func(t *testing.T) { f(t, open) })
	t.Run(DriverPostgres, func(t *testing.T) {
		var mu sync.Mutex
		dsns := map[string]string{}
		f(t, func(tb testing.TB, dir string) *Store {
			tb.Helper()
			mu.Lock()
			dsn, ok := dsns[dir]
			if !ok {
				dsn = pgtest.Start(t)
				dsns[dir] = dsn
			}
			mu.Unlock()
			return openWith(tb, dir, Options{Driver: DriverPostgres, DSN: dsn})
		})
	})
}

// engineOptions runs f on each engine, as a subtest named after it, with the
// Options of a fresh store of it (on PostgreSQL, a database of its own).
func engineOptions(t *testing.T, f func(t *testing.T, o Options)) {
	t.Run(DriverSQLite, func(t *testing.T) { f(t, Options{}) })
	t.Run(DriverPostgres, func(t *testing.T) { f(t, Options{Driver: DriverPostgres, DSN: pgtest.Start(t)}) })
}

func open(t testing.TB, dir string) *Store { return openWith(t, dir, Options{}) }

func openWith(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	s, err := OpenWith(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPostgresEnvironment: the suite's PostgreSQL is the one scripts/test
// installed, not one the test might silently lack.
func TestPostgresEnvironment(t *testing.T) {
	if os.Getenv(pgtest.BinEnv) == "" {
		t.Logf("%s unset: pgtest looks for the binaries on PATH and in /usr/lib/postgresql", pgtest.BinEnv)
	}
	s := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: pgtest.Start(t)})
	if s.Engine() != DriverPostgres || s.path != "" {
		t.Fatalf("engine %s, path %q", s.Engine(), s.path)
	}
}
