package host

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// queueConfig is a probe host's config whose approver is the queue.
func queueConfig(timeout time.Duration) *config.Config {
	return &config.Config{Executor: config.Executor{Mode: "sequential", MaxParallel: 4, Approver: "queue", ApprovalTimeout: timeout, IdempotencyWindow: time.Hour}}
}

// asked is a call of the probe's guarded tool, in flight.
type asked struct {
	done chan struct{}
	res  *toolhost.Result
	err  error
	at   time.Time // when it returned
}

// ask calls the guarded tool on h in the background.
func ask(ctx context.Context, h *Host, args string) *asked {
	a := &asked{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.res, a.err = h.Call(ctx, &toolhost.CallRequest{Tool: "guarded", Arguments: []byte(args)})
		a.at = time.Now()
	}()
	return a
}

// wait returns once the call has, failing the test after proctest.Patience.
func (a *asked) wait(t *testing.T) *asked {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(proctest.Patience):
		t.Fatal("the call did not return")
	}
	return a
}

// pendingOn waits until h's queue lists a call of tool beside the ids
// given, and returns it.
func pendingOn(t *testing.T, h *Host, except ...string) ApprovalRequest {
	t.Helper()
	var got ApprovalRequest
	proctest.Eventually(t, "the call is pending", func() bool {
		for _, r := range h.Approvals().Pending() {
			if !slices.Contains(except, r.ID) {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// secretArgs holds a credential, which the queue shows redacted.
const secretArgs = `{"text":"push with ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"}`

// TestApprovalsAcrossHosts: two hosts on one PostgreSQL database share one
// queue: a call waiting on A is listed by B, redacted, and B's decision
// releases it on A (told by PostgreSQL, which nothing polls); a call cancelled on A drops out of B's
// list, and a decision on it fails.
func TestApprovalsAcrossHosts(t *testing.T) {
	sts := pgStores(t, 2)
	a, pa := probeHost(t, queueConfig(time.Minute), &Options{Store: sts[0]})
	b, _ := probeHost(t, queueConfig(time.Minute), &Options{Store: sts[1]})
	testAcrossHosts(t, a, b, pa)
}

// TestApprovalsAcrossHostsSQLite: the same with two hosts on one SQLite
// database, where the waiting host polls for the decision.
func TestApprovalsAcrossHostsSQLite(t *testing.T) {
	dir := t.TempDir()
	var sts []*store.Store
	for range 2 {
		st, err := store.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		sts = append(sts, st)
	}
	a, pa := probeHost(t, queueConfig(time.Minute), &Options{Store: sts[0]})
	b, _ := probeHost(t, queueConfig(time.Minute), &Options{Store: sts[1]})
	testAcrossHosts(t, a, b, pa)
}

func testAcrossHosts(t *testing.T, a, b *Host, pa *probe) {
	var seen []string
	decideOnB := func(args string, d Decision) *asked {
		t.Helper()
		call := ask(context.Background(), a, args)
		req := pendingOn(t, b, seen...)
		seen = append(seen, req.ID)
		if req.Tool != "guarded" || req.Group != "probe" || !strings.HasPrefix(req.ID, "appr_") || req.Expires.Sub(req.Requested) != time.Minute {
			t.Fatalf("pending on B = %+v", req)
		}
		if len(a.Approvals().Pending()) != 1 || a.Approvals().numWaiting() != 1 || b.Approvals().numWaiting() != 0 {
			t.Fatalf("pending on A = %+v", a.Approvals().Pending())
		}
		start := time.Now()
		if err := b.Approvals().Decide(req.ID, d); err != nil {
			t.Fatal(err)
		}
		call.wait(t)
		t.Logf("%s on B → the call returned on A in %v", d.Kind, call.at.Sub(start))
		// One decision: a second, on either host, fails.
		for _, h := range []*Host{a, b} {
			if err := h.Approvals().Decide(req.ID, Decision{Kind: Approve}); !errors.Is(err, toolhost.ErrValidation) || !errors.Is(err, store.ErrNotFound) ||
				!strings.Contains(err.Error(), "already") {
				t.Fatalf("deciding twice: %v", err)
			}
		}
		if p := b.Approvals().Pending(); len(p) != 0 {
			t.Fatalf("still pending: %+v", p)
		}
		return call
	}

	// The arguments are listed redacted; the tool gets them whole.
	call := ask(context.Background(), a, secretArgs)
	req := pendingOn(t, b)
	if strings.Contains(string(req.Arguments), "ghp_") || !json.Valid(req.Arguments) {
		t.Fatalf("pending arguments are not redacted: %s", req.Arguments)
	}
	_ = a.Approvals().Decide(req.ID, Decision{Kind: Deny}) // the call is retried below, decided on B
	call.wait(t)
	seen = append(seen, req.ID)

	// The tool echoes the arguments it got: whole, so its output is
	// redacted.
	if c := decideOnB(secretArgs, Decision{Kind: Approve}); c.err != nil || !strings.HasPrefix(c.res.Stdout, `{"text":"push with `) || c.res.Meta["redacted"] != true {
		t.Fatalf("approved: %+v, %v", c.res, c.err)
	}
	if c := decideOnB(`{"text":"a"}`, Decision{Kind: Modify, Arguments: json.RawMessage(`{"text":"b"}`), Reason: "narrower"}); c.err != nil || c.res.Stdout != `{"text":"b"}` {
		t.Fatalf("modified: %+v, %v", c.res, c.err)
	}
	if c := decideOnB(`{"text":"a"}`, Decision{Kind: Modify, Arguments: json.RawMessage(`{"text":1}`)}); !errors.Is(c.err, toolhost.ErrValidation) {
		t.Fatalf("modified to invalid arguments: %v", c.err)
	}
	if c := decideOnB(`{}`, Decision{Kind: Deny, Reason: "looks risky"}); !errors.Is(c.err, toolhost.ErrApprovalDenied) || !strings.Contains(c.err.Error(), "looks risky") {
		t.Fatalf("denied: %v", c.err)
	}
	if n := pa.calls.Load(); n != 2 {
		t.Fatalf("the tool ran %d times, want 2", n)
	}

	// A call cancelled on A leaves B's list; deciding it fails.
	ctx, cancel := context.WithCancel(context.Background())
	call = ask(ctx, a, `{}`)
	req = pendingOn(t, b, seen...)
	cancel()
	if call.wait(t); !errors.Is(call.err, context.Canceled) && toolhost.CodeOf(call.err) != toolhost.CodeCancelled {
		t.Fatalf("cancelled: %v", call.err)
	}
	proctest.Eventually(t, "the cancelled call leaves B's list", func() bool { return len(b.Approvals().Pending()) == 0 })
	if err := b.Approvals().Decide(req.ID, Decision{Kind: Approve}); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "cancelled already") {
		t.Fatalf("deciding a cancelled call: %v", err)
	}
	if err := b.Approvals().Decide("appr_nope", Decision{Kind: Approve}); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "no pending approval appr_nope") {
		t.Fatalf("deciding an unknown id: %v", err)
	}
}

// TestApprovalTimeoutAcrossHosts: a call that times out on A is denied as
// on one host, leaves B's list, and cannot be decided after.
func TestApprovalTimeoutAcrossHosts(t *testing.T) {
	sts := pgStores(t, 2)
	// Long enough for B to list the call first on a busy machine (it takes
	// milliseconds), short enough to wait for.
	a, _ := probeHost(t, queueConfig(3*time.Second), &Options{Store: sts[0]})
	b, _ := probeHost(t, queueConfig(time.Minute), &Options{Store: sts[1]})
	call := ask(context.Background(), a, `{}`)
	req := pendingOn(t, b)
	if call.wait(t); !errors.Is(call.err, toolhost.ErrApprovalDenied) || !strings.Contains(call.err.Error(), "no decision within 3s") {
		t.Fatalf("err = %v", call.err)
	}
	if p := b.Approvals().Pending(); len(p) != 0 {
		t.Fatalf("still pending on B: %+v", p)
	}
	if err := b.Approvals().Decide(req.ID, Decision{Kind: Approve}); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "expired already") {
		t.Fatalf("deciding an expired call: %v", err)
	}
	got, err := sts[0].Approval(context.Background(), req.ID)
	if err != nil || got.Status != store.ApprovalExpired || got.RunID == "" {
		t.Fatalf("stored = %+v, %v", got, err)
	}
}

// TestApprovalQueueInMemory: a queue no host has bound to a store works in
// memory, as before stores shared it.
func TestApprovalQueueInMemory(t *testing.T) {
	q := newApprovalQueue(time.Minute)
	type out struct {
		d   Decision
		err error
	}
	done := make(chan out, 1)
	go func() {
		d, err := q.Approve(context.Background(), ApprovalRequest{Tool: "t", Group: "g", Arguments: json.RawMessage(`{}`), Requested: time.Now()})
		done <- out{d, err}
	}()
	var p []ApprovalRequest
	proctest.Eventually(t, "the call is pending", func() bool { p = q.Pending(); return len(p) == 1 })
	if err := q.Decide(p[0].ID, Decision{Kind: Deny, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if o := <-done; o.err != nil || o.d.Kind != Deny || o.d.Reason != "no" {
		t.Fatalf("decision = %+v, %v", o.d, o.err)
	}
	if err := q.Decide(p[0].ID, Decision{Kind: Approve}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deciding twice: %v", err)
	}
	if len(q.Pending()) != 0 {
		t.Fatalf("pending = %+v", q.Pending())
	}
}
