package mcpfront

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
)

// Approvals through the client. A call that needs an approval waits in the
// host's approval queue, where the operator decides it (the page, the API).
// The caller never judges itself: only where the operator names the role in
// mcp { client_approvals }, saying a person sits in front of each of its
// clients, and the MCP client can elicit, does the front ask the client's
// user as well, the modern way: the tools/call is answered with an input-required result (SEP-2322)
// holding an elicitation that says what the call will do — tool, arguments
// (redacted, as the queue keeps them) and role — and a request state; the
// call waits in the queue meanwhile. The client retries the tools/call with
// the user's answer and the state, and the front gives the queue the
// decision (Decide: the same record, event and audit as the page's), then
// answers with the call's result. For a client of the 2025 protocols the
// SDK makes the same exchange an elicitation/create request within the
// call. A client that cannot elicit waits for the queue, as before.

// approvalInput is the id of the approval among an input-required result's
// requests.
const approvalInput = "approval"

// maxHeldCalls bounds the calls a credential's agents have waiting for
// their clients' answers; a call past it waits for the queue alone.
const maxHeldCalls = 16

// heldCall is a call waiting for its client's approval.
type heldCall struct {
	agent    *mcpAgent
	approval string                   // its approval's id in the queue
	done     chan *mcp.CallToolResult // receives its result
	cancel   context.CancelFunc       // cancels it
	result   *mcp.CallToolResult      // once done
	ended    chan struct{}            // closed once result is set
	timer    *time.Timer              // forgets it once its client cannot come back
}

// heldCalls are the front's calls waiting for their clients' approvals, by
// request state.
type heldCalls struct {
	mu    sync.Mutex
	calls map[string]*heldCall
}

// statedCapabilities returns the client capabilities a request's _meta
// states (from [mcpversion.Stateless] on) as they were decoded from JSON, and whether it states
// them so. Reading them there spares a call req.ClientCapabilities, which
// encodes them to JSON and decodes them again into the SDK's types each
// time: a tenth of a sessionless call's CPU.
func statedCapabilities[P mcp.Params](req *mcp.ServerRequest[P]) (map[string]any, bool) {
	raw, ok := req.Params.GetMeta()[mcp.MetaKeyClientCapabilities].(map[string]any)
	return raw, ok
}

// canElicit reports whether a call's client declared elicitation.
func canElicit(req *mcp.CallToolRequest) bool {
	if raw, ok := statedCapabilities(req); ok {
		return raw["elicitation"] != nil // as the SDK's decoding leaves a null
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil
}

// callAsking runs a call of agent a as r.run does, but when the call comes
// to wait for an approval and the client can elicit, it returns the
// input-required result that asks the client's user; the call goes on in
// the background until the client answers (resume), the queue decides, or
// the approval's deadline passes.
func (r *mcpRole) callAsking(ctx context.Context, a *mcpAgent, req *mcp.CallToolRequest) *mcp.CallToolResult {
	q := r.h.Approvals()
	if q == nil || !r.clientsDecide() || !canElicit(req) || r.held.count(a) >= maxHeldCalls {
		return r.run(ctx, a, req.Params.Name, req.Params.Arguments)
	}
	pending := make(chan host.ApprovalRequest, 1)
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	bg = host.WithApprovalPending(bg, func(ar host.ApprovalRequest) { pending <- ar })
	c := &heldCall{agent: a, done: make(chan *mcp.CallToolResult, 1), cancel: cancel, ended: make(chan struct{})}
	go func() {
		res := r.run(bg, a, req.Params.Name, req.Params.Arguments)
		cancel()
		c.done <- res
	}()
	select {
	case res := <-c.done:
		return res
	case <-ctx.Done():
		cancel()
		return errorResult(toolhost.Errorf(toolhost.CodeCancelled, "the call was cancelled: %v", context.Cause(ctx)))
	case ar := <-pending:
		c.approval = ar.ID
		state := r.held.add(c, time.Until(ar.Expires)+r.resumeWindow())
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{approvalInput: approvalElicitation(r.role, ar)},
			RequestState:  state,
		}
	}
}

