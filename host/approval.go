package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
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
	Arguments json.RawMessage `json:"arguments,omitempty"` // for [Modify]
	Reason    string          `json:"reason,omitempty"`
	// By names who decided: the deciding operator's credential (see
	// [toolhost.CallContext.Credential]), or a role's MCP client with its
	// credential where the operator lets that role's clients decide. The
	// call's terminal event records it.
	// The deciding surface sets it: never from a request's body.
	By string `json:"-"`
}

// ApprovalRequest is a call waiting for a decision.
type ApprovalRequest struct {
	ID      string `json:"id"`
	CallID  string `json:"callId"`
	Tool    string `json:"tool"`
	Group   string `json:"group"`
	AgentID string `json:"agentId,omitempty"`
	Role    string `json:"role,omitempty"`
	// Credential is the waiting call's (see
	// [toolhost.CallContext.Credential]).
	Credential string `json:"credential,omitempty"`
	// Arguments are what the approver sees of the call's arguments:
	// redacted, and a JSON string of their first 16 KiB
	// when longer. ArgumentsSize is the full arguments' size, and
	// ArgumentsSHA256 their SHA-256 (hex), which the call checks before it
	// runs: what was approved is what runs.
	Arguments       json.RawMessage `json:"arguments"`
	ArgumentsSize   int64           `json:"argumentsSize"`
	ArgumentsSHA256 string          `json:"argumentsSha256"`
	// Rule names the role's rule that asks for the approval, and RuleReason
	// is its reason; both empty when the tool's own settings ask.
	Rule       string    `json:"rule,omitempty"`
	RuleReason string    `json:"ruleReason,omitempty"`
	Requested  time.Time `json:"requested"`
	Expires    time.Time `json:"expires,omitzero"`
}

// Approver decides whether a call that requires approval may run: a call
// of a tool declared so (its spec's [toolhost.ToolSpec.RequiresApproval]) or whose block in the
// config requires it (requires_approval), or a call that a rule of the
// caller's role sends for approval ([ApprovalRequest.Rule] names it).
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

// pendingKey is the context key of WithApprovalPending's function.
type pendingKey struct{}

// WithApprovalPending returns ctx telling an [ApprovalQueue] to call notify
// with a call's approval request, its ID set, once the call of ctx waits in
// the queue: so that its caller may ask someone for the decision (the MCP
// front asks its client's user) and give it with [ApprovalQueue.Decide].
func WithApprovalPending(ctx context.Context, notify func(ApprovalRequest)) context.Context {
	return context.WithValue(ctx, pendingKey{}, notify)
}

// ApprovalQueue holds calls pending a decision made elsewhere — by a person
// through GET /api/approvals and POST /api/approvals/{id}. A pending call is
// denied once Timeout passes.
//
// The queue of a host keeps its approvals in the host's store, so that the
// hosts sharing a store share one queue: [ApprovalQueue.Pending] lists every
// host's waiting calls, and [ApprovalQueue.Decide], on any of them, releases
// the call on the host where it waits — at once when that is this host, else
// as soon as that host's store watch sees the decision (PostgreSQL notifies it
// at once; SQLite is polled while a call waits). A queue that no host has
// bound to a store, or whose store fails when a call
// asks, keeps that call in this process's memory: listed and decided here
// only.
type ApprovalQueue struct {
	// Timeout bounds how long a call stays pending.
	Timeout time.Duration

	mu       sync.Mutex
	st       *store.Store // nil: in memory only
	every    time.Duration
	runID    func() string
	log      hclog.Logger
	waiting  map[string]*pendingApproval // this process's waiting calls, by approval id
	watchers int                         // how many of waiting follow the store
	wake     chan struct{}               // closed, and replaced, when the store may have changed
	stop     func()                      // ends the store's watch, while watchers > 0
}

type pendingApproval struct {
	req      ApprovalRequest
	watched  bool          // it follows the store's changes
	stored   bool          // it is in the store; under the queue's mu
	decision chan Decision // receives at most one decision
}

// approvalPoll bounds how often, on SQLite, a waiting call checks the store
// for a decision made by another process.
const approvalPoll = 250 * time.Millisecond

// newApprovalQueue returns an empty queue whose calls wait at most timeout.
// It keeps its calls in memory until a host binds it to its store: the
// host's own queue, and one given as [Options.Approver], are bound by [New].
func newApprovalQueue(timeout time.Duration) *ApprovalQueue {
	return &ApprovalQueue{Timeout: timeout, waiting: map[string]*pendingApproval{}, wake: make(chan struct{}), log: hclog.NewNullLogger()}
}

// useStore binds the queue to st, watched every interval (at most
// approvalPoll) on SQLite; runID names the waiting host's run in the rows.
// A queue bound already keeps its store.
func (q *ApprovalQueue) useStore(st *store.Store, every time.Duration, runID func() string, log hclog.Logger) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.st != nil || st == nil {
		return
	}
	q.st, q.every, q.runID, q.log = st, min(every, approvalPoll), runID, log
	if q.every <= 0 {
		q.every = approvalPoll
	}
}

