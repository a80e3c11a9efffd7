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

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// Held calls: a call that needs its client's answer while it runs. Two
// things ask:
//
//   - Approvals. A call that needs an approval waits in the host's approval
//     queue, where the operator decides it (the page, the API). The caller
//     never judges itself: only where the operator names the role in
//     mcp { client_approvals }, saying a person sits in front of each of its
//     clients, and the MCP client can elicit, does the front ask the
//     client's user as well: with an elicitation that says what the call
//     will do — tool, arguments (redacted, as the queue keeps them) and
//     role. The answer goes to the queue (Decide: the same record, event
//     and audit as the page's). A client that cannot elicit waits for the
//     queue, as before.
//   - The call's module: an MCP server asking for sampling or elicitation
//     (asks.go), each request forwarded to the client as the server sent
//     it, each answer back to the server.
//
// A client of the stateless era is asked the modern way (SEP-2322): the
// tools/call is answered with an input-required result holding the
// requests and a request state, while the call runs on in the background;
// the client retries the tools/call with its answers and the state, and
// the front delivers them and answers with the next round, or the call's
// result. A prompts/get or resources/read is held alike (roundRequest),
// and only a retry of the same method resumes it. Each round has a state
// of its own, so an old retry answers nothing. For a client of the 2025
// protocols the SDK makes an approval's round an elicitation/create
// request within the call, and the module's requests go to its session as
// requests within the call (asks.go).
//
// A held call waits for its client's answer the session idle timeout (an
// approval's until its deadline, and as long again), then is cancelled; a
// credential's agents have at most maxHeldCalls held at once: past it an
// approval waits for the queue alone, and a module's request is refused.

// approvalInput is the id of the approval among an input-required result's
// requests.
const approvalInput = "approval"

// maxHeldCalls bounds the calls a credential's agents have waiting for
// their clients' answers.
const maxHeldCalls = 16

// heldCall is a call that may wait for its client's answers.
type heldCall struct {
	agent  *mcpAgent
	ask    *clientAsker       // what its module asks goes out through it; ask.rq is its request
	done   chan heldOutcome   // receives its answer
	cancel context.CancelFunc // cancels it
	rounds chan *inputRound   // what it asks of its client, a round at a time
	tasked chan struct{}      // closed once it runs as a task: it asks no more

	// Under heldCalls.mu:
	counted bool        // it has been held: the bound let it in
	state   string      // the request state naming it while it waits for its client
	open    *inputRound // the round its client was sent, until answered
	timer   *time.Timer // forgets it once its client has not come back in time
}

// heldOutcome is a held call's answer: its result, or its protocol error.
type heldOutcome struct {
	res mcp.Result
	err error
}

// roundRequest is what holding needs of a request whose client may be
// asked in rounds: a tools/call, prompts/get or resources/read.
type roundRequest struct {
	method  string
	ss      *mcp.ServerSession
	meta    mcp.Meta
	version string                         // its protocol version
	caps    func() *mcp.ClientCapabilities // its client's, as the SDK decodes them
	in      mcp.InputResponseMap           // its inputResponses
	state   string                         // its requestState
}

// roundRequestOf is the request of the method, with its inputResponses
// and requestState.
func roundRequestOf[P mcp.Params](method string, req *mcp.ServerRequest[P], in mcp.InputResponseMap, state string) *roundRequest {
	return &roundRequest{method: method, ss: req.Session, meta: req.Params.GetMeta(), version: req.ProtocolVersion(),
		caps: req.ClientCapabilities, in: in, state: state}
}

// inputResult is the result of the request's method that asks its client
// the round reqs, under the request state.
func (rq *roundRequest) inputResult(reqs mcp.InputRequestMap, state string) mcp.Result {
	switch rq.method {
	case toolhost.MethodPromptsGet:
		return &mcp.GetPromptResult{InputRequests: reqs, RequestState: state}
	case toolhost.MethodResourcesRead:
		return &mcp.ReadResourceResult{InputRequests: reqs, RequestState: state}
	}
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}
}

// failure is the answer to the request when err ends it: for a tools/call
// a result with isError, so the model sees it; else the protocol's error.
func (rq *roundRequest) failure(err error) (mcp.Result, error) {
	if rq.method == "tools/call" {
		return errorResult(err), nil
	}
	return nil, rpcError(err, "")
}

