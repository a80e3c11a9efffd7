package toolhost

import (
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestThrottleKeepsTheNewest: of a burst of reports, the first goes at once
// and the newest when the interval ends; nothing in between.
func TestThrottleKeepsTheNewest(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	sent := make(chan struct{}, 10)
	p := Progress(func(_, _ float64, msg string) {
		mu.Lock()
		got = append(got, msg)
		mu.Unlock()
		sent <- struct{}{}
	}).Throttle(20 * time.Millisecond)
	for _, msg := range []string{"one", "two", "three"} {
		p(0, 0, msg)
	}
	<-sent
	<-sent
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []string{"one", "three"}) {
		t.Errorf("passed on %q, want one and three", got)
	}
}

// TestThrottleInvariants: whatever the reports, a final one is passed on at
// once, after the newest report held, and the reports passed on are in the
// order given.
func TestThrottleInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var got []float64
		p := Progress(func(done, _ float64, _ string) { got = append(got, done) }).Throttle(time.Hour)
		n := rapid.IntRange(1, 50).Draw(t, "reports")
		final := rapid.IntRange(0, n-1).Draw(t, "final")
		for i := range n {
			total := 0.0
			if i == final {
				total = float64(i)
			}
			p(float64(i), total, "")
			if i == final && got[len(got)-1] != float64(i) {
				t.Fatalf("final report %d held; passed on %v", i, got)
			}
			if i == final && i > 0 && !slices.Contains(got, float64(i-1)) {
				t.Fatalf("the report before the final %d was lost; passed on %v", i, got)
			}
		}
		if !slices.IsSorted(got) || got[0] != 0 {
			t.Fatalf("passed on %v, want the first, in order", got)
		}
	})
}