// storeTimeout bounds the store's work of a decision, a listing or a
// waiter's giving up.
const storeTimeout = 5 * time.Second

// Approve waits for a decision on req, for its timeout at most.
func (q *ApprovalQueue) Approve(ctx context.Context, req ApprovalRequest) (Decision, error) {
	req.ID = randomID("appr_", 8)
	if req.Requested.IsZero() {
		req.Requested = time.Now()
	}
	req.Expires = req.Requested.Add(q.Timeout)
	p := &pendingApproval{req: req, decision: make(chan Decision, 1)}
	st, wake := q.add(p) // follows the store before the row exists: no decision goes unseen
	defer q.remove(p)
	if st != nil {
		runID := ""
		if q.runID != nil {
			runID = q.runID()
		}
		err := st.CreateApproval(ctx, store.Approval{ID: req.ID, CallID: req.CallID, Tool: req.Tool, Group: req.Group, AgentID: req.AgentID,
			Role: req.Role, Credential: req.Credential, Arguments: req.Arguments, ArgumentsSize: req.ArgumentsSize, ArgumentsSHA256: req.ArgumentsSHA256,
			RunID: runID, Requested: req.Requested, Deadline: req.Expires, Rule: req.Rule, RuleReason: req.RuleReason})
		if err != nil {
			if ctx.Err() != nil {
				return Decision{}, ctx.Err()
			}
			q.log.Warn("approvals: the store failed: the call waits for a decision made on this host", "approval", req.ID, "tool", req.Tool, "error", err)
			q.mu.Lock()
			p.stored = false
			q.mu.Unlock()
			st, wake = nil, nil
		}
	}
	if notify, ok := ctx.Value(pendingKey{}).(func(ApprovalRequest)); ok {
		notify(req)
	}
	t := time.NewTimer(q.Timeout)
	defer t.Stop()
	for {
		select {
		case d := <-p.decision:
			return d, nil
		case <-t.C:
			if st != nil {
				if d, ok := q.end(ctx, st, req.ID, store.ApprovalExpired); ok {
					return d, nil // decided just before
				}
			} else if !q.remove(p) {
				return <-p.decision, nil // decided just before
			}
			return Decision{Kind: Deny, Reason: "no decision within " + q.Timeout.String()}, nil
		case <-ctx.Done():
			if st != nil {
				q.end(ctx, st, req.ID, store.ApprovalCancelled)
			}
			return Decision{}, ctx.Err()
		case <-wake:
			wake = q.wakeChan()
			if a, err := st.Approval(ctx, req.ID); err == nil && a.Status != store.ApprovalPending {
				return decisionOf(a), nil
			}
		}
	}
}

// add registers a waiting call, and returns the queue's store and the
// channel closed at its next change; nil and nil when it has no store.
func (q *ApprovalQueue) add(p *pendingApproval) (*store.Store, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting[p.req.ID] = p
	if q.st == nil {
		return nil, nil
	}
	p.watched, p.stored = true, true
	if q.watchers++; q.watchers == 1 {
		q.watch()
	}
	return q.st, q.wake
}

// remove forgets a waiting call; false if a decision in memory took it
// first.
func (q *ApprovalQueue) remove(p *pendingApproval) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if p.watched {
		p.watched = false
		if q.watchers--; q.watchers == 0 {
			q.stop()
			q.stop = nil
		}
	}
	if q.waiting[p.req.ID] != p {
		return false
	}
	delete(q.waiting, p.req.ID)
	return true
}

// watch follows the store's changes, closing wake at each, until stop;
// with q.mu held.
func (q *ApprovalQueue) watch() {
	done := make(chan struct{})
	var changes <-chan struct{}
	var tick <-chan time.Time
	w, err := q.st.Changes(context.Background(), q.every, "approvals")
	var ticker *time.Ticker
	if err == nil {
		changes = w.C
	} else {
		q.log.Warn("approvals: cannot watch the store: polling it", "error", err)
		ticker = time.NewTicker(q.every)
		tick = ticker.C
	}
	q.stop = func() {
		close(done)
		if w != nil {
			_ = w.Close()
		}
		if ticker != nil {
			ticker.Stop()
		}
	}
	go func() {
		for {
			select {
			case <-done:
				return
			case <-changes:
			case <-tick:
			}
			q.mu.Lock()
			close(q.wake)
			q.wake = make(chan struct{})
			q.mu.Unlock()
		}
	}()
}

// wakeChan is closed at the store's next change.
func (q *ApprovalQueue) wakeChan() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}

// end gives up on a stored approval with status: the decision, and true,
// when one came first.
func (q *ApprovalQueue) end(ctx context.Context, st *store.Store, id, status string) (Decision, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	a, err := st.EndApproval(ctx, id, status)
	if err != nil {
		q.log.Warn("approvals: cannot record the end of an approval", "approval", id, "status", status, "error", err)
		return Decision{}, false
	}
	if a.Status == status {
		return Decision{}, false
	}
	return decisionOf(a), true
}

