package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
	"go.opentelemetry.io/otel/propagation"
)

// routesMCP serves each role's MCP server as streamable HTTP at /mcp/{role},
// to the admin and to the role's tokens, in sessions that end when idle and
// that a credential holds a bounded number of (mcpsessions.go). A tools/call
// that needs no stream gets a plain JSON response from the fast path
// (mcpfast.go); every other request is the SDK's.
func (s *Server) routesMCP() {
	f := newMCPFront(s.h)
	s.mcp = f
	s.roleRoute("/mcp/{role}", func(w http.ResponseWriter, r *http.Request) {
		if role, ok := s.openRole(w, r, r.PathValue("role")); ok {
			f.serveHTTP(w, r, f.role(role.Name), principalOf(r).credential())
		}
	})
}

// ServeMCP serves the MCP server of a role on one transport (such as
// &mcp.StdioTransport{}) until the client disconnects or ctx ends. Its tool
// set follows the role's while it runs; calls go through h.Call as an agent
// of the role created for the session. Over newline-delimited JSON
// (*mcp.IOTransport, *mcp.StdioTransport) the tools/call requests that need
// no stream take the fast path (mcpfast.go).
func ServeMCP(ctx context.Context, h *host.Host, role string, t mcp.Transport) error {
	if _, err := h.Role(role); err != nil {
		return err
	}
	r := newMCPRole(h, role, nil)
	defer r.cancel()
	defer r.forgetting.Wait() // the session's agent is marked terminated on return
	switch t := t.(type) {
	case *mcp.IOTransport:
		return r.serveLines(ctx, t.Reader, t.Writer, t.Writer.Close, t.MaxLineLength)
	case *mcp.StdioTransport: // stdout stays open, as the SDK leaves it
		return r.serveLines(ctx, os.Stdin, os.Stdout, nil, 0)
	}
	return r.srv.Run(ctx, t)
}

// mcpFront routes /mcp/{role} to the role's MCP server, made on first use.
type mcpFront struct {
	h     *host.Host
	open  *sessionTable // the sessions of every role's server
	mu    sync.Mutex    // held to make a role's server
	roles sync.Map      // role name → *mcpRole
}

// newMCPFront returns the front of h's roles, its sessions bounded by the
// config's mcp block.
func newMCPFront(h *host.Host) *mcpFront {
	c := h.Config().MCP
	return &mcpFront{h: h, open: newSessionTable(cmp.Or(c.SessionIdleTimeout, config.DefaultMCPSessionIdleTimeout),
		cmp.Or(c.MaxSessionsPerCredential, config.DefaultMCPMaxSessionsPerCredential))}
}

