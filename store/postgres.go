package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/stdlib" // also the database/sql driver "pgx"
)

// postgres is the engine that several hosts share. Its transactions are
// READ COMMITTED: what must not interleave takes a row lock (forUpdate) or
// an advisory lock (lock). Tables whose changes other hosts follow notify
// the channel changesChannel from a trigger (migrations/postgres).
type postgres struct{}

func (postgres) name() string           { return "postgres" }
func (postgres) rebind(q string) string { return rebindDollar(q) }

// jsonText reads the column as json, not jsonb: json keeps a payload
// holding \u0000 (a caller's text), which jsonb refuses, readable.
func (postgres) jsonText(column, key string) string {
	return "(" + column + "::json ->> '" + key + "')"
}
func (postgres) forUpdate() string { return " FOR UPDATE" }

// clockMicros is the statement's start on the server's clock, whatever the
// clocks of the hosts that share it.
func (postgres) clockMicros() string {
	return "CAST(extract(epoch FROM statement_timestamp()) * 1000000 AS BIGINT)"
}

func (postgres) uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// unavailable: no connection could be made, a connection broke, or the
// server is shutting down or starting (SQLSTATE classes 08 and 57P).
func (postgres) unavailable(err error) bool {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case err == nil:
		return false
	case errors.As(err, &pe):
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, driver.ErrBadConn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	return pgconn.SafeToRetry(err)
}

// diskFull: SQLSTATE 53100 disk_full, which PostgreSQL gives a write or an
// extension of a file ("could not extend file") that found no room.
func (postgres) diskFull(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53100"
}

func (postgres) lock(ctx context.Context, tx db, key string) error {
	_, err := tx.exec(ctx, `SELECT pg_advisory_xact_lock(hashtext(?))`, lockKey(key))
	return err
}

// idleConns is how many connections the pool keeps open between uses.
// database/sql's default, 2, made concurrent calls that each need the
// database (a call limit's take, a claimed call id) open and close a
// connection for most of them: 32 agents' limited calls ran at 2.4k/s
// with it and 4.4k/s with 16.
const idleConns = 16

// openPostgres opens a pool of connections to dsn that database/sql checks
// before reusing one (shouldPing), keeping idleConns of them open.
func openPostgres(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cfg, stdlib.OptionShouldPing(shouldPing))
	db.SetMaxIdleConns(idleConns)
	return db, nil
}

// shouldPing says whether to ping a pooled connection before reusing it:
// when it has been idle for over a second (pgx's default), or when the
// server wrote to it or closed it while it sat idle, which is what a
// backend that was ended leaves (pg_terminate_backend, a restart, a
// failover): its FATAL 57P01, then the end of the stream. A ping that fails
// makes database/sql take another connection, where the query would
// otherwise have failed.
func shouldPing(ctx context.Context, p stdlib.ShouldPingParams) bool {
	return p.IdleDuration > time.Second || !quiet(ctx, p.Conn.PgConn())
}

// quiet reports whether nothing waits to be read on an idle connection, by
// a peek at its socket that does not wait. SyncConn first stops pgconn's
// background reader, which a slow write starts and which may still be
// blocked reading the socket (the peek would wait for it), and drains
// what it read; it returns at once when there is neither, as there
// usually is not.
func quiet(ctx context.Context, pc *pgconn.PgConn) bool {
	if err := pc.SyncConn(ctx); err != nil {
		return false
	}
	conn := pc.Conn()
	if t, ok := conn.(interface{ NetConn() net.Conn }); ok { // TLS
		conn = t.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var peekErr error
	if err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, peekErr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait
	}); err != nil {
		return false
	}
	return errors.Is(peekErr, syscall.EAGAIN) // not data, not the end of the stream
}

// changesChannel is the channel PostgreSQL's triggers notify with the name
// of the table that changed.
const changesChannel = "toolhost_changes"

// copyEvents writes a batch of events with COPY, which costs the server a
// fraction of INSERT's work. data is the batch as appendCopyMessages frames
// it: the events lock (see copier) and the COPY in one query message, so
// they run in one implicit transaction, then the rows and the end of the
// copy. It goes out in one write, and the server's answers are read on
// this goroutine: the batch costs one round trip and starts no goroutine
// (pgconn's CopyFrom starts two, and makes three writes).
//
// Sending the rows before the server asks for them is what the protocol
// allows: should the lock's statement fail, the server ignores the rows
// and the end of the copy that follow.
func (postgres) copyEvents(ctx context.Context, sqlDB *sql.DB, data []byte) error {
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn().PgConn()
		if err := pc.SyncConn(ctx); err != nil {
			return err
		}
		if _, err := pc.Conn().Write(data); err != nil {
			return fmt.Errorf("%w: %w", driver.ErrBadConn, err) // database/sql closes the connection
		}
		var failed error
		for {
			msg, err := pc.ReceiveMessage(ctx)
			if err != nil {
				return err
			}
			switch msg := msg.(type) {
			case *pgproto3.ErrorResponse:
				failed = pgconn.ErrorResponseToPgError(msg)
			case *pgproto3.ReadyForQuery:
				return failed
			}
		}
	})
}

// eventCopyColumns are the columns copyEvents fills: all but the id.
var eventCopyColumns = []string{"ts", "type", "call_id", "agent_id", "role", "tool", "group_id", "parent_id", "credential", "approval", "payload"}

// copySQL takes the events lock, then copies a batch in binary into table.
func copySQL(table string) string {
	return "SELECT pg_advisory_xact_lock(hashtext('" + lockKey("events") + "')); COPY " + table + " (" +
		strings.Join(eventCopyColumns, ", ") + ") FROM STDIN (FORMAT binary)"
}

// copyTable is the table a batch of events is copied into: their day's
// partition when they all fall on one day whose partition is there (every
// batch but those around midnight), so that PostgreSQL need not route each
// row (a tenth of the events/s); else the events table, which routes them.
func (s *Store) copyTable(events []Event) string {
	const secondsPerDay = 24 * 60 * 60
	first := events[0].Time.Unix() / secondsPerDay // a UTC day's number, compared without formatting each event's
	for _, e := range events[1:] {
		if e.Time.Unix()/secondsPerDay != first {
			return "events"
		}
	}
	day := events[0].Time.UTC().Format(dayName)
	if _, ok := s.days.Load(day); !ok {
		return "events"
	}
	return partitionPrefix + day
}

// missingTable reports whether err says that a table copied into does not
// exist (SQLSTATE 42P01): a day's partition that another host dropped.
func missingTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}

// lockKey is the text whose hash names the advisory lock of key.
func lockKey(key string) string { return "toolhost:" + key }
