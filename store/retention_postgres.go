package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// On PostgreSQL the events table is partitioned by day on ts
// (migrations/postgres/014): a partition events_pYYYYMMDD holds the events
// of one UTC day, and events_default whatever no partition holds, so that
// an insert never fails. Hosts create the partitions ahead
// (maintainEvents), and retention drops whole days.

// partitionsAhead is how many days after today maintainEvents makes
// partitions for, so that a host stopped for a while still finds them.
const partitionsAhead = 2

// partitionPrefix begins the name of each day's partition, followed by
// the day as dayName formats it.
const (
	partitionPrefix = "events_p"
	dayName         = "20060102"
	dayBound        = "2006-01-02" // how a day starts ts's text, and bounds a partition
)

// dayPartitions returns the days of the events table's partitions, oldest
// first.
func dayPartitions(ctx context.Context, d db) ([]time.Time, error) {
	names, err := queryAll(ctx, d, "partitions", func(row scanner) (name string, err error) { return name, row.Scan(&name) },
		`SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'events'::regclass`)
	if err != nil {
		return nil, err
	}
	var days []time.Time
	for _, name := range names {
		if day, ok := strings.CutPrefix(name, partitionPrefix); ok {
			if t, err := time.Parse(dayName, day); err == nil {
				days = append(days, t)
			}
		}
	}
	slices.SortFunc(days, time.Time.Compare)
	return days, nil
}

// maintainEvents creates the partitions of today and partitionsAhead days
// after, and of every day whose events are in the default partition
// (those written before this or a database migrated from one table).
func (postgres) maintainEvents(ctx context.Context, s *Store, now time.Time) error {
	have, err := dayPartitions(ctx, s.db)
	if err != nil {
		return err
	}
	want, err := queryAll(ctx, s.db, "default partition", func(row scanner) (day time.Time, err error) {
		var text string
		if err = row.Scan(&text); err == nil {
			day, err = time.Parse(dayBound, text)
		}
		return day, err
	}, `SELECT DISTINCT left(ts, 10) FROM events_default`)
	if err != nil {
		return err
	}
	today := now.UTC().Truncate(24 * time.Hour)
	for i := range partitionsAhead + 1 {
		want = append(want, today.AddDate(0, 0, i))
	}
	for _, day := range want {
		if !slices.ContainsFunc(have, day.Equal) {
			if err := createPartition(ctx, s, day); err != nil {
				return err
			}
			have = append(have, day)
		}
	}
	for _, day := range have {
		s.days.Store(day.Format(dayName), true)
	}
	return nil
}

// createPartition makes the partition of a day, moving into it the day's
// events from the default partition: made apart and attached, which locks
// the events table less than CREATE TABLE … PARTITION OF would (writes go
// on), in one transaction that hosts take in turn.
func createPartition(ctx context.Context, s *Store, day time.Time) error {
	name := partitionPrefix + day.Format(dayName)
	from, to := day.Format(dayBound), day.AddDate(0, 0, 1).Format(dayBound)
	return s.tx(ctx, func(tx db) error {
		if err := s.eng.lock(ctx, tx, "partitions"); err != nil {
			return err
		}
		var exists bool
		if err := tx.queryRow(ctx, `SELECT to_regclass(?) IS NOT NULL`, name).Scan(&exists); err != nil || exists {
			return err
		}
		for _, q := range []string{
			`CREATE TABLE ` + name + ` (LIKE events INCLUDING DEFAULTS)`,
			`WITH moved AS (DELETE FROM events_default WHERE ts >= '` + from + `' AND ts < '` + to + `' RETURNING *) INSERT INTO ` + name + ` SELECT * FROM moved`,
			`ALTER TABLE events ATTACH PARTITION ` + name + ` FOR VALUES FROM ('` + from + `') TO ('` + to + `')`,
		} {
			if _, err := tx.exec(ctx, q); err != nil {
				return fmt.Errorf("partition %s: %w", name, err)
			}
		}
		return nil
	})
}

// pruneEvents drops the day partitions wholly older than r.Before, each
// after exporting it, under a session advisory lock that only one host
// holds: another host's pass at the same moment finds it taken and skips.
func (p postgres) pruneEvents(ctx context.Context, s *Store, r Retention, res *RetentionResult) error {
	conn, err := s.sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	key := lockKey("retention")
	var mine bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, key).Scan(&mine); err != nil {
		return err
	}
	if !mine {
		res.Skipped = true
		return nil
	}
	defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(hashtext($1))`, key)
	if r.held != nil {
		r.held()
	}
	if err := p.maintainEvents(ctx, s, time.Now()); err != nil {
		return err
	}
	days, err := dayPartitions(ctx, s.db)
	if err != nil {
		return err
	}
	for _, day := range days {
		if day.AddDate(0, 0, 1).After(r.Before) {
			break
		}
		if err := dropPartition(ctx, s, r, day, res); err != nil {
			return err
		}
	}
	return nil
}

// dropPartition exports a day's partition and drops it, in one
// transaction that keeps writes out of the partition meanwhile: the export
// holds exactly what is dropped, and a failed export drops nothing.
func dropPartition(ctx context.Context, s *Store, r Retention, day time.Time, res *RetentionResult) error {
	name := partitionPrefix + day.Format(dayName)
	var path string
	var rows int64
	err := s.tx(ctx, func(tx db) error {
		if _, err := tx.exec(ctx, `SET LOCAL lock_timeout = '10s'`); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `LOCK TABLE `+name+` IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		x, err := newExport(r.ExportDir)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		q, err := tx.query(ctx, `SELECT `+eventColumns+` FROM `+name+` ORDER BY id`)
		if err != nil {
			x.abort()
			return err
		}
		if _, _, err := x.add(ctx, q, r.pace); err != nil {
			x.abort()
			return err
		}
		if x.rows > 0 {
			if path, err = x.commit("events-" + day.Format(dayBound) + ".jsonl.gz"); err != nil {
				return err
			}
		} else {
			x.abort()
		}
		rows = x.rows
		_, err = tx.exec(ctx, `DROP TABLE `+name)
		return err
	})
	if err != nil {
		return fmt.Errorf("partition %s: %w", name, err)
	}
	s.days.Delete(day.Format(dayName))
	res.Partitions++
	res.Exported += rows
	res.Deleted += rows
	if path != "" {
		res.Files = append(res.Files, path)
	}
	return nil
}

// eventBytes sums the total size of the events table's partitions, their
// indexes and TOAST included.
func (postgres) eventBytes(ctx context.Context, s *Store) (int64, error) {
	var n int64
	err := s.db.queryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0)::bigint FROM pg_inherits WHERE inhparent = 'events'::regclass`).Scan(&n)
	return n, err
}
