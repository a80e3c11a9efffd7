package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/toolhost/toolhost/internal/pgtest"
)

// takeOne takes a token from b at the test clock at (microseconds).
func takeOne(t interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
}, s *Store, b Bucket, at int64) Take {
	t.Helper()
	takes, ok, err := s.takeAt(context.Background(), []Bucket{b}, &at)
	if err != nil {
		t.Fatal(err)
	}
	if ok != takes[0].Granted {
		t.Fatalf("ok %v, take %+v", ok, takes[0])
	}
	return takes[0]
}

// TestTakeTokens: 5 per minute is 5 at once, then one every 12 s; a
// refusal says when the next token comes, to the microsecond.
func TestTakeTokens(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		b := Bucket{Role: "dev", Caller: "a1", Target: "run_command", Calls: 5, Per: time.Minute}
		const t0 = int64(1_700_000_000_000_000)
		for i := range 5 {
			if got := takeOne(t, s, b, t0); !got.Granted || got.Left != 4-i {
				t.Fatalf("take %d: %+v", i, got)
			}
		}
		if got := takeOne(t, s, b, t0+1_000_000); got.Granted || got.RetryAfter != 11*time.Second {
			t.Fatalf("sixth take: %+v, want refused, retry after 11s", got)
		}
		if got := takeOne(t, s, b, t0+12_000_000); !got.Granted || got.Left != 0 {
			t.Fatalf("after 12 s: %+v", got)
		}
		other := b
		other.Caller = "a2"
		if got := takeOne(t, s, other, t0+12_000_000); !got.Granted || got.Left != 4 {
			t.Fatalf("another agent's bucket: %+v", got)
		}
		if got := takeOne(t, s, b, t0+12_000_000+time.Hour.Microseconds()); !got.Granted || got.Left != 4 {
			t.Fatalf("after an hour: %+v", got)
		}
		// On the database's clock.
		b.Target = "clock"
		for i := range 5 {
			if takes, ok, err := s.TakeTokens(context.Background(), []Bucket{b}); err != nil || !ok || takes[0].Left != 4-i {
				t.Fatalf("take %d on the database's clock: %+v %v %v", i, takes, ok, err)
			}
		}
		takes, ok, err := s.TakeTokens(context.Background(), []Bucket{b})
		if err != nil || ok || takes[0].RetryAfter <= 0 || takes[0].RetryAfter > 12*time.Second {
			t.Fatalf("sixth take on the database's clock: %+v %v %v", takes, ok, err)
		}
	})
}

// TestTakeTokensAllOrNothing: a take of two buckets that one refuses spends
// nothing from the other.
func TestTakeTokensAllOrNothing(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		one := Bucket{Role: "dev", Caller: "a", Target: "run_command", Calls: 1, Per: time.Minute}
		five := Bucket{Role: "dev", Caller: "a", Target: "*", Calls: 5, Per: time.Minute}
		at := int64(1_700_000_000_000_000)
		takes, ok, err := s.takeAt(context.Background(), []Bucket{one, five}, &at)
		if err != nil || !ok || takes[0].Left != 0 || takes[1].Left != 4 {
			t.Fatalf("first: %+v %v %v", takes, ok, err)
		}
		takes, ok, err = s.takeAt(context.Background(), []Bucket{one, five}, &at)
		if err != nil || ok || takes[0].Granted || takes[0].RetryAfter != time.Minute || !takes[1].Granted {
			t.Fatalf("second: %+v %v %v", takes, ok, err)
		}
		if got := takeOne(t, s, five, at); got.Left != 3 {
			t.Fatalf("the refused take spent a token of the other bucket: %+v", got)
		}
		if _, ok, err := s.TakeTokens(context.Background(), nil); !ok || err != nil {
			t.Fatalf("no buckets: %v %v", ok, err)
		}
		for _, bad := range []Bucket{{Calls: 0, Per: time.Minute}, {Calls: 1, Per: 0}, {Calls: maxBucketCalls + 1, Per: time.Hour}} {
			if _, _, err := s.TakeTokens(context.Background(), []Bucket{bad}); !errors.Is(err, ErrInvalid) {
				t.Fatalf("%+v: %v", bad, err)
			}
		}
	})
}

