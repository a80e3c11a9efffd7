package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// The store runs on two engines, SQLite (embedded, the default) and
// PostgreSQL (several hosts sharing one database). Every query is written
// once, in the SQL both accept (ON CONFLICT DO NOTHING, RETURNING, ?
// placeholders), and goes through the store's db, which rebinds the
// placeholders for the engine. What cannot be written once is a method of
// engine: a handful of fragments, how a unique violation or an unreachable
// database reads, and how a transaction serializes with other processes.
// Besides, the event writer's batches go through COPY on PostgreSQL
// (copier), and other processes' commits are noticed by polling SQLite's
// data_version or through PostgreSQL's LISTEN (Changes).
type engine interface {
	// name is "sqlite" or "postgres", which also names the directory of
	// the engine's migrations.
	name() string
	// rebind turns the ? placeholders of q into the engine's.
	rebind(q string) string
	// jsonText is an expression reading key of the JSON object in column
	// as text.
	jsonText(column, key string) string
	// clockMicros is an expression reading the database's clock, in
	// microseconds since the epoch, the same all through a statement.
	clockMicros() string
	// forUpdate is appended to a SELECT in a transaction that will change
	// the rows read, so that concurrent transactions wait for it.
	forUpdate() string
	// uniqueViolation reports whether err is a unique constraint's.
	uniqueViolation(err error) bool
	// unavailable reports whether err says the database cannot be
	// reached now, rather than that the statement failed.
	unavailable(err error) bool
	// diskFull reports whether err says the database could not write for
	// want of room on its disk.
	diskFull(err error) bool
	// lock serializes tx with every transaction taking the same key, on any
	// host, until tx ends.
	lock(ctx context.Context, tx db, key string) error
}

// db is the store's database or one of its transactions, with the engine's
// placeholders.
type db struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	}
	eng engine
}

func (d db) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return d.q.ExecContext(ctx, d.eng.rebind(q), args...)
}

func (d db) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.q.QueryContext(ctx, d.eng.rebind(q), args...)
}

func (d db) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return d.q.QueryRowContext(ctx, d.eng.rebind(q), args...)
}

func (d db) prepare(ctx context.Context, q string) (*sql.Stmt, error) {
	return d.q.PrepareContext(ctx, d.eng.rebind(q))
}

// queryAll runs q on d and reads every row with scan; its errors say what
// was read.
func queryAll[T any](ctx context.Context, d db, what string, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := d.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}

// stmt returns s, prepared on the database, for use in d: a transaction's
// copy when d is a transaction.
func (d db) stmt(ctx context.Context, s *sql.Stmt) *sql.Stmt {
	if tx, ok := d.q.(*sql.Tx); ok {
		return tx.StmtContext(ctx, s)
	}
	return s
}

// rebindDollar numbers the ? placeholders of q $1, $2, … (PostgreSQL's),
// leaving string literals alone; each query is rewritten once.
func rebindDollar(q string) string {
	if v, ok := rebound.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	n, quoted := 0, false
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case c == '\'':
			quoted = !quoted
			b.WriteByte(c)
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	rebound.Store(q, b.String())
	return b.String()
}

// rebound caches rebindDollar's rewrites: the store's queries are a fixed
// set, but for the event filters' few shapes.
var rebound sync.Map
