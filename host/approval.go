package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/store"
)

// DecisionKind is what an approver decided.
type DecisionKind string

// The decisions.
const (
	Approve DecisionKind = "approve"
	Deny    DecisionKind = "deny"
	Modify  DecisionKind = "modify" // approve with new arguments, validated again
)

// Decision is an approver's answer.
type Decision struct {
	Kind      DecisionKind    `json:"decision"`
	Arguments json.RawMessage `json:"arguments,omitempty"` // for Modify
	Reason    string          `json:"reason,omitempty"`
}

// ApprovalRequest is a call waiting for a decision.
type ApprovalRequest struct {
	ID        string          `json:"id"`
	CallID    string          `json:"callId"`
	Tool      string          `json:"tool"`
	Group     string          `json:"group"`
	AgentID   string          `json:"agentId,omitempty"`
	Role      string          `json:"role,omitempty"`
	Arguments json.RawMessage `json:"arguments"` // redacted
	Requested time.Time       `json:"requested"`
	Expires   time.Time       `json:"expires,omitzero"`
}

// Approver decides whether a call that requires approval may run (seed 002).
// It is asked before the tool runs; ctx ends if the call is cancelled.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Decision, error)
}

// AlwaysApprove approves every call.
type AlwaysApprove struct{}

// Approve approves.
func (AlwaysApprove) Approve(context.Context, ApprovalRequest) (Decision, error) {
	return Decision{Kind: Approve}, nil
}

// AlwaysDeny denies every call, giving Reason.
type AlwaysDeny struct{ Reason string }

// Approve denies.
func (d AlwaysDeny) Approve(context.Context, ApprovalRequest) (Decision, error) {
	return Decision{Kind: Deny, Reason: d.Reason}, nil
}

// ApprovalQueue holds calls pending a decision made elsewhere — by a person
// through GET /api/approvals and POST /api/approvals/{id}. A pending call is
// denied once Timeout passes.
type ApprovalQueue struct {
	// Timeout bounds how long a call stays pending.
	Timeout time.Duration

	mu      sync.Mutex
	pending map[string]*pendingApproval
}

type pendingApproval struct {
	req      ApprovalRequest
	decision chan Decision
}

// NewApprovalQueue returns an empty queue whose calls wait at most timeout.
func NewApprovalQueue(timeout time.Duration) *ApprovalQueue {
	return &ApprovalQueue{Timeout: timeout, pending: map[string]*pendingApproval{}}
}

// Approve waits for a decision on req, for its timeout at most.
func (q *ApprovalQueue) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	req.ID = "appr_" + hex.EncodeToString(b[:])
	req.Expires = req.Requested.Add(q.Timeout)
	p := &pendingApproval{req: req, decision: make(chan Decision, 1)}
	q.mu.Lock()
	q.pending[req.ID] = p
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		delete(q.pending, req.ID)
		q.mu.Unlock()
	}()
	t := time.NewTimer(q.Timeout)
	defer t.Stop()
	select {
	case d := <-p.decision:
		return d, nil
	case <-t.C:
		return Decision{Kind: Deny, Reason: "no decision within " + q.Timeout.String()}, nil
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
}

// Pending lists the calls waiting for a decision, oldest first.
func (q *ApprovalQueue) Pending() []ApprovalRequest {
	q.mu.Lock()
	out := make([]ApprovalRequest, 0, len(q.pending))
	for _, p := range q.pending {
		out = append(out, p.req)
	}
	q.mu.Unlock()
	slices.SortFunc(out, func(a, b ApprovalRequest) int { return a.Requested.Compare(b.Requested) })
	return out
}

// Decide answers a pending call. It fails with validation if id is not
// pending (decided already, expired, or never asked) or the decision is not
// one of approve, deny and modify (with arguments).
func (q *ApprovalQueue) Decide(id string, d Decision) error {
	switch {
	case d.Kind != Approve && d.Kind != Deny && d.Kind != Modify:
		return toolhost.Errorf(toolhost.CodeValidation, "decision %q: must be approve, deny or modify", d.Kind)
	case d.Kind == Modify && len(d.Arguments) == 0:
		return toolhost.Errorf(toolhost.CodeValidation, "decision modify: arguments are required")
	}
	q.mu.Lock()
	p, ok := q.pending[id]
	if ok {
		delete(q.pending, id)
	}
	q.mu.Unlock()
	if !ok {
		return &toolhost.Error{Code: toolhost.CodeValidation, Message: "no pending approval " + id, Err: store.ErrNotFound}
	}
	p.decision <- d
	return nil
}
