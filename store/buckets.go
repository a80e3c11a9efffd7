package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Bucket is the token bucket of one call limit for one caller: the calls of
// a credential (Caller; "" for a limit that the role's callers share) of a
// role under one limit target. It holds Calls tokens at most, and gains one every
// Per/Calls, rounded up to the microsecond so that it never refills faster.
type Bucket struct {
	Role, Caller, Target string
	Calls                int
	Per                  time.Duration
}

// Take is one bucket's verdict on a take.
type Take struct {
	// Granted says the bucket had a token.
	Granted bool
	// Left is how many tokens the bucket holds after the take (0 when
	// refused).
	Left int
	// RetryAfter is, when refused, how long until the bucket holds a token.
	RetryAfter time.Duration
}

// maxBucketCalls bounds a bucket's size, far above any useful limit, so
// that its arithmetic in microseconds stays within 64 bits.
const maxBucketCalls = 1 << 30

// Full buckets are swept (their rows deleted) at most every sweepEvery by
// each store, sweepBatch rows at a time, once full for sweepSlack: a take
// whose statement started before the sweep's (it waited for a lock) still
// finds its bucket's row.
const (
	sweepEvery = time.Minute
	sweepBatch = 1000
	sweepSlack = time.Minute
)

// errRefused ends (and so rolls back) the transaction of a take that a
// bucket refused.
var errRefused = errors.New("refused")

// TakeTokens takes one token from each bucket, all or none: ok when every
// bucket had one, and each spent it; otherwise nothing is spent, and the
// Takes (in the order of buckets) say which refused and when each will
// have a token. No buckets is ok.
//
// A bucket is a GCRA cell kept in the database: its theoretical arrival
// time tat, past which it is full. A take at time now, with T = Per/Calls,
// is granted when max(tat, now) - now <= (Calls-1)·T, and then sets tat to
// max(tat, now) + T. The arithmetic runs in one statement per bucket (an
// upsert), on the database's clock, so that hosts sharing a PostgreSQL
// database share the buckets whatever their own clocks say; several
// buckets are taken in one transaction, in a fixed order (no deadlock
// between two such takes). A bucket full again is the same as none: its
// row is deleted by a sweep, so the rows do not outgrow the buckets in use
// within the last Per.
func (s *Store) TakeTokens(ctx context.Context, buckets []Bucket) ([]Take, bool, error) {
	return s.takeAt(ctx, buckets, nil)
}

// takeAt is [Store.TakeTokens] at the time at (microseconds since the
// epoch) instead of the database's clock when at is not nil: the tests'
// clock.
func (s *Store) takeAt(ctx context.Context, buckets []Bucket, at *int64) ([]Take, bool, error) {
	takes := make([]Take, len(buckets))
	for _, b := range buckets {
		if b.Calls < 1 || b.Calls > maxBucketCalls || b.Per < time.Microsecond {
			return nil, false, fmt.Errorf("store: take tokens: %w: bucket %s/%s/%s of %d calls per %s: want 1 to %d calls per 1µs or more",
				ErrInvalid, b.Role, b.Caller, b.Target, b.Calls, b.Per, maxBucketCalls)
		}
	}
	order := make([]int, len(buckets))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := buckets[i], buckets[j]
		return cmp.Or(cmp.Compare(a.Role, b.Role), cmp.Compare(a.Caller, b.Caller), cmp.Compare(a.Target, b.Target))
	})
	ok := true
	takeAll := func(d db) error {
		ok = true
		for _, i := range order {
			t, err := s.take(ctx, d, buckets[i], at)
			if err != nil {
				return err
			}
			takes[i], ok = t, ok && t.Granted
		}
		if !ok {
			return errRefused
		}
		return nil
	}
	var err error
	if s.path != "" {
		// SQLite: wait for the event writer's batch in turn (Store.turn)
		// rather than in SQLite's busy handler, which sleeps (8775 against
		// 3119 calls/s at 32 callers of one bucket, p99 1.6 against 3.3 ×
		// an unlimited call: BenchmarkLimitedCall).
		s.turn.Lock()
		defer s.turn.Unlock()
	}
	if len(buckets) == 1 {
		err = takeAll(s.db) // one statement: a refusal changes nothing
	} else {
		err = s.txInTurn(ctx, takeAll) // in turn on SQLite, taken above
	}
	if err != nil && !errors.Is(err, errRefused) {
		return nil, false, fmt.Errorf("store: take tokens: %w", err)
	}
	s.sweepBuckets(ctx, at)
	return takes, ok, nil
}

