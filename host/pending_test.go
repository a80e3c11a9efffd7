package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/store"
)

// askAs calls the guarded tool on h in the background with the credential
// cred.
func askAs(ctx context.Context, h *Host, cred, args string) *asked {
	a := &asked{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.res, a.err = h.Call(ctx, &toolhost.CallRequest{Tool: "guarded", Arguments: []byte(args), Context: toolhost.CallContext{Credential: cred}})
		a.at = time.Now()
	}()
	return a
}

// TestPendingApprovalsBounded: the calls of one credential waiting for an
// approval are bounded in number and in the bytes of their arguments, each
// credential apart: a call past either bound is refused at once with
// rate_limited naming it, and a call that ends (decided, or its caller
// gone) frees its share at once. What an approval keeps of its arguments is
// a redacted preview of at most maxApprovalPreview bytes, their size and
// their SHA-256; a decision records who made it in the call's terminal
// event.
func TestPendingApprovalsBounded(t *testing.T) {
	cfg := queueConfig(time.Minute)
	cfg.Executor.MaxPendingApprovals, cfg.Executor.MaxPendingApprovalMB = 2, 1
	h, _ := probeHost(t, cfg, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Two of alice's calls wait; a third is refused, bob's still waits.
	first := askAs(ctx, h, "token/alice/1", `{"text":"one"}`)
	one := pendingOn(t, h)
	cancelSecond, stopSecond := context.WithCancel(ctx)
	defer stopSecond()
	second := askAs(cancelSecond, h, "token/alice/1", `{"text":"two"}`)
	two := pendingOn(t, h, one.ID)
	third := askAs(ctx, h, "token/alice/1", `{"text":"three"}`).wait(t)
	if !errors.Is(third.err, toolhost.ErrRateLimited) || !strings.Contains(third.err.Error(), "token/alice/1 has 2 calls waiting for an approval") ||
		!strings.Contains(third.err.Error(), "max_pending_approvals") {
		t.Fatalf("alice's third call: %v", third.err)
	}
	askAs(ctx, h, "token/bob/2", `{"text":"bob's"}`)
	bobs := pendingOn(t, h, one.ID, two.ID)
	if bobs.Credential != "token/bob/2" || one.Credential != "token/alice/1" {
		t.Fatalf("credentials: %q, %q", bobs.Credential, one.Credential)
	}

	// A call whose caller went away frees its share at once.
	stopSecond()
	if second.wait(t); !errors.Is(second.err, context.Canceled) {
		t.Fatalf("the call whose caller went away: %v", second.err)
	}
	again := askAs(ctx, h, "token/alice/1", `{"text":"again"}`)
	pendingOn(t, h, one.ID, two.ID, bobs.ID)

	// The decision names who made it.
	if err := h.Approvals().Decide(one.ID, Decision{Kind: Approve, By: "oidc/ops"}); err != nil {
		t.Fatal(err)
	}
	if first.wait(t); first.err != nil || !first.res.OK {
		t.Fatalf("the approved call: %+v, %v", first.res, first.err)
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := h.Events().List(ctx, store.EventFilter{Type: store.EventCallCompleted})
	if err != nil || len(evs) != 1 {
		t.Fatalf("completed events: %+v, %v", evs, err)
	}
	if ap, _ := evs[0].Payload["approval"].(map[string]any); ap["by"] != "oidc/ops" || ap["decision"] != "approve" || evs[0].Payload["credential"] != "token/alice/1" {
		t.Fatalf("the call's event: %+v", evs[0].Payload)
	}
	_ = h.Approvals().Decide(bobs.ID, Decision{Kind: Deny})
	for _, p := range h.Approvals().Pending() {
		_ = h.Approvals().Decide(p.ID, Decision{Kind: Deny})
	}
	again.wait(t)

	// Bytes: carol's 600 KiB call waits, a second one would pass 1 MiB.
	big := `{"text":"` + strings.Repeat("x", 600<<10) + `"}`
	askAs(ctx, h, "token/carol/3", big)
	held := pendingOn(t, h)
	sum := sha256.Sum256([]byte(big))
	if held.ArgumentsSize != int64(len(big)) || held.ArgumentsSHA256 != hex.EncodeToString(sum[:]) || len(held.Arguments) > maxApprovalPreview+200 ||
		!strings.Contains(string(held.Arguments), "(cut: the arguments are 614411 bytes)") {
		t.Fatalf("the approval keeps %d bytes of arguments (size %d, sha %s): %.100s", len(held.Arguments), held.ArgumentsSize, held.ArgumentsSHA256, held.Arguments)
	}
	stored, err := h.Store().Approval(ctx, held.ID)
	if err != nil || len(stored.Arguments) > maxApprovalPreview+200 || stored.ArgumentsSHA256 != held.ArgumentsSHA256 {
		t.Fatalf("the store keeps %d bytes of arguments: %v", len(stored.Arguments), err)
	}
	over := askAs(ctx, h, "token/carol/3", big).wait(t)
	if !errors.Is(over.err, toolhost.ErrRateLimited) || !strings.Contains(over.err.Error(), "max_pending_approval_mb") {
		t.Fatalf("carol's second big call: %v", over.err)
	}
}
