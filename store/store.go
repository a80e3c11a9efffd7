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
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// FileName is the database's file name inside the data directory.
const FileName = "toolhost.db"

// ErrNotFound is wrapped by the errors of lookups that find nothing.
var ErrNotFound = errors.New("not found")

// ErrInvalid is wrapped by the errors of values the store refuses, such as a
// malformed token name.
var ErrInvalid = errors.New("invalid")

// ErrExists is wrapped by the error of creating a role or a token whose name
// is taken.
var ErrExists = errors.New("already exists")

//go:embed migrations/*.sql
var migrations embed.FS

// Store is an open database.
type Store struct {
	db     *sql.DB
	path   string
	tokens tokenCache
}

// tokenStamp is the name of the file whose modification time tells every
// process on a data directory that tokens were deleted (see tokenCache).
const tokenStamp = "tokens.stamp"

// Open opens (creating if needed) the database in dir, applies the
// migrations it lacks, and makes sure the root role and agent exist. A
// directory or database it creates is private (DirMode, FileMode).
func Open(ctx context.Context, dir string) (*Store, error) {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(ON)&_txlock=immediate&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(10000)")
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path, tokens: tokenCache{stamp: filepath.Join(dir, tokenStamp)}}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.ensureRoot(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks that the database answers a query.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// migrate applies, in order and each in its own transaction, the embedded
// migrations not yet recorded in schema_migrations.
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		version, err := strconv.Atoi(strings.SplitN(filepath.Base(name), "_", 2)[0])
		if err != nil {
			return fmt.Errorf("store: migration %s: no version number", name)
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		err = s.tx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil || n > 0 {
				return err
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, version, now())
			return err
		})
		if err != nil {
			return fmt.Errorf("store: migration %s: %w", name, err)
		}
	}
	return nil
}

// tx runs f in a transaction, committed when f returns nil. Transactions
// begin IMMEDIATE (the _txlock setting): a read that later writes would
// otherwise fail with SQLITE_BUSY_SNAPSHOT when another connection commits
// in between, which busy_timeout does not retry.
func (s *Store) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Changes returns a number that differs from the last one returned whenever
// another process (or another connection) has committed since: a cheap way to
// notice edits made by a CLI while a server runs. Its conn must be kept for
// the comparisons to hold; Close it when done.
func (s *Store) Changes(ctx context.Context) (*ChangeWatch, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &ChangeWatch{conn: conn}, nil
}

// ChangeWatch reports commits made through other connections.
type ChangeWatch struct {
	conn *sql.Conn
}

// Version returns SQLite's data_version for the watch's connection.
func (w *ChangeWatch) Version(ctx context.Context) (int64, error) {
	var v int64
	err := w.conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
	return v, err
}

// Close releases the watch's connection.
func (w *ChangeWatch) Close() error { return w.conn.Close() }

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