// inputRound is one round of requests of a held call's client.
type inputRound struct {
	requests mcp.InputRequestMap
	window   time.Duration // how long it waits for the client's answer
	// answer takes the client's answers, and returns the requests still
	// unanswered, to ask again (nil when none).
	answer func(mcp.InputResponseMap) mcp.InputRequestMap
	refuse func(error) // ends the round unasked
}

// heldCalls are the front's calls waiting for their clients' answers, by
// request state.
type heldCalls struct {
	mu    sync.Mutex
	calls map[string]*heldCall
	// remotes cancel the resumes of retries that other hosts took, by the
	// state the retry named (shared.go).
	remotes map[string]context.CancelFunc
}

// remote records the cancel of the resume of a retry another host took
// with the state; nil forgets it.
func (h *heldCalls) remote(state string, cancel context.CancelFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cancel == nil {
		delete(h.remotes, state)
		return
	}
	if h.remotes == nil {
		h.remotes = map[string]context.CancelFunc{}
	}
	h.remotes[state] = cancel
}

// cancelRemote cancels the resume of the retry with the state, whose
// request went away on the host that took it.
func (h *heldCalls) cancelRemote(state string) {
	h.mu.Lock()
	cancel := h.remotes[state]
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// statedCapabilities returns the client capabilities a request's _meta
// states (from [mcpversion.Stateless] on) as they were decoded from JSON, and whether it states
// them so. Reading them there spares a call req.ClientCapabilities, which
// encodes them to JSON and decodes them again into the SDK's types each
// time: a tenth of a sessionless call's CPU.
func statedCapabilities(meta mcp.Meta) (map[string]any, bool) {
	raw, ok := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	return raw, ok
}

// canElicit reports whether a request's client declared elicitation.
func canElicit(rq *roundRequest) bool {
	if raw, ok := statedCapabilities(rq.meta); ok {
		return raw["elicitation"] != nil // as the SDK's decoding leaves a null
	}
	caps := rq.caps()
	return caps != nil && caps.Elicitation != nil
}

// callAsking runs request rq of agent a by run, its module's requests
// going to its client (asks.go). When its client may be asked in rounds —
// an approval it may decide, or a stateless client that takes sampling or
// elicitation — the call runs in the background and a round that comes
// answers the request (wait).
func (r *mcpRole) callAsking(ctx context.Context, a *mcpAgent, rq *roundRequest, run func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	ask := newClientAsker(ctx, rq)
	if c := r.start(ctx, a, ask, nil, nil, run); c != nil {
		return r.wait(ctx, c, rq.ss, nil)
	}
	defer ask.end()
	return run(toolhost.WithAsker(ctx, ask))
}

// start starts, in the background, a call by run whose client ask may be
// asked in rounds, and returns it; nil when its client will not be. A call
// that may become the task t reports its progress and approval to it.
// ended is called once the call has ended.
func (r *mcpRole) start(ctx context.Context, a *mcpAgent, ask *clientAsker, t *mcpTask, ended func(), run func(context.Context) (mcp.Result, error)) *heldCall {
	approvals := r.h.Approvals() != nil && r.clientsDecide() && canElicit(ask.rq)
	stateless := ask.rq.version >= mcpversion.Stateless
	if !approvals && !(stateless && ask.asked()) {
		return nil
	}
	ask.window = r.resumeWindow()
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &heldCall{agent: a, ask: ask, done: make(chan heldOutcome, 1), cancel: cancel,
		rounds: make(chan *inputRound), tasked: make(chan struct{})}
	if stateless {
		ask.held = c
	}
	bg = toolhost.WithAsker(bg, ask)
	if t != nil {
		bg = toolhost.WithProgress(bg, t.progress)
	}
	bg = host.WithApprovalPending(bg, func(ar host.ApprovalRequest) {
		if t != nil {
			t.waitsFor(ar)
		}
		if !approvals {
			return
		}
		rd := r.approvalRound(a, ar)
		go func() { // the queue waits meanwhile: nothing it holds waits for the client
			select {
			case c.rounds <- rd:
			case <-c.tasked:
			case <-bg.Done():
			}
		}()
	})
	go func() {
		res, err := run(bg)
		ask.end() // its last log messages go out before its result
		cancel()
		if ended != nil {
			ended()
		}
		c.done <- heldOutcome{res, err}
	}()
	return c
}

// wait answers a request of held call c, from session ss, with the call's
// answer, or the next round it asks its client. after, when set, ends the
// wait with nil (the call runs on).
func (r *mcpRole) wait(ctx context.Context, c *heldCall, ss *mcp.ServerSession, after <-chan time.Time) (mcp.Result, error) {
	c.ask.attach(ss, ctx)
	defer c.ask.detach()
	for {
		select {
		case out := <-c.done:
			r.held.forget(c)
			return out.res, out.err
		case <-ctx.Done():
			r.held.forget(c)
			return c.ask.rq.failure(toolhost.Errorf(toolhost.CodeCancelled, "the call was cancelled: %v", context.Cause(ctx)))
		case rd := <-c.rounds:
			state, err := r.held.hold(c, rd)
			if err != nil {
				rd.refuse(err)
				continue
			}
			r.shareRound(c, state, rd.window)
			return c.ask.rq.inputResult(rd.requests, state), nil
		case <-after:
			return nil, nil
		}
	}
}

// resume answers the retry rq of a held call: it delivers the client's
// answers to the round it was sent and answers as wait does. A request
// state that names no call of the agent, of rq's method, waiting for its
// client is the protocol's invalid-params error.
func (r *mcpRole) resume(ctx context.Context, a *mcpAgent, rq *roundRequest) (mcp.Result, error) {
	if !r.held.holds(rq.state) {
		return r.resumeShared(ctx, a, rq) // another host's, or none (shared.go)
	}
	if !r.takeRound(ctx, a, rq.state, rq.method) {
		return nil, errUnknownState(rq.method)
	}
	c, rd := r.held.take(rq.state, a, rq.method)
	if c == nil {
		return nil, errUnknownState(rq.method)
	}
	return r.answerRound(ctx, c, rd, rq.in, rq.ss)
}

// errUnknownState is the protocol's error of a retry whose request state
// names no request of the method of its agent waiting for its client.
func errUnknownState(method string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState names no " + method + " of this agent waiting for its client's answer " +
		"(it ended, was answered already, or is not this agent's): send the request again, without it"}
}

