// Package store keeps toolhost's state in SQLite (modernc.org/sqlite, pure
// Go) under the data directory: roles and agents, with embedded migrations.
// The database runs in WAL mode, so a CLI and a running server can share it.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// fileName is the SQLite database's file name inside the data directory.
const fileName = "toolhost.db"

// ErrNotFound is wrapped by the errors of lookups that find nothing.
var ErrNotFound = errors.New("not found")

// ErrInvalid is wrapped by the errors of values the store refuses, such as a
// malformed token name.
var ErrInvalid = errors.New("invalid")

// ErrUnavailable is wrapped by the errors of a store whose database cannot
// be reached (PostgreSQL stopped or unreachable) at the moment.
var ErrUnavailable = errors.New("the database is unavailable")

// ErrDiskFull is wrapped by the errors of a store whose database cannot
// write for want of room on its disk (SQLite's file system, or
// PostgreSQL's) at the moment.
var ErrDiskFull = errors.New("the database's disk is full")

// ErrExists is wrapped by the error of creating a role or a token whose name
// is taken.
var ErrExists = errors.New("already exists")

//go:embed migrations/*/*.sql
var migrations embed.FS

// Store is an open database.
type Store struct {
	sqlDB   *sql.DB
	db      db // sqlDB with the engine's placeholders
	eng     engine
	dir     string // the data directory
	path    string // the SQLite file; "" on PostgreSQL
	tokens  tokenCache
	changes *listener // PostgreSQL's notifications; nil on SQLite
	// turn makes this process's transactions (and the event writer's
	// batches, a bucket's take) take turns on SQLite, which has one writer:
	// its busy wait sleeps and retries, so a writer that commits and
	// begins again could starve another past busy_timeout, where the
	// mutex hands the turn over in order once a waiter has waited 1 ms.
	turn sync.Mutex
	// sweptAt is when (unix nanoseconds) this store last swept the rate
	// buckets (sweepBuckets).
	sweptAt atomic.Int64
	// takeStmt is the prepared statement of a take from a bucket
	// (Store.take), once a take prepared it.
	takeStmt atomic.Pointer[sql.Stmt]
	// days are the days (dayName) whose events partition this store saw
	// made or there (PostgreSQL; see copyTable).
	days sync.Map
}

// Drivers of [Options.Driver].
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// Options say which database a store opens.
type Options struct {
	// Driver is [DriverSQLite] (the default: toolhost.db in the data directory)
	// or [DriverPostgres] (DSN).
	Driver string
	// DSN is the PostgreSQL connection string, a postgres:// URL or
	// key=value pairs, for [DriverPostgres].
	DSN string
}

// tokenStamp is the name of the file whose modification time tells every
// process on a data directory that tokens were deleted (see tokenCache).
const tokenStamp = "tokens.stamp"

// Open opens (creating if needed) the SQLite database in dir, applies the
// migrations it lacks, and makes sure the root role and agent exist. A
// directory or database it creates is private ([DirMode], [FileMode]).
func Open(ctx context.Context, dir string) (*Store, error) { return OpenWith(ctx, dir, Options{}) }

// OpenWith opens the database o names, as [Open] does; dir is the data
// directory either way, for the files kept beside the database (artifacts,
// saved outputs). On PostgreSQL several hosts may open one database: the
// migrations are applied once, and each store follows the others' changes
// through LISTEN/NOTIFY ([Store.Changes]).
func OpenWith(ctx context.Context, dir string, o Options) (*Store, error) {
	return openUpTo(ctx, dir, o, 0)
}

// openUpTo is [OpenWith] applying the migrations up to version upTo only
// (0: all). A store of an older version has no root role made: the root's
// row is today's, whose columns an older roles table may lack.
func openUpTo(ctx context.Context, dir string, o Options, upTo int) (*Store, error) {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &Store{dir: dir}
	var err error
	switch o.Driver {
	case "", DriverSQLite:
		s.eng, s.path = sqlite{}, filepath.Join(dir, fileName)
		if err := createPrivate(s.path); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		s.tokens.stamp = filepath.Join(dir, tokenStamp)
		s.sqlDB, err = sql.Open("sqlite", sqliteDSN(s.path))
	case DriverPostgres:
		s.eng = postgres{}
		s.sqlDB, err = openPostgres(o.DSN)
	default:
		return nil, fmt.Errorf("store: unknown driver %q: want %s or %s", o.Driver, DriverSQLite, DriverPostgres)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", s.eng.name(), err)
	}
	s.db = db{q: s.sqlDB, eng: s.eng}
	if err := s.migrate(ctx, upTo); err != nil {
		s.sqlDB.Close()
		return nil, err
	}
	if upTo == 0 {
		if err := s.ensureRoot(ctx); err != nil {
			s.sqlDB.Close()
			return nil, err
		}
	}
	if o.Driver == DriverPostgres {
		s.changes = listen(o.DSN, &s.tokens)
	}
	return s, nil
}