// TestTakeTokensProperty proves, for any bucket size and any sequence of
// takes at any times (backwards too: the clocks of the statements of two
// hosts need not be in order), the bound a token bucket promises: for every
// window [a, b], the takes granted at times within it number at most
// Calls + floor((b-a)/T), T = ceil(Per/Calls) >= Per/Calls, so at most
// Calls + Calls·(b-a)/Per. Besides, the bucket is not stingier than
// promised: a refusal's RetryAfter is exact (a take that much later is
// granted, one a microsecond earlier is not), and a bucket left alone for
// Calls·T (Per, rounded up to a multiple of Calls microseconds) grants Calls
// takes at once.
func TestTakeTokensProperty(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		var n atomic.Int64
		rapid.Check(t, func(rt *rapid.T) {
			b := Bucket{Role: "r", Caller: "a", Target: fmt.Sprint("t", n.Add(1)),
				Calls: rapid.IntRange(1, 8).Draw(rt, "calls"),
				Per:   time.Duration(rapid.Int64Range(1, 10_000_000).Draw(rt, "per_us")) * time.Microsecond}
			per := b.Per.Microseconds()
			step := (per + int64(b.Calls) - 1) / int64(b.Calls)
			at := int64(1_700_000_000_000_000)
			var granted []int64
			for i, k := 0, rapid.IntRange(1, 40).Draw(rt, "takes"); i < k; i++ {
				at += rapid.Int64Range(-per, 2*per).Draw(rt, "dt")
				got := takeOne(rt, s, b, at)
				if got.Granted {
					granted = append(granted, at)
					continue
				}
				if got.RetryAfter <= 0 {
					rt.Fatalf("refused with retry after %s", got.RetryAfter)
				}
				if rapid.Bool().Draw(rt, "retry") {
					retry := at + got.RetryAfter.Microseconds()
					if early := takeOne(rt, s, b, retry-1); early.Granted {
						rt.Fatalf("granted 1µs before the retry time: %+v", early)
					}
					if late := takeOne(rt, s, b, retry); !late.Granted {
						rt.Fatalf("refused at the retry time: %+v", late)
					}
					at = retry
					granted = append(granted, at)
				}
			}
			for _, a := range granted {
				for _, b2 := range granted {
					if b2 < a {
						continue
					}
					in := 0
					for _, g := range granted {
						if g >= a && g <= b2 {
							in++
						}
					}
					if limit := b.Calls + int((b2-a)/step); in > limit {
						rt.Fatalf("%d takes granted in [%d, %d] (%dµs), bound %d (calls %d, T %dµs)", in, a, b2, b2-a, limit, b.Calls, step)
					}
				}
			}
			maxAt := at
			for _, g := range granted {
				maxAt = max(maxAt, g)
			}
			at = maxAt + int64(b.Calls)*step
			for i := range b.Calls {
				if got := takeOne(rt, s, b, at); !got.Granted || got.Left != b.Calls-1-i {
					rt.Fatalf("take %d after Calls·T alone: %+v", i, got)
				}
			}
		})
	})
}

// TestTakeTokensConcurrently: many takers at once never get more than the
// bucket holds (run with -race).
func TestTakeTokensConcurrently(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		b := Bucket{Role: "dev", Caller: "a", Target: "*", Calls: 20, Per: time.Hour}
		pair := []Bucket{b, {Role: "dev", Caller: "a", Target: "run_command", Calls: 50, Per: time.Hour}}
		var granted atomic.Int64
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for range 8 {
					bs := pair[:1+g%2]
					_, ok, err := s.TakeTokens(context.Background(), bs)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						granted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if granted.Load() != 20 {
			t.Fatalf("%d takes granted from a bucket of 20", granted.Load())
		}
	})
}

// TestTakeTokensSharedByStores: two stores on one PostgreSQL database (two
// hosts) take from the same buckets.
func TestTakeTokensSharedByStores(t *testing.T) {
	dsn := pgtest.Start(t)
	a := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: dsn})
	b := openWith(t, t.TempDir(), Options{Driver: DriverPostgres, DSN: dsn})
	bucket := []Bucket{{Role: "dev", Caller: "a", Target: "run_command", Calls: 5, Per: time.Minute}}
	for i := range 6 {
		s := []*Store{a, b}[i%2]
		_, ok, err := s.TakeTokens(context.Background(), bucket)
		if err != nil || ok != (i < 5) {
			t.Fatalf("take %d: %v %v", i, ok, err)
		}
	}
}

// TestSweepBuckets: the rows of buckets full again are deleted, and a
// bucket swept is full.
func TestSweepBuckets(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		at := int64(1_700_000_000_000_000)
		for i := range 3 {
			takeOne(t, s, Bucket{Role: "dev", Caller: fmt.Sprint("gone", i), Target: "*", Calls: 2, Per: time.Minute}, at)
		}
		kept := Bucket{Role: "dev", Caller: "busy", Target: "*", Calls: 2, Per: time.Hour}
		takeOne(t, s, kept, at)
		count := func() int {
			var n int
			if err := s.db.queryRow(context.Background(), `SELECT count(*) FROM rate_buckets`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := count(); n != 4 {
			t.Fatalf("%d rows", n)
		}
		s.sweptAt.Store(0)
		at += (time.Minute + sweepSlack).Microseconds() + 1
		if got := takeOne(t, s, kept, at); !got.Granted || got.Left != 0 {
			t.Fatalf("kept bucket: %+v", got)
		}
		if n := count(); n != 1 {
			t.Fatalf("%d rows after the sweep, want the busy agent's alone", n)
		}
		if got := takeOne(t, s, Bucket{Role: "dev", Caller: "gone0", Target: "*", Calls: 2, Per: time.Minute}, at); !got.Granted || got.Left != 1 {
			t.Fatalf("a swept bucket: %+v", got)
		}
	})
}

// BenchmarkTakeTokens is one take from one bucket, on each engine, with the
// database to itself.
func BenchmarkTakeTokens(b *testing.B) {
	for _, o := range []Options{{}, {Driver: DriverPostgres}} {
		b.Run(cmp.Or(o.Driver, DriverSQLite), func(b *testing.B) {
			if o.Driver == DriverPostgres {
				o.DSN = pgtest.Start(b)
			}
			s := openWith(b, b.TempDir(), o)
			bucket := []Bucket{{Role: "dev", Caller: "a", Target: "*", Calls: 1 << 30, Per: time.Hour}}
			for b.Loop() {
				if _, ok, err := s.TakeTokens(context.Background(), bucket); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
