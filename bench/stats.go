package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Series is the latency distribution and throughput of one call path at one
// concurrency, accumulated over the rounds it ran in.
type Series struct {
	Path  string          // the call path's name
	Conc  int             // concurrent callers
	Lat   []time.Duration // one entry per call, sorted once Finish is called
	Calls int             // calls made
	Wall  time.Duration   // time spent running them, summed over the rounds
}

// Finish sorts the samples; the percentile methods need it.
func (s *Series) Finish() { slices.Sort(s.Lat) }

// P returns the q-quantile (0 < q ≤ 1) of the samples by nearest rank.
func (s *Series) P(q float64) time.Duration { return percentile(s.Lat, q) }

// Rate returns calls per second over the wall time.
func (s *Series) Rate() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return float64(s.Calls) / s.Wall.Seconds()
}

// percentile returns the q-quantile of sorted by nearest rank: the smallest
// sample such that at least q of all samples are at or below it.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// median returns the median of ds (not necessarily sorted), by nearest rank.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return percentile(s, 0.5)
}

// callerKey is the key of the caller's number in the context of its calls.
type callerKey struct{}

// callerOf returns the number of the caller whose call ctx is, 0 to conc-1
// in a round of runRound; 0 outside one.
func callerOf(ctx context.Context) int {
	i, _ := ctx.Value(callerKey{}).(int)
	return i
}

// runRound makes n calls of op from conc goroutines (n/conc each, started
// together, each numbered in the context of its calls: see callerOf) and
// returns each call's latency and the round's wall time. The first error
// stops the round.
func runRound(ctx context.Context, op func(context.Context) error, conc, n int) ([]time.Duration, time.Duration, error) {
	per := max(n/conc, 1)
	lat := make([][]time.Duration, conc)
	errs := make([]error, conc)
	var start, done sync.WaitGroup
	start.Add(1)
	for w := range conc {
		lat[w] = make([]time.Duration, 0, per)
		ctx := context.WithValue(ctx, callerKey{}, w)
		done.Go(func() {
			start.Wait()
			for range per {
				t := time.Now()
				if err := op(ctx); err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	t0 := time.Now()
	start.Done()
	done.Wait()
	wall := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return slices.Concat(lat...), wall, nil
}

// fmtDur formats a latency in µs or ms with three significant digits.
func fmtDur(d time.Duration) string {
	us := float64(d.Nanoseconds()) / 1e3
	switch {
	case us < 10:
		return fmt.Sprintf("%.2f µs", us)
	case us < 1000:
		return fmt.Sprintf("%.0f µs", us)
	case us < 10000:
		return fmt.Sprintf("%.2f ms", us/1e3)
	}
	return fmt.Sprintf("%.1f ms", us/1e3)
}

// ratio is a measured ratio held against a target: at most Max when Max is
// set, at least Min when Min is set, informative when neither is.
type ratio struct {
	Name     string  // what is compared, such as "Host.Call / raw gRPC, p50, c=1"
	Value    float64 // the measured ratio
	Max, Min float64 // the target bound, zero when none
}

// Verdict returns ✓ when the ratio meets its target, ✗ when it misses, and
// "–" when it has none.
func (r ratio) Verdict() string {
	switch {
	case r.Max > 0 && r.Value <= r.Max, r.Min > 0 && r.Value >= r.Min:
		return "✓"
	case r.Max > 0 || r.Min > 0:
		return "✗"
	}
	return "–"
}

// Target describes the bound, such as "≤ 1.15".
func (r ratio) Target() string {
	switch {
	case r.Max > 0:
		return fmt.Sprintf("≤ %.2f", r.Max)
	case r.Min > 0:
		return fmt.Sprintf("≥ %.2f", r.Min)
	}
	return "–"
}
