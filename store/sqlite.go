package store

import (
	"context"
	"errors"
	"strings"

	sqlitedrv "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqlite is the embedded engine: one file in the data directory, in WAL
// mode, whose transactions begin IMMEDIATE, so writers are serialized
// whatever the process.
type sqlite struct{}

func (sqlite) name() string           { return "sqlite" }
func (sqlite) rebind(q string) string { return q }
func (sqlite) jsonText(column, key string) string {
	return "json_extract(" + column + ", '$." + key + "')"
}
func (sqlite) forUpdate() string { return "" }

// clockMicros: 'now' is fixed for the statement, to the millisecond.
func (sqlite) clockMicros() string { return "CAST(unixepoch('subsec') * 1000000 AS INTEGER)" }

func (sqlite) uniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// unavailable is never so: the file is there, or every write fails alike.
func (sqlite) unavailable(error) bool { return false }

// diskFull: SQLITE_FULL ("database or disk is full"), which SQLite gives a
// write that found no room (ENOSPC), in the database, its journal or a
// temporary file.
func (sqlite) diskFull(err error) bool {
	var se *sqlitedrv.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL
}

// lock needs nothing: an IMMEDIATE transaction already excludes every other
// writer.
func (sqlite) lock(context.Context, db, string) error { return nil }

// sqliteDSN is the data source of the database file at path.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(ON)&_txlock=immediate&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(10000)"
}