// take takes a token from one bucket in d, by the statement described at
// [Store.TakeTokens].
func (s *Store) take(ctx context.Context, d db, b Bucket, at *int64) (Take, error) {
	per := int64(b.Per / time.Microsecond)
	calls := int64(b.Calls)
	step := (per + calls - 1) / calls // T, rounded up
	burst := (calls - 1) * step       // how far past now tat may be before a take
	stmt, err := s.takeStatement(ctx)
	if err != nil {
		return Take{}, err
	}
	var tat, seen, granted int64
	err = d.stmt(ctx, stmt).QueryRowContext(ctx, b.Role, b.Caller, b.Target, step, at, burst, burst, step).Scan(&tat, &seen, &granted)
	if err != nil {
		return Take{}, err
	}
	ahead := max(tat, seen) - seen // how far tat is past now
	if granted == 0 {
		return Take{RetryAfter: time.Duration(ahead-burst) * time.Microsecond}, nil
	}
	left := 0
	if ahead <= burst {
		left = int((burst-ahead)/step) + 1
	}
	return Take{Granted: true, Left: left}, nil
}

// takeStatement returns the take's statement, prepared on the first take
// (prepared again after a failure, such as PostgreSQL being unreachable).
// The statement is the upsert described at [Store.TakeTokens]: every
// expression of its update reads the row as it was, so the verdict and the
// new tat are computed alike.
func (s *Store) takeStatement(ctx context.Context) (*sql.Stmt, error) {
	if stmt := s.takeStmt.Load(); stmt != nil {
		return stmt, nil
	}
	next := `CASE WHEN rate_buckets.tat > excluded.seen THEN rate_buckets.tat ELSE excluded.seen END`
	stmt, err := s.db.prepare(ctx, `INSERT INTO rate_buckets (role, caller, target, tat, seen, granted)
		SELECT ?, ?, ?, c.n + ?, c.n, 1 FROM (SELECT COALESCE(CAST(? AS BIGINT), `+s.eng.clockMicros()+`) AS n) AS c WHERE true
		ON CONFLICT (role, caller, target) DO UPDATE SET
			granted = CASE WHEN `+next+` - excluded.seen <= ? THEN 1 ELSE 0 END,
			tat = CASE WHEN `+next+` - excluded.seen <= ? THEN `+next+` + ? ELSE rate_buckets.tat END,
			seen = excluded.seen
		RETURNING tat, seen, granted`)
	if err != nil {
		return nil, err
	}
	if !s.takeStmt.CompareAndSwap(nil, stmt) {
		stmt.Close()
	}
	return s.takeStmt.Load(), nil
}

// sweepBuckets deletes, at most every sweepEvery, up to sweepBatch rows of
// buckets full for sweepSlack (tat that far past), which are the same as no
// row. A failure is left to the next sweep: it changes no verdict.
func (s *Store) sweepBuckets(ctx context.Context, at *int64) {
	now := time.Now().UnixNano()
	last := s.sweptAt.Load()
	if now-last < int64(sweepEvery) || !s.sweptAt.CompareAndSwap(last, now) {
		return
	}
	_, _ = s.db.exec(ctx, `DELETE FROM rate_buckets WHERE (role, caller, target) IN
		(SELECT role, caller, target FROM rate_buckets WHERE tat < COALESCE(CAST(? AS BIGINT), `+s.eng.clockMicros()+`) - ? LIMIT ?)`, at, sweepSlack.Microseconds(), sweepBatch)
}