func (f *mcpFront) role(name string) *mcpRole {
	if r, ok := f.roles.Load(name); ok {
		return r.(*mcpRole)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.roles.Load(name); ok {
		return r.(*mcpRole)
	}
	r := newMCPRole(f.h, name, f.open)
	f.roles.Store(name, r)
	return r
}

// mcpRole is the MCP server of one role, shared by the role's sessions; each
// session is an agent of the role.
type mcpRole struct {
	h      *host.Host
	role   string
	impl   *mcp.Implementation // srv's
	srv    *mcp.Server
	http   *mcp.StreamableHTTPHandler
	cancel func()        // stops following the host's changes
	open   *sessionTable // the front's, where http's sessions are; nil over other transports

	mu       sync.Mutex               // held to change tools or to add a session
	tools    map[string]host.Function // registered on srv
	offered  map[string]*mcp.Tool     // of tools, those srv took, as clients see them
	send     mcp.MethodHandler        // the SDK's sending handler
	sessions sync.Map                 // session id → *mcpSession

	forgetting sync.WaitGroup // the sessions' forget, running until each session ends
}

// mcpSession is a client's session with a role's MCP server: the agent it
// calls as, and the calls it runs on the fast path, to cancel them.
type mcpSession struct {
	id      string // the session's id: Mcp-Session-Id over HTTP, "" on a transport of one session
	agentID string
	version string             // the protocol version the client asked for in initialize
	ss      *mcp.ServerSession // the SDK's

	mu      sync.Mutex
	calls   map[string]context.CancelFunc // fast-path calls, by request id (see idKey)
	visible []string                      // the tools its list holds, as last listed or announced
	why     string                        // why the session is ending, when the front ends it
}

// newMCPRole returns the MCP server of a role; open is where its HTTP
// sessions are kept, nil when it serves none.
func newMCPRole(h *host.Host, role string, open *sessionTable) *mcpRole {
	r := &mcpRole{h: h, role: role, open: open, tools: map[string]host.Function{}, offered: map[string]*mcp.Tool{},
		impl: &mcp.Implementation{Name: "toolhost", Title: "toolhost role " + role, Version: toolhost.Version(), WebsiteURL: h.Config().WebsiteURL}}
	r.srv = mcp.NewServer(r.impl, &mcp.ServerOptions{
		Capabilities:       &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		InitializedHandler: func(ctx context.Context, req *mcp.InitializedRequest) { _, _ = r.session(ctx, req.Session) },
	})
	// Every call goes to the pipeline, which answers a tool outside the role
	// with tool_not_available where the SDK would say "unknown tool". A
	// cancellation reaches the session's fast-path calls as well as the SDK's.
	// The role's prompt, as it is when a client connects, is the server's
	// instructions.
	// A session's list is its agent's Definitions: the role's tools but the
	// deferred ones it has not loaded (tool_search's load_tools).
	r.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch req := req.(type) {
			case *mcp.CallToolRequest:
				return r.call(ctx, req)
			case *mcp.ListToolsRequest:
				return r.list(ctx, req.Session)
			case *mcp.ServerRequest[*mcp.CancelledParams]:
				if s, ok := r.sessions.Load(req.Session.ID()); ok && req.Params != nil {
					s.(*mcpSession).cancel(req.Params.RequestID)
				}
			}
			res, err := next(ctx, method, req)
			switch res := res.(type) {
			case *mcp.InitializeResult:
				res.Instructions = r.instructions()
			case *mcp.DiscoverResult:
				res.Instructions = r.instructions()
			}
			return res, err
		}
	})
	// The SDK's sending handler, kept to tell one session that its list
	// changed (the SDK tells every session, when the role's tools change).
	r.srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		r.send = next
		return next
	})
	// The server's guard checks Host and Origin on every request, allowed
	// hosts included; the SDK's own check knows loopback names only.
	r.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return r.srv },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
	r.cancel = h.Watch(r.sync)
	r.sync()
	return r
}

// instructions are the role's prompt with its groups (Host.RolePrompt); ""
// for a role that is gone.
func (r *mcpRole) instructions() string {
	p, _ := r.h.RolePrompt(r.role)
	return p
}

// sync makes the server's tools the role's: it adds new and changed tools and
// removes gone ones; the SDK then sends notifications/tools/list_changed.
func (r *mcpRole) sync() {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := map[string]host.Function{}
	if defs, err := r.h.RoleToolDefinitions(r.role); err == nil { // a deleted role has no tools
		for _, d := range defs {
			want[d.Function.Name] = d.Function
		}
	}
	var gone []string
	for name := range r.tools {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		r.srv.RemoveTools(gone...)
		for _, name := range gone {
			delete(r.offered, name)
		}
	}
	changed := len(gone) > 0
	for name, fn := range want {
		old, ok := r.tools[name]
		if !ok || old.Description != fn.Description || !bytes.Equal(old.Parameters, fn.Parameters) || old.Title != fn.Title ||
			!bytes.Equal(old.Annotations, fn.Annotations) || !bytes.Equal(old.OutputSchema, fn.OutputSchema) {
			r.addTool(fn)
			changed = true
		}
	}
	r.tools = want
	r.sessions.Range(func(_, v any) bool {
		r.announce(v.(*mcpSession), !changed)
		return true
	})
}

// visible returns the names of the tools a session's list holds: its
// agent's Definitions that the server offers, sorted.
func (r *mcpRole) visible(s *mcpSession) []string {
	defs, _ := r.h.Definitions(s.agentID) // a deleted role or agent lists nothing
	names := make([]string, 0, len(defs))
	for _, d := range defs {
		if _, ok := r.offered[d.Function.Name]; ok {
			names = append(names, d.Function.Name)
		}
	}
	slices.Sort(names)
	return names
}

