package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// What a call's module asks of the client that made the call: an MCP
// server's sampling, elicitation and roots requests and its log messages
// (mcpsource's asks.go), which reach the client as the server sent them,
// and only what the client declared. A client of the 2025 protocols gets
// them as requests and notifications within the call, on its session; a
// stateless client gets the requests as input-required rounds of the held
// call (approval.go), and the log messages as notifications on the stream
// of the request the call answers now (the first, or a retry); one sent
// between two rounds, when no request of the client is open, is dropped.
// Log messages wait in a queue of maxQueuedLogs while they go out, past
// which they are dropped: a server that floods them, or a client that does
// not read, slows nothing and grows nothing.

// maxQueuedLogs bounds a call's log messages waiting to go to its client.
const maxQueuedLogs = 64

// clientAsker is a call's [toolhost.Asker] for the client that made it.
type clientAsker struct {
	rq     *roundRequest // the call's first request
	level  string        // a stateless client's log level; "debug" for a session's, which filters
	held   *heldCall     // a stateless client's call, whose rounds it asks; nil in a session
	window time.Duration // how long a round waits for the client's answers

	decode sync.Once
	caps   map[string]any // the client's capabilities, as declared (capabilities)

	mu   sync.Mutex
	ss   *mcp.ServerSession // the request the call's messages go out with now; nil between rounds
	ctx  context.Context
	logs [][]byte // waiting to go out
	over bool     // the call has ended

	send  sync.Mutex    // held to send queued logs, so they go in order
	wake  chan struct{} // a log is queued
	ended chan struct{} // closed once the call has ended
	start sync.Once     // starts the sender
}

// newClientAsker returns the asker of the call of req, first answered with
// ctx.
func newClientAsker(ctx context.Context, rq *roundRequest) *clientAsker {
	a := &clientAsker{rq: rq, ss: rq.ss, ctx: ctx, level: "debug", window: time.Minute, wake: make(chan struct{}, 1), ended: make(chan struct{})}
	if rq.version >= mcpversion.Stateless {
		a.level, _ = rq.meta[mcp.MetaKeyLogLevel].(string)
	}
	return a
}

// capabilities are the client's, as it declared them, decoded from JSON:
// from its request's _meta, or its session's initialize.
func (a *clientAsker) capabilities() map[string]any {
	a.decode.Do(func() {
		if raw, ok := statedCapabilities(a.rq.meta); ok {
			a.caps = raw
		} else if caps := a.rq.caps(); caps != nil {
			b, _ := json.Marshal(caps)
			_ = json.Unmarshal(b, &a.caps)
		}
	})
	return a.caps
}

// asked reports whether the client takes any request a module may make.
func (a *clientAsker) asked() bool {
	caps := a.capabilities()
	return caps["sampling"] != nil || caps["elicitation"] != nil
}

// Capabilities are the client's, as it declared them; but roots for a
// stateless client whose call is not held (it declared neither sampling nor
// elicitation), which has no round to be asked them in: holding every such
// call for a roots/list few servers make would cost every call of such a
// client a goroutine, so toolhost answers with no roots instead.
func (a *clientAsker) Capabilities() json.RawMessage {
	caps := a.capabilities()
	if a.held == nil && caps["roots"] != nil && a.rq.version >= mcpversion.Stateless {
		caps = maps.Clone(caps)
		delete(caps, "roots")
	}
	b, _ := json.Marshal(caps)
	return b
}

// LogLevel is the least level a stateless client asked for in its call's
// _meta; for a session's client, every level: its session filters.
func (a *clientAsker) LogLevel() string { return a.level }

// Given are the inputResponses the client sent with a fresh call.
func (a *clientAsker) Given() map[string]json.RawMessage {
	if len(a.rq.in) == 0 || a.rq.state != "" {
		return nil
	}
	out := map[string]json.RawMessage{}
	for key, v := range a.rq.in {
		if b, err := json.Marshal(v); err == nil {
			out[key] = b
		}
	}
	return out
}

