package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// pgStores opens n stores on one fresh PostgreSQL database, as n hosts
// sharing it do, each with a data directory of its own.
func pgStores(t testing.TB, n int) []*store.Store {
	t.Helper()
	dsn := pgtest.Start(t)
	out := make([]*store.Store, n)
	for i := range out {
		st, err := store.OpenWith(context.Background(), t.TempDir(), store.Options{Driver: store.DriverPostgres, DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		out[i] = st
	}
	return out
}

// TestCallIDAcrossHosts: two hosts on one PostgreSQL database share call
// ids: a call id used on A and repeated on B replays A's result; the same id
// with other arguments fails on B; concurrent repeats on both hosts run the
// tool once; a call that could not be carried out on A releases its id, so
// B runs it.
func TestCallIDAcrossHosts(t *testing.T) {
	sts := pgStores(t, 2)
	a, pa := probeHost(t, nil, &Options{Store: sts[0]})
	b, pb := probeHost(t, nil, &Options{Store: sts[1]})
	ran := func() int32 { return pa.calls.Load() + pb.calls.Load() }

	first, err := do(a, "echo", `{"text":"x"}`, "shared-1")
	if err != nil || !first.OK {
		t.Fatalf("on A: %+v, %v", first, err)
	}
	again, err := do(b, "echo", `{"text":"x"}`, "shared-1")
	if err != nil || again.Stdout != first.Stdout || again.Meta["replayed"] != true || ran() != 1 {
		t.Fatalf("repeated on B: %+v, %v (the tool ran %d times)", again, err, ran())
	}
	if _, err := do(b, "echo", `{"text":"y"}`, "shared-1"); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("same id, other arguments, on B: %v", err)
	}

	var wg sync.WaitGroup
	for i := range 16 {
		h := []*Host{a, b}[i%2]
		wg.Go(func() {
			if res, err := do(h, "slow", `{}`, "shared-2"); err != nil || !res.OK {
				t.Errorf("a concurrent repeat: %+v, %v", res, err)
			}
		})
	}
	wg.Wait()
	if ran() != 2 {
		t.Fatalf("16 concurrent repeats on two hosts ran the tool %d times, want once", ran()-1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Call(ctx, &toolhost.CallRequest{Tool: "block", Context: toolhost.CallContext{CallID: "shared-3"}}); !errors.Is(err, toolhost.ErrCancelled) {
		t.Fatalf("cancelled on A: %v", err)
	}
	if res, err := do(b, "echo", `{}`, "shared-3"); err != nil || res.Meta["replayed"] != nil {
		t.Fatalf("retried on B after A's call failed: %+v, %v", res, err)
	}
}

// TestPostgresOutage: PostgreSQL stopped while callers keep calling: the
// calls go on, Ready says the store does not answer, and once PostgreSQL
// is back the host is ready again without a restart, and every call's
// events are written.
func TestPostgresOutage(t *testing.T) {
	cluster := pgtest.New(t)
	st, err := store.OpenWith(context.Background(), t.TempDir(), store.Options{Driver: store.DriverPostgres, DSN: cluster.CreateDB(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, _ := probeHost(t, nil, &Options{Store: st})
	ctx := context.Background()

	var calls atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if res, err := do(h, "echo", `{"text":"x"}`, ""); err != nil || !res.OK {
					t.Errorf("a call failed: %+v, %v", res, err)
					return
				}
				calls.Add(1)
			}
		})
	}
	waitCalls := func(n int64, what string) {
		t.Helper()
		proctest.Eventually(t, fmt.Sprintf("%d calls %s", n, what), func() bool { return calls.Load() >= n })
	}
	waitCalls(100, "before the outage")
	cluster.Stop()
	during := calls.Load()
	waitCalls(during+500, "while PostgreSQL is down")
	if err := h.Ready(ctx); err == nil || !strings.Contains(err.Error(), "store") {
		t.Fatalf("Ready while PostgreSQL is down: %v", err)
	}
	if err := cluster.Start(); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "ready after PostgreSQL came back", func() bool { return h.Ready(ctx) == nil })
	close(stop)
	wg.Wait()
	proctest.Eventually(t, "the events are written after PostgreSQL came back", func() bool { return h.Events().Flush(ctx) == nil })
	evs, err := h.Events().List(ctx, store.EventFilter{Type: store.EventCallCompleted, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if failed, overflowed := h.events.Lost(); int64(len(evs)) != calls.Load() || failed+overflowed != 0 {
		t.Fatalf("%d calls, %d completed events written, %d lost", calls.Load(), len(evs), failed+overflowed)
	}
	t.Logf("%d calls, %d of them while PostgreSQL was down; every event written after it came back", calls.Load(), calls.Load()-during)
}