// answerRound delivers the client's answers in to the round rd held call
// c sent it (none: nil) and answers as wait does, its messages going out
// on session ss's request (none: nil).
func (r *mcpRole) answerRound(ctx context.Context, c *heldCall, rd *inputRound, in mcp.InputResponseMap, ss *mcp.ServerSession) (mcp.Result, error) {
	if rd != nil {
		if more := rd.answer(in); more != nil {
			state, err := r.held.hold(c, rd)
			if err != nil {
				return nil, err
			}
			r.shareRound(c, state, rd.window)
			return c.ask.rq.inputResult(more, state), nil
		}
	}
	return r.wait(ctx, c, ss, nil)
}

// approvalRound is the round that asks a's client to decide the approval
// ar: its answer goes to the queue; refused, the queue alone decides.
func (r *mcpRole) approvalRound(a *mcpAgent, ar host.ApprovalRequest) *inputRound {
	return &inputRound{
		requests: mcp.InputRequestMap{approvalInput: approvalElicitation(r.role, ar)},
		window:   time.Until(ar.Expires) + r.resumeWindow(),
		refuse:   func(error) {},
		answer: func(in mcp.InputResponseMap) mcp.InputRequestMap {
			answer, ok := in[approvalInput].(*mcp.ElicitResult)
			if !ok {
				return nil // the call waits for the queue
			}
			d := host.Decision{Kind: host.Deny, Reason: "the MCP client's user declined"}
			if answer.Action == "accept" && answer.Content["approve"] == true {
				d = host.Decision{Kind: host.Approve, Reason: "approved by the MCP client's user"}
			} else if answer.Action == "cancel" {
				d.Reason = "the MCP client's user dismissed the request"
			}
			d.By = "the MCP client of " + a.cred + " (mcp { client_approvals })"
			if err := r.h.Approvals().Decide(ar.ID, d); err != nil {
				r.h.Logger().Debug("mcp: the client's decision came too late", "approval", ar.ID, "error", err)
			}
			return nil
		},
	}
}

// typed is a result as the SDK's tool handler answers a stateless client:
// its resultType set, input_required for a round of a held call.
func typed(res *mcp.CallToolResult) *mcp.CallToolResult {
	if res.InputRequests == nil {
		return completed(res)
	}
	b, err := json.Marshal(res)
	var m map[string]any
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err == nil {
		m["resultType"] = "input_required"
		b, err = json.Marshal(m)
	}
	var out mcp.CallToolResult
	if err != nil || json.Unmarshal(b, &out) != nil {
		return res
	}
	return &out
}

