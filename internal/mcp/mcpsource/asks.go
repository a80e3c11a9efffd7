package mcpsource

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol"
)

// What a server asks of the client that made a call. A server may ask, as
// far as its block's client_requests allows (Options.Asks), for sampling
// and elicitation, and send log messages; each goes to the [toolhost.Asker]
// in the call's context, which the MCP front puts there for its client.
//
//   - A server of the stateless era answers a call, a prompts/get or a
//     resources/read with input_required (SEP-2322): roundTrip sends the
//     round to the asker, keys and all, and retries with the answers and
//     the server's requestState, round after round (at most maxRounds). The call's _meta tells the server what
//     the calling client declared (as far as the block allows), and its
//     log level, so that the server asks only for what can be answered.
//   - A server of the 2025 protocols sends real requests on its session,
//     which say nothing of the call they belong to: one is forwarded only
//     while exactly one call of the server is in flight, which is then the
//     one it asks for; otherwise it is refused, as is a log message (which
//     is dropped). The session declares sampling and elicitation once, as
//     the block allows, and asks for every log level.
//   - Log messages of a stateless server say nothing of their call either
//     (the SDK merges the streams they come on): they go to the one call in
//     flight whose round does not wait for its client.
//
// roots/list is forwarded likewise when the block allows it (the client's
// roots are paths on the client's machine, which a server beside toolhost
// cannot reach, so by default it does not) and the client declared roots;
// otherwise, or outside a call, toolhost answers it with no roots.

const (
	// maxRounds bounds the input_required rounds of one call.
	maxRounds = 32
	// maxRoundRequests bounds the requests of one round.
	maxRoundRequests = 16
	// maxAsks bounds the requests a 2025 server has waiting on one call's
	// client at once.
	maxAsks = 4
)

// flight is a call in flight on the server.
type flight struct {
	ctx     context.Context
	asker   toolhost.Asker // nil when the caller has no client to ask
	asks    atomic.Int32   // its 2025 server's requests waiting on it
	waiting atomic.Bool    // its stateless server's round waits for the client: no request of it runs upstream
}

// allows reports whether the server may ask the calling client for method
// ([toolhost.MethodSampling], [toolhost.MethodElicitation],
// [toolhost.MethodRoots], [toolhost.MethodLog]).
func (s *Server) allows(method string) bool { return slices.Contains(s.opts.Asks, method) }

// askHandlers sets the client's handlers of what the server may ask, and
// its capabilities: roots and, as the block allows, sampling and
// elicitation (form and url).
func (s *Server) askHandlers(o *mcp.ClientOptions) {
	o.Capabilities = &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true}}
	o.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true} // Call's rounds keep the server's keys
	if s.allows(toolhost.MethodElicitation) {
		o.Capabilities.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}
		o.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			out := &mcp.ElicitResult{}
			return out, s.askOne(ctx, toolhost.MethodElicitation, req.Params, out)
		}
	}
	if s.allows(toolhost.MethodSampling) {
		o.CreateMessageWithToolsHandler = func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
			out := &mcp.CreateMessageWithToolsResult{}
			return out, s.askOne(ctx, toolhost.MethodSampling, req.Params, out)
		}
	}
	if s.allows(toolhost.MethodLog) {
		o.LoggingMessageHandler = func(_ context.Context, req *mcp.LoggingMessageRequest) {
			defer s.logs.handled()
			if f := s.only(); f != nil && f.asker != nil {
				if raw, err := json.Marshal(req.Params); err == nil {
					f.asker.Log(raw)
				}
			}
		}
	}
}

// maxLogWait bounds how long a call's answer waits for the log messages
// read before it to be handled.
const maxLogWait = time.Second

// logOrder keeps a call's log messages ahead of its answer. The SDK's
// connection hands notifications to a queue of their own, while it gives
// a response to its caller at once: a log message the server sent before
// its answer may be handled after the call returned, when it belongs to
// no call. The connection counts the log messages it reads (readOne), the
// handler those it has handled, and a call waits, once answered, for those
// read before.
type logOrder struct {
	mu      sync.Mutex
	read    uint64
	done    uint64
	changed chan struct{} // closed, and replaced, when done grows
}

// handled counts a log message handled.
func (l *logOrder) handled() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done++
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// wait waits until the log messages read so far have been handled, for
// maxLogWait at most.
func (l *logOrder) wait(ctx context.Context) {
	var timeout <-chan time.Time
	l.mu.Lock()
	for target := l.read; l.done < target; l.mu.Lock() {
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(maxLogWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return
		case <-ctx.Done():
			return
		}
	}
	l.mu.Unlock()
}

// read counts a log message read (over stdio: era.go's heard).
func (l *logOrder) readOne() {
	l.mu.Lock()
	l.read++
	l.mu.Unlock()
}