// decisionOf is the decision a settled approval holds.
func decisionOf(a store.Approval) Decision {
	switch a.Status {
	case store.ApprovalApproved:
		return Decision{Kind: Approve, Reason: a.Reason, By: a.DecidedBy}
	case store.ApprovalModified:
		return Decision{Kind: Modify, Arguments: a.Modified, Reason: a.Reason, By: a.DecidedBy}
	case store.ApprovalDenied:
		return Decision{Kind: Deny, Reason: a.Reason, By: a.DecidedBy}
	}
	return Decision{Kind: Deny, Reason: "the approval was " + a.Status}
}

// requestOf is the request a stored approval records.
func requestOf(a store.Approval) ApprovalRequest {
	return ApprovalRequest{ID: a.ID, CallID: a.CallID, Tool: a.Tool, Group: a.Group, AgentID: a.AgentID, Role: a.Role, Credential: a.Credential,
		Arguments: a.Arguments, ArgumentsSize: a.ArgumentsSize, ArgumentsSHA256: a.ArgumentsSHA256,
		Rule: a.Rule, RuleReason: a.RuleReason, Requested: a.Requested, Expires: a.Deadline}
}

// Pending lists the calls waiting for a decision, oldest first: with a
// store, those of every host sharing it, but for the ones past their
// deadline (a host that died leaves its calls pending in the store until
// then); while the store fails, this host's own.
func (q *ApprovalQueue) Pending() []ApprovalRequest {
	q.mu.Lock()
	st := q.st
	var local []ApprovalRequest
	var stored []bool
	for _, p := range q.waiting {
		local, stored = append(local, p.req), append(stored, p.stored)
	}
	q.mu.Unlock()
	out := []ApprovalRequest{}
	listed := false
	if st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		rows, err := st.PendingApprovals(ctx)
		cancel()
		if err != nil {
			q.log.Warn("approvals: cannot list the store's: listing this host's", "error", err)
		} else {
			listed = true
			for _, a := range rows {
				out = append(out, requestOf(a))
			}
		}
	}
	for i, r := range local {
		if !listed || !stored[i] {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b ApprovalRequest) int {
		return cmp.Or(a.Requested.Compare(b.Requested), strings.Compare(a.ID, b.ID))
	})
	return out
}

// numWaiting counts the calls of this process waiting for a decision, without
// asking the store: [ApprovalQueue.Pending] lists every host's.
func (q *ApprovalQueue) numWaiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// notPending is Decide's error for an id that is not pending, why said
// after it.
func notPending(id, why string) error {
	return &toolhost.Error{Code: toolhost.CodeValidation, Message: "no pending approval " + id + why, Err: store.ErrNotFound}
}

// Decide answers a pending call, on this host or, through the store, on
// any host sharing it. It fails with validation if id is not pending
// (decided already, expired, past its deadline, or never asked; wrapping
// [store.ErrNotFound]) or the decision is not one of approve, deny and modify
// (with arguments).
func (q *ApprovalQueue) Decide(id string, d Decision) error {
	var status string
	switch {
	case d.Kind == Approve:
		status = store.ApprovalApproved
	case d.Kind == Deny:
		status = store.ApprovalDenied
	case d.Kind == Modify && len(d.Arguments) == 0:
		return toolhost.Errorf(toolhost.CodeValidation, "decision modify: arguments are required")
	case d.Kind == Modify:
		status = store.ApprovalModified
	default:
		return toolhost.Errorf(toolhost.CodeValidation, "decision %q: must be approve, deny or modify", d.Kind)
	}
	q.mu.Lock()
	st, p := q.st, q.waiting[id]
	if st == nil || p != nil && !p.stored {
		// In memory: the waiter takes the decision.
		if p != nil {
			delete(q.waiting, id)
			select {
			case p.decision <- d:
			default:
			}
		}
		q.mu.Unlock()
		if p == nil {
			return notPending(id, "")
		}
		return nil
	}
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	a, err := st.DecideApproval(ctx, id, store.ApprovalDecision{Status: status, Reason: d.Reason, Arguments: d.Arguments, By: d.By})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notPending(id, "")
	case errors.Is(err, store.ErrNotPending) && a.Status == store.ApprovalPending:
		return notPending(id, ": it is past its deadline")
	case errors.Is(err, store.ErrNotPending):
		return notPending(id, ": it was "+a.Status+" already")
	case err != nil && p == nil:
		return toolhost.Errorf(toolhost.CodeInternal, "deciding approval %s: %w", id, err)
	case err != nil:
		// The store fails, but the call waits here: it takes the decision
		// (other hosts still list it until its deadline).
		q.log.Warn("approvals: the store failed: decided on this host only", "approval", id, "error", err)
	}
	q.mu.Lock()
	if p := q.waiting[id]; p != nil {
		select {
		case p.decision <- d:
		default: // decided already, in memory
		}
	}
	q.mu.Unlock()
	return nil
}
