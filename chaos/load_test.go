package chaos

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/gcpolicy"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// TestSustainedLoad makes 100,000 calls of a no-op tool at concurrency 64:
// every call succeeds, the host's goroutines come back to their number
// before the load, its RSS stays within a bound, and each call has its
// tool_call.started and tool_call.completed events, none lost.
func TestSustainedLoad(t *testing.T) {
	const (
		calls       = 100_000
		warmUp      = 10_000
		concurrency = 64
		// goroutineSlack allows for the few goroutines that come and go on
		// their own (the store's watch, gRPC's keepalive and such).
		goroutineSlack = 5
		// rssSlack bounds the RSS growth between the warm-up and the end.
		// Everything per call is garbage once the call returns; what may
		// remain is heap the Go runtime has not yet given back (under
		// serve's policy, applied below, the GC lets the heap reach three
		// times the live data before collecting, and it returns freed
		// pages to the OS lazily) and the event writer's queue, up to
		// 65,536 events of a few hundred bytes each, ~32 MiB at worst if
		// SQLite falls behind. 64 MiB is twice that: a leak of even 1 KiB
		// per call (100 MB over the run) would pass it.
		rssSlack = 64 << 20
	)
	// The host runs under serve's garbage-collection policy, as it would
	// in serve, whose bound this is.
	gc := gcpolicy.Decide(config.GC{}, os.Getenv, "/")
	undo := gc.Apply()
	t.Cleanup(func() { undo.Apply() })
	t.Logf("gc: %s", gc)
	h := startHost(t, newConfig(t, pluginBlock("loader", behaveGood, nil)), testOptions(t))
	warm := newAgent(t, h, "chaos-load", "loader")
	measured := newAgent(t, h, "chaos-load", "loader")

	run := func(n int, agent string) {
		t.Helper()
		var next, failed atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		start := time.Now()
		for range concurrency {
			wg.Go(func() {
				req := toolhost.CallRequest{Tool: "loader_noop", Context: toolhost.CallContext{AgentID: agent}}
				for next.Add(1) <= int64(n) {
					r := req
					res, err := h.Call(context.Background(), &r)
					if err == nil && !res.OK {
						err = fmt.Errorf("result %+v", res)
					}
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d calls at concurrency %d in %s", n, concurrency, time.Since(start).Round(time.Millisecond))
		if f := failed.Load(); f > 0 {
			t.Fatalf("%d of %d calls failed, the first with: %v", f, n, firstErr.Load())
		}
	}

	run(warmUp, warm)
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	goroutines, rss0 := runtime.NumGoroutine(), rss(t)

	run(calls, measured)
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	rss1 := rss(t)
	after := runtime.NumGoroutine()
	proctest.Eventually(t, fmt.Sprintf("the goroutines settle to at most %d + %d (now %d)", goroutines, goroutineSlack, after), func() bool {
		after = runtime.NumGoroutine()
		return after <= goroutines+goroutineSlack
	})
	t.Logf("goroutines: %d after the warm-up, %d after the load", goroutines, after)
	t.Logf("RSS: %.1f MiB after the warm-up, %.1f MiB after the load (%+.1f MiB)",
		float64(rss0)/(1<<20), float64(rss1)/(1<<20), float64(rss1-rss0)/(1<<20))
	if rss1-rss0 > rssSlack {
		t.Errorf("RSS grew by %.1f MiB over the load, more than %d MiB", float64(rss1-rss0)/(1<<20), rssSlack>>20)
	}

	started := events(t, h, measured, store.EventCallStarted)
	nStarted, ids := len(started), make(map[string]bool, len(started))
	for _, e := range started {
		ids[e.CallID] = true
	}
	started = nil
	completed := events(t, h, measured, store.EventCallCompleted)
	missing := len(ids)
	for _, e := range completed {
		if ids[e.CallID] {
			missing--
			ids[e.CallID] = false
		}
	}
	failed := events(t, h, measured, store.EventCallFailed)
	t.Logf("events of the %d calls: %d started (%d call ids), %d completed, %d failed", calls, nStarted, len(ids), len(completed), len(failed))
	if nStarted != calls || len(ids) != calls || len(completed) != calls || len(failed) != 0 || missing != 0 {
		t.Errorf("events: %d started (%d call ids), %d completed, %d failed, %d started without completion; want %d, %d, %d, 0, 0",
			nStarted, len(ids), len(completed), len(failed), missing, calls, calls, calls)
	}
	if st := pluginStatus(h, "loader"); st.State != host.StateRunning || st.Restarts != 0 {
		t.Errorf("plugin after the load: %+v", st)
	}
}