// forwardRoots is a receiving middleware forwarding a 2025 server's
// roots/list to the client of the one call in flight, when the block
// allows it and the client declared roots; otherwise the SDK answers with
// the client's roots, none.
func (s *Server) forwardRoots(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != toolhost.MethodRoots || !s.allows(toolhost.MethodRoots) {
			return next(ctx, method, req)
		}
		if f := s.only(); f != nil && f.declares("roots") {
			out := &mcp.ListRootsResult{}
			return out, s.askOne(ctx, toolhost.MethodRoots, req.GetParams(), out)
		}
		return next(ctx, method, req)
	}
}

// listenLogs asks a 2025 server that logs for every level: which messages
// a client takes, the front decides by the client's own level.
func (s *Server) listenLogs(ctx context.Context) {
	init := s.session.InitializeResult()
	if s.stateless() || !s.allows(toolhost.MethodLog) || init == nil || init.Capabilities == nil || init.Capabilities.Logging == nil {
		return
	}
	if err := s.session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		s.opts.Logger.Warn("logging/setLevel refused: the server's log messages may not come", "error", err)
	}
}

// fly counts a call in while it runs.
func (s *Server) fly(ctx context.Context) (*flight, func()) {
	f := &flight{ctx: ctx, asker: toolhost.AskerFrom(ctx)}
	s.fmu.Lock()
	if s.flights == nil {
		s.flights = map[*flight]struct{}{}
	}
	s.flights[f] = struct{}{}
	s.fmu.Unlock()
	return f, func() {
		s.fmu.Lock()
		delete(s.flights, f)
		s.fmu.Unlock()
	}
}

// only returns the call in flight when there is exactly one, else nil. A
// call of a stateless server whose round waits for its client does not
// count: none of its requests runs on the server, which cannot speak of it.
func (s *Server) only() *flight {
	stateless := s.stateless()
	s.fmu.Lock()
	defer s.fmu.Unlock()
	var one *flight
	for f := range s.flights {
		if stateless && f.waiting.Load() {
			continue
		}
		if one != nil {
			return nil
		}
		one = f
	}
	return one
}

// askOne forwards a 2025 server's request (method, params) to the client of
// the one call in flight, and decodes its answer into out.
func (s *Server) askOne(ctx context.Context, method string, params any, out any) error {
	f := s.only()
	if f == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
			"toolhost forwards %s only while exactly one call of mcp_server %s runs: a server of the 2025 protocols does not say which call it asks for", method, s.opts.ID)}
	}
	if err := f.can(method); err != nil {
		return err
	}
	if f.asks.Add(1) > maxAsks {
		f.asks.Add(-1)
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("the call has %d requests waiting on its client already", maxAsks)}
	}
	defer f.asks.Add(-1)
	// The request ends with the call, or when the server cancels it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(f.ctx, cancel)()
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	key := fmt.Sprintf("%s-%d", strings.Split(method, "/")[0], s.asked.Add(1))
	answers, err := f.asker.Ask(ctx, map[string]toolhost.ClientRequest{key: {Method: method, Params: raw}})
	if err != nil {
		return err
	}
	return json.Unmarshal(answers[key], out)
}

// can refuses, with the error a client without the capability answers, a
// request the call's client cannot take: it has none, or did not declare
// the capability.
func (f *flight) can(method string) error {
	if f.asker == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf(
			"%s: the call has no client to ask (it came from the HTTP API or an agent runtime, or runs as an MCP task)", method)}
	}
	if !f.declares(capabilityOf[method]) {
		return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s: the client that made the call did not declare the capability", method)}
	}
	return nil
}

// capabilityOf names the client capability each request needs.
var capabilityOf = map[string]string{toolhost.MethodSampling: "sampling", toolhost.MethodElicitation: "elicitation", toolhost.MethodRoots: "roots"}

// declares reports whether the call's client declared the capability.
func (f *flight) declares(capability string) bool {
	if f.asker == nil {
		return false
	}
	var caps map[string]any
	_ = json.Unmarshal(f.asker.Capabilities(), &caps)
	return caps[capability] != nil
}

// stated is what a stateless server is told of the calling client in the
// call's _meta: its capabilities, as far as the block lets the server ask
// for them (roots always: they are answered here), and its log level.
func (s *Server) stated(meta mcp.Meta, a toolhost.Asker) {
	caps := map[string]any{"roots": map[string]any{}}
	if a != nil {
		var declared map[string]json.RawMessage // each passed on as declared
		_ = json.Unmarshal(a.Capabilities(), &declared)
		for method, name := range capabilityOf {
			if v, ok := declared[name]; ok && string(v) != "null" && s.allows(method) {
				caps[name] = v
			}
		}
		if level := a.LogLevel(); level != "" && s.allows(toolhost.MethodLog) {
			meta[mcp.MetaKeyLogLevel] = level
		}
	}
	meta[mcp.MetaKeyClientCapabilities] = caps
}