// Ask sends a round of the module's requests to the client: a stateless
// client's as a round of its held call, a session's as requests within the
// call.
func (a *clientAsker) Ask(ctx context.Context, round map[string]toolhost.ClientRequest) (map[string]json.RawMessage, error) {
	for _, r := range round {
		name := map[string]string{toolhost.MethodSampling: "sampling", toolhost.MethodElicitation: "elicitation", toolhost.MethodRoots: "roots"}[r.Method]
		var caps map[string]any
		_ = json.Unmarshal(a.Capabilities(), &caps)
		if name == "" || caps[name] == nil {
			return nil, toolhost.Errorf(toolhost.CodeValidation, "%s: the client that made the call did not declare the capability", r.Method)
		}
	}
	if a.held != nil {
		return a.held.askRound(ctx, round)
	}
	a.mu.Lock()
	ss, rctx := a.ss, a.ctx
	a.mu.Unlock()
	if ss == nil {
		return nil, toolhost.Errorf(toolhost.CodeCancelled, "the client's request that made the call has ended")
	}
	// Within the request: over HTTP, on its stream.
	rctx, cancel := context.WithCancel(rctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	out := map[string]json.RawMessage{}
	for _, key := range slices.Sorted(maps.Keys(round)) {
		r := round[key]
		var res any
		var err error
		switch r.Method {
		case toolhost.MethodElicitation:
			var p mcp.ElicitParams
			if err = json.Unmarshal(r.Params, &p); err == nil {
				res, err = ss.Elicit(rctx, &p)
			}
		case toolhost.MethodRoots:
			var p mcp.ListRootsParams
			if err = json.Unmarshal(r.Params, &p); err == nil {
				res, err = ss.ListRoots(rctx, &p)
			}
		default:
			var p mcp.CreateMessageWithToolsParams
			if err = json.Unmarshal(r.Params, &p); err == nil {
				res, err = ss.CreateMessageWithTools(rctx, &p)
			}
		}
		if err != nil {
			if rpc := (*jsonrpc.Error)(nil); errors.As(err, &rpc) {
				return nil, rpc // the client's own refusal, for the server
			}
			return nil, toolhost.Errorf(toolhost.CodeToolExec, "%s: the client did not answer: %v", r.Method, err)
		}
		if out[key], err = json.Marshal(res); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// askRound asks the client of held call c a round, and waits for its
// answers.
func (c *heldCall) askRound(ctx context.Context, round map[string]toolhost.ClientRequest) (map[string]json.RawMessage, error) {
	raw, err := json.Marshal(round)
	var requests mcp.InputRequestMap
	if err == nil {
		err = json.Unmarshal(raw, &requests)
	}
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeToolExec, "the module's requests of the client do not decode: %v", err)
	}
	answered := make(chan mcp.InputResponseMap, 1)
	refused := make(chan error, 1)
	got := mcp.InputResponseMap{}
	rd := &inputRound{requests: requests, window: c.ask.window, refuse: func(err error) { refused <- err },
		answer: func(in mcp.InputResponseMap) mcp.InputRequestMap {
			missing := mcp.InputRequestMap{}
			for key, req := range requests {
				if v, ok := in[key]; ok {
					got[key] = v
				} else if _, ok := got[key]; !ok {
					missing[key] = req
				}
			}
			if len(missing) > 0 {
				return missing
			}
			answered <- got
			return nil
		}}
	select {
	case c.rounds <- rd:
	case <-c.tasked:
		return nil, toolhost.Errorf(toolhost.CodeToolExec, "the call runs as an MCP task, whose module's requests toolhost does not forward to the client")
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	select {
	case in := <-answered:
		out := map[string]json.RawMessage{}
		for key, v := range in {
			if out[key], err = json.Marshal(v); err != nil {
				return nil, err
			}
		}
		return out, nil
	case err := <-refused:
		return nil, err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Log queues a module's log message for the client, dropping it when the
// queue is full or the call has ended.
func (a *clientAsker) Log(params json.RawMessage) {
	a.mu.Lock()
	full := a.over || len(a.logs) >= maxQueuedLogs
	if !full {
		a.logs = append(a.logs, params)
	}
	a.mu.Unlock()
	if full {
		return
	}
	a.start.Do(func() { go a.sender() })
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// sender sends the queued logs as they come, until the call ends.
func (a *clientAsker) sender() {
	for {
		select {
		case <-a.wake:
			a.flush()
		case <-a.ended:
			return
		}
	}
}

// flush sends the queued logs on the request the call answers now, in
// order; with none open, they are dropped.
func (a *clientAsker) flush() {
	a.send.Lock()
	defer a.send.Unlock()
	for {
		a.mu.Lock()
		if len(a.logs) == 0 {
			a.mu.Unlock()
			return
		}
		p := a.logs[0]
		a.logs = a.logs[1:]
		ss, ctx := a.ss, a.ctx
		a.mu.Unlock()
		var lp mcp.LoggingMessageParams
		if ss != nil && json.Unmarshal(p, &lp) == nil {
			_ = ss.Log(ctx, &lp) // by the client's level: its session's, or its request's _meta
		}
	}
}

// attach makes the request of ss with ctx the one the call's messages go
// out with.
func (a *clientAsker) attach(ss *mcp.ServerSession, ctx context.Context) {
	a.mu.Lock()
	a.ss, a.ctx = ss, ctx
	a.mu.Unlock()
}

// detach sends the logs queued so far on the request the call answers now,
// which then ends: the logs after it wait for the next.
func (a *clientAsker) detach() {
	a.flush()
	a.mu.Lock()
	a.ss, a.ctx = nil, nil
	a.mu.Unlock()
}

// end ends the call's messages, once they have gone out.
func (a *clientAsker) end() {
	a.flush()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.over {
		a.over, a.logs = true, nil
		close(a.ended)
	}
}
