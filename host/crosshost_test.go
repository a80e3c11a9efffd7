package host

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/store"
)

// pgStores opens n stores on one fresh PostgreSQL database, as n hosts
// sharing it do, each with a data directory of its own.
func pgStores(t *testing.T, n int) []*store.Store {
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