// roundTrip sends a request of a method that may answer input_required
// (tools/call, prompts/get, resources/read) by send, as a call in flight
// (fly), so that a 2025 server's requests meanwhile go to its client. A
// traced call's context goes in its _meta (meta) under the keys MCP
// reserves for it (SEP-414), so that the server's own spans join the
// host's trace; a stateless server is told there what the client declared
// (stated), and gets the answers the client gave up front. While the
// server answers input_required, the round is answered by the calling
// client and the request sent again with the answers and the server's
// state.
func roundTrip[R mcp.Result](ctx context.Context, s *Server, meta *mcp.Meta, send func(ctx context.Context, in mcp.InputResponseMap, state string) (R, error)) (R, error) {
	f, land := s.fly(ctx)
	defer land()
	for k, v := range protocol.TraceCarrier(ctx) {
		if *meta == nil {
			*meta = mcp.Meta{}
		}
		(*meta)[k] = v
	}
	var in mcp.InputResponseMap
	if s.stateless() {
		if *meta == nil {
			*meta = mcp.Meta{}
		}
		s.stated(*meta, f.asker)
		in = given(f.asker)
	}
	state := ""
	for round := 1; ; round++ {
		res, err := send(ctx, in, state)
		if s.allows(toolhost.MethodLog) {
			s.logs.wait(ctx)
		}
		if err != nil {
			return res, err
		}
		reqs, next, asks := inputRequired(res)
		var zero R
		switch {
		case !asks:
			return res, nil
		case len(reqs) == 0:
			return zero, fmt.Errorf("the server is busy (it asked for no input in an input_required result): try again")
		case round >= maxRounds:
			return zero, fmt.Errorf("the server asked for input %d times in one request, the most toolhost forwards", maxRounds)
		}
		if in, err = s.answer(ctx, f, reqs); err != nil {
			return zero, err
		}
		state = next
	}
}

// inputRequired returns what an input_required result asks for and the
// server's state; asks is false for another result.
func inputRequired(res mcp.Result) (reqs mcp.InputRequestMap, state string, asks bool) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	case *mcp.GetPromptResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	case *mcp.ReadResourceResult:
		return r.InputRequests, r.RequestState, r.NeedsInput()
	}
	return nil, "", false
}

// answer answers one round of a stateless server by the call's client;
// roots here when they are not forwarded.
func (s *Server) answer(ctx context.Context, f *flight, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	if len(reqs) > maxRoundRequests {
		return nil, fmt.Errorf("the server asked for %d inputs at once, more than %d", len(reqs), maxRoundRequests)
	}
	out := mcp.InputResponseMap{}
	round := map[string]toolhost.ClientRequest{}
	for key, ir := range reqs {
		method := toolhost.MethodSampling
		switch ir.(type) {
		case *mcp.ListRootsParams:
			if !s.allows(toolhost.MethodRoots) || !f.declares("roots") {
				out[key] = &mcp.ListRootsResult{Roots: []*mcp.Root{}}
				continue
			}
			method = toolhost.MethodRoots
		case *mcp.ElicitParams:
			method = toolhost.MethodElicitation
		}
		if !s.allows(method) {
			return nil, toolhost.Errorf(toolhost.CodePolicy, "the server asked the calling client for %s, which its block's client_requests does not allow", method)
		}
		if err := f.can(method); err != nil {
			return nil, toolhost.Errorf(toolhost.CodeToolExec, "the server asked for %v", err)
		}
		raw, err := json.Marshal(ir)
		if err != nil {
			return nil, err
		}
		round[key] = toolhost.ClientRequest{Method: method, Params: raw}
	}
	if len(round) == 0 {
		return out, nil
	}
	f.waiting.Store(true)
	answers, err := f.asker.Ask(ctx, round)
	f.waiting.Store(false)
	if err != nil {
		return nil, err
	}
	for key := range round {
		v, ok := answers[key]
		if !ok {
			return nil, fmt.Errorf("the client did not answer %s", key)
		}
		if out[key], err = inputResponse(key, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// inputResponse decodes the client's answer to the request key, as
// inputResponses decode it.
func inputResponse(key string, v json.RawMessage) (mcp.InputResponse, error) {
	raw, err := json.Marshal(map[string]json.RawMessage{key: v})
	var one mcp.InputResponseMap
	if err == nil {
		err = json.Unmarshal(raw, &one)
	}
	if err != nil {
		return nil, fmt.Errorf("the client's answer to %s: %w", key, err)
	}
	return one[key], nil
}

// given are the answers a client sent with its call before it was asked
// (SEP-2322 lets a client answer up front), passed on with the first call
// of a stateless server; those that do not decode are left out.
func given(a toolhost.Asker) mcp.InputResponseMap {
	if a == nil {
		return nil
	}
	var out mcp.InputResponseMap
	for key, v := range a.Given() {
		if r, err := inputResponse(key, v); err == nil {
			if out == nil {
				out = mcp.InputResponseMap{}
			}
			out[key] = r
		}
	}
	return out
}
