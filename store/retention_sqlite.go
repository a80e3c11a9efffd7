package store

import (
	"context"
	"fmt"
	"time"
)

// maintainEvents needs nothing on SQLite: one table, no partitions.
func (sqlite) maintainEvents(context.Context, *Store, time.Time) error { return nil }

// pruneEvents exports the events older than r.Before, oldest first, up to
// maxExportRows to a file, then deletes exactly those in batches of
// r.batch, each its own transaction taken in turn with the event writer's
// (Store.turn); it repeats until none is left. The newest event is kept:
// SQLite numbers a new row after the greatest id left, and ids must not go
// back.
func (sqlite) pruneEvents(ctx context.Context, s *Store, r Retention, res *RetentionResult) error {
	cutoff := stamp(r.Before)
	for {
		var newest int64
		if err := s.db.queryRow(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&newest); err != nil {
			return err
		}
		x, err := newExport(r.ExportDir)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		rows, err := s.db.query(ctx, `SELECT `+eventColumns+` FROM events WHERE ts < ? AND id < ? ORDER BY id LIMIT ?`, cutoff, newest, maxExportRows)
		if err != nil {
			x.abort()
			return err
		}
		first, last, err := x.add(ctx, rows, r.pace)
		if err != nil || x.rows == 0 {
			x.abort()
			return err
		}
		path, err := x.commit(fmt.Sprintf("events-%d-%d.jsonl.gz", first, last))
		if err != nil {
			return err
		}
		res.Exported += x.rows
		res.Files = append(res.Files, path)
		if err := deleteExported(ctx, s, r, cutoff, first, last, res); err != nil {
			return err
		}
		if x.rows < maxExportRows {
			return nil
		}
	}
}

// deleteExported deletes the events older than cutoff with ids from first
// to last, r.batch at a time, resting on r.pace after each batch.
func deleteExported(ctx context.Context, s *Store, r Retention, cutoff string, first, last int64, res *RetentionResult) error {
	for lo := first; lo <= last; {
		var n int64
		err := s.tx(ctx, func(tx db) error {
			var hi int64
			err := tx.queryRow(ctx, `SELECT coalesce(max(id), 0) FROM (SELECT id FROM events WHERE id >= ? AND id <= ? AND ts < ? ORDER BY id LIMIT ?)`,
				lo, last, cutoff, r.batch).Scan(&hi)
			if err != nil || hi == 0 {
				lo = last + 1
				return err
			}
			d, err := tx.exec(ctx, `DELETE FROM events WHERE id >= ? AND id <= ? AND ts < ?`, lo, hi, cutoff)
			if err == nil {
				n, err = d.RowsAffected()
			}
			lo = hi + 1
			return err
		})
		if err != nil {
			return err
		}
		res.Deleted += n
		if r.afterBatch != nil && n > 0 {
			r.afterBatch(int(n))
		}
		if err := r.pace.rest(ctx); err != nil {
			return err
		}
	}
	return nil
}

// eventBytes sums the pages of the events table and its indexes, as the
// dbstat table counts them.
func (sqlite) eventBytes(ctx context.Context, s *Store) (int64, error) {
	var n int64
	err := s.db.queryRow(ctx, `SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'events'
		OR name IN (SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events')`).Scan(&n)
	return n, err
}