// announce records the session's list as it is now, and, when tell is set
// and the list differs from the one it knows (its agent loaded tools), sends
// it notifications/tools/list_changed. r.mu is held.
func (r *mcpRole) announce(s *mcpSession, tell bool) {
	names := r.visible(s)
	s.mu.Lock()
	same := slices.Equal(s.visible, names)
	s.visible = names
	s.mu.Unlock()
	if tell && !same && s.ss != nil {
		_, err := r.send(context.Background(), "notifications/tools/list_changed",
			&mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: s.ss, Params: &mcp.ToolListChangedParams{}})
		if err != nil {
			r.h.Logger().Debug("mcp: list_changed not sent", "role", r.role, "session", s.id, "error", err)
		}
	}
}

// list answers tools/list with the session's own list.
func (r *mcpRole) list(ctx context.Context, ss *mcp.ServerSession) (*mcp.ListToolsResult, error) {
	s, err := r.session(ctx, ss)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.announce(s, false)
	out := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(s.visible))}
	for _, name := range s.visible {
		out.Tools = append(out.Tools, r.offered[name])
	}
	return out, nil
}

// addTool offers fn to the role's clients, its input schema normalised by
// host.MCPInputSchema. A tool that still cannot be offered is withdrawn (an
// earlier version of it included) and logged; the host lists it among its
// diagnostics, which follow its group's registrations.
func (r *mcpRole) addTool(fn host.Function) {
	schema, err := host.MCPInputSchema(fn.Parameters)
	t := mcpTool(fn, schema)
	if err == nil {
		err = addMCPTool(r.srv, t, r.call)
	}
	r.offered[fn.Name] = t
	if err != nil {
		delete(r.offered, fn.Name)
		r.srv.RemoveTools(fn.Name)
		r.h.Logger().Warn("mcp: tool not offered to the role's clients", "role", r.role, "tool", fn.Name, "reason", err)
	}
}

// addMCPTool is srv.AddTool with the SDK's panic on a tool it refuses turned
// into an error, so that one tool cannot crash the host.
func addMCPTool(srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	srv.AddTool(t, h)
	return nil
}

// mcpTool is the tool as MCP clients see it: with the title, annotations
// and output schema an MCP server gave it (annotations that do not decode
// are left out).
func mcpTool(fn host.Function, schema json.RawMessage) *mcp.Tool {
	t := &mcp.Tool{Name: fn.Name, Title: fn.Title, Description: fn.Description, InputSchema: schema}
	if len(fn.Annotations) > 0 {
		var a mcp.ToolAnnotations
		if json.Unmarshal(fn.Annotations, &a) == nil {
			t.Annotations = &a
		}
	}
	if len(fn.OutputSchema) > 0 {
		t.OutputSchema = fn.OutputSchema
	}
	return t
}

// session returns the record of a client's session, creating the session's
// agent on first use.
func (r *mcpRole) session(ctx context.Context, ss *mcp.ServerSession) (*mcpSession, error) {
	if s, ok := r.sessions.Load(ss.ID()); ok {
		return s.(*mcpSession), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sessions.Load(ss.ID()); ok {
		return s.(*mcpSession), nil
	}
	a, err := r.h.CreateAgent(ctx, r.role, store.Agent{})
	if err != nil {
		return nil, err
	}
	s := &mcpSession{id: ss.ID(), agentID: a.ID, ss: ss, calls: map[string]context.CancelFunc{}}
	if p := ss.InitializeParams(); p != nil {
		s.version = p.ProtocolVersion
	}
	r.sessions.Store(s.id, s)
	r.forgetting.Go(func() { r.forget(ss, s) })
	return s, nil
}

// forget drops a session's record when the session ends, however it ends,
// cancels its fast-path calls, and marks its agent terminated with the
// reason the front gave, if it ended the session.
func (r *mcpRole) forget(ss *mcp.ServerSession, s *mcpSession) {
	_ = ss.Wait()
	r.sessions.CompareAndDelete(s.id, s)
	if r.open != nil {
		r.open.drop(s.id, ss)
	}
	s.mu.Lock()
	for _, cancel := range s.calls {
		cancel()
	}
	why := cmp.Or(s.why, "the MCP session ended")
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), endAgentTimeout)
	defer cancel()
	if _, err := r.h.Store().TerminateAgent(ctx, s.agentID, why); err != nil && !errors.Is(err, store.ErrFinal) {
		r.h.Logger().Warn("mcp: the agent of an ended session is not marked terminated", "role", r.role, "agent", s.agentID, "error", err)
	}
}