// clientsDecide reports whether the operator lets the role's MCP clients
// decide the approvals of their own calls (mcp { client_approvals }).
func (r *mcpRole) clientsDecide() bool {
	return slices.Contains(r.h.Config().MCP.ClientApprovals, r.role)
}

// resumeWindow is how long a held call waits for its client's answer, and
// its result for its client after it ended.
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

// hold keeps c, which asks its client (what is unanswered of) round rd,
// under a new request state, which it returns, for rd's window. A call not
// held before is refused when its credential's agents hold maxHeldCalls.
func (h *heldCalls) hold(c *heldCall, rd *inputRound) (string, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	state := hex.EncodeToString(b[:])
	h.mu.Lock()
	defer h.mu.Unlock()
	if !c.counted && h.countLocked(c.agent) >= maxHeldCalls {
		return "", toolhost.Errorf(toolhost.CodeRateLimited, "the agents of this credential have %d calls waiting for their clients' answers, the most the front holds", maxHeldCalls)
	}
	if h.calls == nil {
		h.calls = map[string]*heldCall{}
	}
	delete(h.calls, c.state)
	h.calls[state] = c
	c.state, c.open, c.counted = state, rd, true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timer = time.AfterFunc(rd.window, func() { h.forget(c) })
	return state, nil
}

// take returns the call the state names, if it is agent a's and a request
// of the method, and the round its client was sent; the state names
// nothing from then on.
func (h *heldCalls) take(state string, a *mcpAgent, method string) (*heldCall, *inputRound) {
	return h.takeIf(state, method, func(c *heldCall) bool { return c.agent.key == a.key })
}

// holds reports whether a call waits for its client under the state.
func (h *heldCalls) holds(state string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[state] != nil
}

// forgetState drops the call that waits under the state, if any,
// cancelling it: another host declared it lost (shared.go).
func (h *heldCalls) forgetState(state string) {
	h.mu.Lock()
	c := h.calls[state]
	h.mu.Unlock()
	if c != nil {
		h.forget(c)
	}
}

// takeState is take for a retry another host took, of the agent with the
// id (shared.go).
func (h *heldCalls) takeState(state, agentID, method string) (*heldCall, *inputRound) {
	return h.takeIf(state, method, func(c *heldCall) bool { return c.agent.agentID == agentID })
}

// takeIf is take, of a call whose agent is the one asking.
func (h *heldCalls) takeIf(state, method string, asking func(*heldCall) bool) (*heldCall, *inputRound) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls[state]
	if c == nil || !asking(c) || c.ask.rq.method != method {
		return nil, nil
	}
	delete(h.calls, state)
	rd := c.open
	c.state, c.open = "", nil
	if c.timer != nil {
		c.timer.Stop()
	}
	return c, rd
}

// forget drops c, cancelling it if it still runs.
func (h *heldCalls) forget(c *heldCall) {
	h.mu.Lock()
	if h.calls[c.state] == c {
		delete(h.calls, c.state)
	}
	c.state, c.open = "", nil
	if c.timer != nil {
		c.timer.Stop()
	}
	h.mu.Unlock()
	c.cancel()
}

// cancelOf cancels and forgets the held calls of agent a, which has ended:
// their approvals end cancelled and they free their credential's shares.
func (h *heldCalls) cancelOf(a *mcpAgent) {
	for _, c := range h.all(func(c *heldCall) bool { return c.agent == a }) {
		h.forget(c)
	}
}

// cancelAll cancels every held call, when the front stops.
func (h *heldCalls) cancelAll() {
	for _, c := range h.all(func(*heldCall) bool { return true }) {
		h.forget(c)
	}
}

// all returns the held calls that match.
func (h *heldCalls) all(match func(*heldCall) bool) []*heldCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*heldCall
	for _, c := range h.calls {
		if match(c) {
			out = append(out, c)
		}
	}
	return out
}

// countLocked returns how many calls of agent a's credential are held.
// h.mu is held.
func (h *heldCalls) countLocked(a *mcpAgent) int {
	n := 0
	for _, c := range h.calls {
		if c.agent.cred == a.cred {
			n++
		}
	}
	return n
}