// resume answers the retry of a call held for its client's approval: it
// gives the queue the client's decision and returns the call's result.
func (r *mcpRole) resume(ctx context.Context, a *mcpAgent, req *mcp.CallToolRequest) *mcp.CallToolResult {
	c := r.held.get(req.Params.RequestState, a)
	if c == nil {
		return errorResult(toolhost.Errorf(toolhost.CodeValidation,
			"requestState names no call of this agent waiting for an approval (it ended, or was answered already): call the tool again"))
	}
	if answer, ok := req.Params.InputResponses[approvalInput].(*mcp.ElicitResult); ok {
		d := host.Decision{Kind: host.Deny, Reason: "the MCP client's user declined"}
		if answer.Action == "accept" && answer.Content["approve"] == true {
			d = host.Decision{Kind: host.Approve, Reason: "approved by the MCP client's user"}
		} else if answer.Action == "cancel" {
			d.Reason = "the MCP client's user dismissed the request"
		}
		d.By = "the MCP client of " + a.cred + " (mcp { client_approvals })"
		if err := r.h.Approvals().Decide(c.approval, d); err != nil {
			r.h.Logger().Debug("mcp: the client's decision came too late", "approval", c.approval, "error", err)
		}
	}
	select {
	case <-c.ended:
	case <-ctx.Done():
		return errorResult(toolhost.Errorf(toolhost.CodeCancelled, "the wait for the call's result was cancelled: %v", context.Cause(ctx)))
	}
	r.held.forget(req.Params.RequestState, c)
	return c.result
}

// clientsDecide reports whether the operator lets the role's MCP clients
// decide the approvals of their own calls (mcp { client_approvals }).
func (r *mcpRole) clientsDecide() bool {
	return slices.Contains(r.h.Config().MCP.ClientApprovals, r.role)
}

// resumeWindow is how long a held call's result waits for its client after
// the approval's deadline.
func (r *mcpRole) resumeWindow() time.Duration {
	if r.open != nil {
		return r.open.idle
	}
	return time.Minute
}

// approvalElicitation asks the client's user to approve the call that ar
// describes.
func approvalElicitation(role string, ar host.ApprovalRequest) *mcp.ElicitParams {
	args := string(ar.Arguments)
	if len(args) > 2000 {
		args = args[:2000] + "…"
	}
	why := ""
	if ar.Rule != "" {
		why = fmt.Sprintf(" The role's rule %q asks for this approval: %s.", ar.Rule, cmp.Or(ar.RuleReason, "no reason given"))
	}
	return &mcp.ElicitParams{
		Mode: "form",
		Message: fmt.Sprintf("Approve this call? An agent of role %q calls the tool %s (group %s) with the arguments %s.%s It waits for a decision until %s.",
			role, ar.Tool, ar.Group, args, why, ar.Expires.Format(time.RFC3339)),
		RequestedSchema: json.RawMessage(`{"type":"object","properties":{"approve":{"type":"boolean","title":"Approve","description":"Run the call (true) or deny it (false)"}},"required":["approve"]}`),
	}
}

// add holds c until its result has been taken, or for window after it
// ended untaken; it returns the request state naming it.
func (h *heldCalls) add(c *heldCall, window time.Duration) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	state := hex.EncodeToString(b[:])
	h.mu.Lock()
	if h.calls == nil {
		h.calls = map[string]*heldCall{}
	}
	h.calls[state] = c
	h.mu.Unlock()
	go func() {
		c.result = <-c.done
		close(c.ended)
		h.mu.Lock()
		if h.calls[state] == c {
			c.timer = time.AfterFunc(window, func() { h.forget(state, c) })
		}
		h.mu.Unlock()
	}()
	return state
}

// get returns the call the state names, if it is agent a's.
func (h *heldCalls) get(state string, a *mcpAgent) *heldCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.calls[state]; c != nil && c.agent.key == a.key {
		return c
	}
	return nil
}

// forget drops the call the state names, if it is c, cancelling it if it
// still runs.
func (h *heldCalls) forget(state string, c *heldCall) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls[state] != c {
		return
	}
	delete(h.calls, state)
	if c.timer != nil {
		c.timer.Stop()
	}
	c.cancel()
}

// cancelOf cancels and forgets the held calls of agent a, which has ended:
// their approvals end cancelled and they free their credential's shares.
func (h *heldCalls) cancelOf(a *mcpAgent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for state, c := range h.calls {
		if c.agent == a {
			delete(h.calls, state)
			if c.timer != nil {
				c.timer.Stop()
			}
			c.cancel()
		}
	}
}

// cancelAll cancels every held call, when the front stops.
func (h *heldCalls) cancelAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.calls {
		c.cancel()
	}
}

// count returns how many calls of agent a's credential are held.
func (h *heldCalls) count(a *mcpAgent) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.calls {
		if c.agent.cred == a.cred {
			n++
		}
	}
	return n
}