// Unavailable reports whether err, from one of the store's methods, says
// that the database could not be reached (PostgreSQL stopped or
// unreachable) rather than that the operation failed: trying again later
// may succeed.
func (s *Store) Unavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || s.eng.unavailable(err)
}

// Dir returns the data directory.
func (s *Store) Dir() string { return s.dir }

// Engine returns the store's engine: [DriverSQLite] or [DriverPostgres].
func (s *Store) Engine() string { return s.eng.name() }

// Close closes the database.
func (s *Store) Close() error {
	if s.changes != nil {
		s.changes.close()
	}
	return s.sqlDB.Close()
}

// Ping checks that the database answers a query.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.db.queryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// migrate applies, in order and each in its own transaction, the engine's
// embedded migrations not yet recorded in schema_migrations, up to version
// upTo (0: all; tests make the databases of older versions). Hosts sharing
// a database take turns (the engine's lock), so each migration runs once.
func (s *Store) migrate(ctx context.Context, upTo int) error {
	err := s.tx(ctx, func(tx db) error {
		if err := s.eng.lock(ctx, tx, "migrate"); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/"+s.eng.name()+"/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		version, err := strconv.Atoi(strings.SplitN(filepath.Base(name), "_", 2)[0])
		if err != nil {
			return fmt.Errorf("store: migration %s: no version number", name)
		}
		if upTo > 0 && version > upTo {
			break
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		err = s.tx(ctx, func(tx db) error {
			if err := s.eng.lock(ctx, tx, "migrate"); err != nil {
				return err
			}
			var n int
			if err := tx.queryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil || n > 0 {
				return err
			}
			if _, err := tx.q.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, version, now())
			return err
		})
		if err != nil {
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
	}
	return nil
}

// tx runs f in a transaction, committed when f returns nil. On SQLite,
// transactions begin IMMEDIATE (the _txlock setting): a read that later
// writes would otherwise fail with SQLITE_BUSY_SNAPSHOT when another
// connection commits in between, which busy_timeout does not retry; and
// they wait for their turn (Store.turn).
func (s *Store) tx(ctx context.Context, f func(db) error) error {
	if s.path != "" {
		s.turn.Lock()
		defer s.turn.Unlock()
	}
	return s.txInTurn(ctx, f)
}

// txInTurn is tx for a caller that holds the turn already (or needs none:
// PostgreSQL).
func (s *Store) txInTurn(ctx context.Context, f func(db) error) error {
	tx, err := s.sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(db{q: tx, eng: s.eng}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Changes returns a watch on the commits of other processes to the tables
// named (roles, agents, mailbox, approvals, tokens; none: all of them): a
// cheap way to notice edits made by a CLI beside a server, or by another
// host. On SQLite it checks every interval, and wakes on a commit to any
// table; on PostgreSQL a notification of one of the tables wakes it at
// once, and it hears this process's commits too. Close it when done
// ([ChangeWatch.Close]).
func (s *Store) Changes(ctx context.Context, every time.Duration, tables ...string) (*ChangeWatch, error) {
	if s.changes != nil {
		return s.changes.watch(tables), nil
	}
	conn, err := s.sqlDB.Conn(ctx)
	if err != nil {
		return nil, err
	}
	c := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	w := &ChangeWatch{C: c, stop: cancel}
	version := func() (v int64) {
		_ = conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
		return v
	}
	last := version() // before returning: a commit right after is seen
	go func() {
		defer conn.Close()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if v := version(); v != last && ctx.Err() == nil {
				last = v
				notify(c)
			}
		}
	}()
	return w, nil
}

// ChangeWatch tells of commits made by others: C receives a value after
// one, several close together coalescing into one.
type ChangeWatch struct {
	// C receives after commits.
	C    <-chan struct{}
	stop func()
}

// Close ends the watch.
func (w *ChangeWatch) Close() error {
	w.stop()
	return nil
}

// notify signals c without blocking: a signal already pending covers this
// one.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// tsLayout is RFC 3339 with a fixed-width fraction: parseTime reads it, and
// unlike time.RFC3339Nano its text order is time order, which the ts index
// and Since rely on.
const tsLayout = "2006-01-02T15:04:05.000000000Z07:00"

// stamp formats a time for the database.
func stamp(t time.Time) string { return t.UTC().Format(tsLayout) }

func now() string { return stamp(time.Now()) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// newID returns prefix followed by 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