// endAgentTimeout bounds the store's write that marks a session's agent
// terminated.
const endAgentTimeout = 30 * time.Second

// end ends a session, its agent marked terminated for the reason why.
func (r *mcpRole) end(ss *mcp.ServerSession, why string) {
	r.ending(ss.ID(), why)
	_ = ss.Close()
}

// ending records why the session with the id is about to end, for its
// agent's record.
func (r *mcpRole) ending(id, why string) {
	if s, ok := r.sessions.Load(id); ok {
		s := s.(*mcpSession)
		s.mu.Lock()
		s.why = why
		s.mu.Unlock()
	}
}

// call runs a tools/call that the SDK received: progress notifications go to
// the client when it asked for them.
func (r *mcpRole) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s, err := r.session(ctx, req.Session)
	if err != nil {
		return errorResult(err), nil
	}
	if tp, ok := req.Params.Meta["traceparent"].(string); ok && r.h.TracerProvider() != nil {
		// A client in a trace says so in _meta (SEP-414): the call's spans
		// join it.
		ts, _ := req.Params.Meta["tracestate"].(string)
		ctx = traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
	}
	if token := req.Params.GetProgressToken(); token != nil {
		ctx = toolhost.WithProgress(ctx, func(progress, total float64, message string) {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: message})
		})
	}
	return r.run(ctx, s, req.Params.Name, req.Params.Arguments), nil
}

// run calls a tool through the host's pipeline as the session's agent. A
// pipeline error is a result with IsError, so the model sees it.
func (r *mcpRole) run(ctx context.Context, s *mcpSession, tool string, args json.RawMessage) *mcp.CallToolResult {
	res, err := r.h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: args,
		Context: toolhost.CallContext{AgentID: s.agentID, Session: s.id, Channel: "mcp"}})
	if err != nil {
		return errorResult(err)
	}
	return toolResult(res)
}

func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
		&mcp.TextContent{Text: fmt.Sprintf("%s: %s", toolhost.CodeOf(err), err)},
	}}
}

// toolResult maps a result envelope to MCP content: the error (when not ok),
// stdout, stderr (labelled), a paging cursor, and image attachments.
func toolResult(res *toolhost.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: !res.OK, Content: []mcp.Content{}}
	text := func(s string) { out.Content = append(out.Content, &mcp.TextContent{Text: s}) }
	if !res.OK && res.Error != nil {
		text(fmt.Sprintf("%s: %s", res.Error.Code, res.Error.Message))
	}
	if res.Stdout != "" {
		text(res.Stdout)
	}
	if res.Stderr != "" {
		text("stderr:\n" + res.Stderr)
	}
	if res.NextPageCursor != "" {
		text("next_page_cursor: " + res.NextPageCursor)
	}
	for _, a := range res.Attachments {
		if strings.HasPrefix(a.MimeType, "image/") {
			out.Content = append(out.Content, &mcp.ImageContent{Data: a.Data, MIMEType: a.MimeType})
		}
	}
	if sc, ok := res.Meta[toolhost.MetaStructuredContent]; ok {
		out.StructuredContent = sc
	}
	if res.Meta[toolhost.MetaStructuredContentCut] == true {
		// A client holds a result without the structured content its
		// tool's output schema promises to be broken; this one is cut.
		out.IsError = true
		out.Content = append([]mcp.Content{&mcp.TextContent{Text: string(toolhost.CodeToolExec) +
			": the structured result was larger than the output limit and was dropped; its text below is cut"}}, out.Content...)
	}
	return out
}
