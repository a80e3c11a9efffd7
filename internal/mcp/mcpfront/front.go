package mcpfront

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpcontent"
	"github.com/toolhost/toolhost/internal/mcp/mcpoffer"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/store"
	"go.opentelemetry.io/otel/propagation"
)

// Serve serves the MCP server of a role on one transport (such as
// &mcp.StdioTransport{}) until the client disconnects or ctx ends, in either
// protocol era, as [store.CredentialCLI]. Its tool set follows the role's
// while it runs; calls go through [host.Host.Call] as an agent of the role
// created for the connection (and one for each agent key the client names).
// Over newline-delimited JSON ([*mcp.IOTransport], [*mcp.StdioTransport]) a
// line that is not JSON-RPC is answered with an error and the connection
// goes on (stdio.go); over [*mcp.StdioTransport] stdin is read non-blocking,
// through the runtime's poller.
func Serve(ctx context.Context, h *host.Host, role string, t mcp.Transport) error {
	if _, err := h.Roles().Get(role); err != nil {
		return err
	}
	r := newMCPRole(h, role, nil)
	defer r.cancel()
	defer r.forgetting.Wait() // the connection's agents are marked terminated on return
	defer r.tasks.writes.Wait()
	defer r.tasks.cancelAll()
	switch tt := t.(type) {
	case *mcp.IOTransport:
		t = newLineTransport(tt.Reader, tt.Writer, tt.Writer.Close, tt.MaxLineLength)
	case *mcp.StdioTransport: // stdout stays open, as the SDK leaves it
		t = newLineTransport(pollableStdin(), os.Stdout, nil, tt.MaxLineLength)
	}
	return r.srv.Run(withCaller(ctx, Caller{Credential: store.CredentialCLI}), t)
}

// Front serves each role's MCP server over streamable HTTP, made on first
// use: sessions of the 2024-11-05 … [mcpversion.Legacy] protocol, which end
// when idle and that a credential holds a bounded number of, and the
// sessionless requests of [mcpversion.Stateless] (sessions.go). Who may
// reach which role is the caller's to decide; the front trusts the
// [Caller] it is given and nothing a client sends about itself.
type Front struct {
	h      *host.Host
	open   *sessionTable // the sessions and keyed agents of every role's server
	mu     sync.Mutex    // held to make a role's server
	roles  sync.Map      // role name → *mcpRole
	stop   func()        // stops following the other hosts (followShared)
	follow sync.WaitGroup
}

// New returns the front of h's roles, its sessions bounded by the config's
// mcp block. On a store that hosts share, it follows what the others do
// to the state of its sessionless clients (shared.go) until Close.
func New(h *host.Host) *Front {
	c := h.Config().MCP
	f := &Front{h: h, open: newSessionTable(cmp.Or(c.SessionIdleTimeout, config.DefaultMCPSessionIdleTimeout),
		cmp.Or(c.MaxSessionsPerCredential, config.DefaultMCPMaxSessionsPerCredential)), stop: func() {}}
	if h.Store().Engine() == store.DriverPostgres {
		ctx, cancel := context.WithCancel(context.Background())
		f.stop = cancel
		f.follow.Go(func() { f.followShared(ctx) })
	}
	return f
}

// ServeRole serves req, a request to role's MCP server, as from c: the
// credential and principal the caller authenticated, which reaches the
// handlers in the request's context. The role must exist and c may use it.
func (f *Front) ServeRole(w http.ResponseWriter, req *http.Request, role string, c Caller) {
	f.serveHTTP(w, req.WithContext(withCaller(req.Context(), c)), f.role(role), c.Credential)
}

// Close ends the work the front holds beyond requests: calls running as
// tasks, and calls waiting for their clients' approvals, are cancelled.
func (f *Front) Close() {
	f.stop()
	f.follow.Wait()
	f.roles.Range(func(_, r any) bool {
		r.(*mcpRole).tasks.cancelAll()
		r.(*mcpRole).held.cancelAll()
		r.(*mcpRole).tasks.writes.Wait() // their ends are in the store for the other hosts
		return true
	})
}

// role returns the MCP server of the role name, made on first use.
func (f *Front) role(name string) *mcpRole {
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

// mcpRole is the MCP server of one role, shared by the role's clients; each
// client is one or more agents of the role (see mcpAgent).
type mcpRole struct {
	h         *host.Host
	role      string
	impl      *mcp.Implementation // srv's
	srv       *mcp.Server
	http      *mcp.StreamableHTTPHandler // sessions of the 2025 and earlier protocols
	stateless *mcp.StreamableHTTPHandler // requests of mcpversion.Stateless and later
	cancel    func()                     // stops following the host's changes
	open      *sessionTable              // the front's; nil when the role serves no HTTP

	mu      sync.Mutex               // held to change tools or to add an agent
	tools   map[string]host.Function // registered on srv
	offered map[string]*mcp.Tool     // of tools, those srv took, as clients see them
	send    mcp.MethodHandler        // the SDK's sending handler
	agents  sync.Map                 // agentKey → *mcpAgent
	held    heldCalls                // calls waiting for their clients' approvals
	tasks   mcpTasks                 // calls run as tasks
	items   roleItems                // the prompts and resources srv offers (items.go)

	forgetting sync.WaitGroup // forget of each session, until the session ends
}

// mcpAgent is an agent of the role that MCP clients call as. It is found by
// its scope — the session (Mcp-Session-Id over HTTP, the connection over
// stdio) or, for a sessionless request, the caller's credential — and the
// agent key the client chose (agentKeyMeta or agentKeyHeader; "" when it
// names none), so that what a session held, the tools load_tools loaded
// above all, holds for sessionless clients too.
type mcpAgent struct {
	key       agentKey
	agentID   string
	cred      string             // the credential it belongs to ([Caller])
	principal string             // who its calls are from, for their events ([Caller])
	ss        *mcp.ServerSession // the session it lives in, to notify; nil for a keyed sessionless agent
	entry     *openSession       // its entry in the front's table, when it counts against its credential's bound
	used      time.Time          // a sessionless agent's: when this host last told the store it was used (shared.go)

	mu      sync.Mutex
	visible []string                    // the tools its list holds, as last listed or announced
	why     string                      // why its agent is ending, when the front ends it
	ended   bool                        // forget has marked its agent terminated
	calls   map[*int]context.CancelFunc // its calls running, to cancel when its session ends
	subs    map[string]bool             // the resources it subscribed to (items.go)
}

// agentKey identifies an mcpAgent of a role.
type agentKey struct {
	scope string // the session's id, or "cred:" and a sessionless request's credential
	name  string // the key the client chose
}

// credScope begins the scope of a sessionless agent, before its credential.
const credScope = "cred:"

// sessionless reports whether the key is a sessionless agent's.
func (k agentKey) sessionless() bool { return strings.HasPrefix(k.scope, credScope) }

// entryID is the id of the front's table entry of the agent of role with
// the key (see sessionTable.admit).
func (k agentKey) entryID(role string) string {
	return "agent\x00" + role + "\x00" + k.scope + "\x00" + k.name
}

// makesAgent reports whether a request or notification of the method acts
// as an agent, which mcpRole.agent makes on first use: what the front
// admits.
func makesAgent(method string) bool {
	switch method {
	case "tools/list", "tools/call", "notifications/initialized":
		return true
	}
	return strings.HasPrefix(method, "tasks/") || toolhost.IsItemMethod(method)
}

// The ways a client names its agent: a key of its requests' _meta, or an
// HTTP header; at most maxAgentKey bytes.
const (
	agentKeyMeta   = "toolhost/agent"
	agentKeyHeader = "Toolhost-Agent"
	maxAgentKey    = 128
)

// Caller is who a request of the MCP front is from: over HTTP, the
// credential and principal the server's guard found for it; over stdio,
// [store.CredentialCLI]. The front puts it in the context of the request it
// passes the SDK, from which the SDK derives the context of the handlers
// it calls: over HTTP the context of the connection that a request opens,
// its own for a sessionless request, and for a session the initialize's,
// which is the caller of every request of the session (the front passes a
// session the requests of the credential that opened it alone, and a
// credential has one principal: an access token's subject is part of its
// credential); over stdio [Serve]'s. Nothing a client sends is read for
// it.
type Caller struct {
	// Credential is the credential the request authenticated with: a role
	// token's, an OpenID subject's ([store.OIDCCredential]) or the admin's
	// ([store.CredentialAdmin]).
	Credential string
	// Principal is who the calls are from, for their events: an access
	// token's subject; "" for the admin, role tokens and stdio.
	Principal string
}

// callerKey is the context key of a Caller.
type callerKey struct{}

// withCaller returns ctx carrying the caller c.
func withCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf returns the caller ctx carries; an error, which refuses the
// request, when it carries none.
func callerOf(ctx context.Context) (Caller, error) {
	if c, ok := ctx.Value(callerKey{}).(Caller); ok && c.Credential != "" {
		return c, nil
	}
	return Caller{}, toolhost.Errorf(toolhost.CodeInternal, "mcp: a request whose caller is not known is refused")
}

// newMCPRole returns the MCP server of a role; open is where its HTTP
// sessions and sessionless agents are kept, nil when it serves no HTTP.
func newMCPRole(h *host.Host, role string, open *sessionTable) *mcpRole {
	r := &mcpRole{h: h, role: role, open: open, tools: map[string]host.Function{}, offered: map[string]*mcp.Tool{},
		impl: &mcp.Implementation{Name: "toolhost", Title: "toolhost role " + role, Version: toolhost.Version(), WebsiteURL: h.Config().WebsiteURL}}
	r.srv = mcp.NewServer(r.impl, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}, // asks.go
			Extensions: map[string]any{tasksExtension: map[string]any{}}},
		// What the role's server answers depends on who asks (the role's
		// items, the agent's tools): no intermediary may keep it for another.
		SetCacheable:       func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" },
		CompletionHandler:  r.complete,
		SubscribeHandler:   r.subscribe,
		UnsubscribeHandler: r.unsubscribe,
		InitializedHandler: func(ctx context.Context, req *mcp.InitializedRequest) {
			if a, err := r.agent(ctx, req.Session, req.Extra, nil); err == nil {
				a.done()
			}
		},
	})
	// A call of a tool the server does not offer goes to the pipeline too,
	// which records it and refuses it (callUnoffered); the others reach the tool's handler through the SDK's own
	// (its multi-round-trip requests among them). A list is its agent's
	// Definitions: the role's tools but the deferred ones it has not loaded
	// (tool_search's load_tools). The role's prompt, as it is when a client
	// asks, is the server's instructions.
	r.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if err := r.refuses(method); err != nil {
				return nil, err
			}
			switch req := req.(type) {
			case *mcp.CallToolRequest:
				if req.Params != nil && !r.offers(req.Params.Name) {
					res, err := r.call(ctx, req)
					if err != nil {
						return nil, err
					}
					if req.ProtocolVersion() >= mcpversion.Stateless {
						res = completed(res)
					}
					return res, nil
				}
				if req.Params != nil && req.Params.RequestState == "" && wantsTask(req) {
					return r.callAsTask(ctx, req)
				}
			case *mcp.ServerRequest[*taskParams]:
				return r.taskMethod(ctx, method, req, next)
			case *mcp.ListToolsRequest:
				return r.list(ctx, req)
			}
			res, err := next(ctx, method, req)
			if e, ok := err.(*jsonrpc.Error); ok && len(e.Data) > 0 && !json.Valid(e.Data) {
				err = &jsonrpc.Error{Code: e.Code, Message: e.Message} // answered without the data it could not encode
				if rr, ok := req.(*mcp.ReadResourceRequest); ok && e.Code == mcp.CodeResourceNotFound {
					err = resourceNotFound(rr.Params.URI) // the SDK's, for a URI it has no handler for (resourceNotFound)
				}
			}
			if err != nil { // a typed nil result, such as a second initialize's
				return res, err
			}
			switch res := res.(type) {
			case *mcp.InitializeResult:
				res.Instructions = r.instructions()
				r.capabilities(res.Capabilities)
			case *mcp.DiscoverResult:
				res.Instructions = r.instructions()
				r.capabilities(res.Capabilities)
			}
			return res, err
		}
	})
	// Added last, so outermost: the SDK handles a request on a goroutine of
	// its own, where a panic would end the process, every role's clients
	// with it. A panic answers the one request with an internal error.
	r.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
			defer func() {
				if p := recover(); p != nil {
					res, err = nil, r.panicked(method, p)
				}
			}()
			return next(ctx, method, req)
		}
	})
	// The SDK's sending handler, kept to tell one session that its list
	// changed (the SDK tells every session, when the role's tools change).
	r.srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		r.send = next
		return next
	})
	// The server's guard checks Host and Origin on every request, allowed
	// hosts included; the SDK's own check knows loopback names only. The
	// SDK ends a session idle for the front's session_idle_timeout
	// (sessions.go). A sessionless request lives as long as its POST: a
	// client that goes away cancels it.
	// A session's streams are resumable (replay.go).
	opts := &mcp.StreamableHTTPOptions{DisableLocalhostProtection: true}
	if open != nil {
		opts.SessionTimeout, opts.EventStore = open.idle, open.replay
	}
	r.http = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return r.srv }, opts)
	r.stateless = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return r.srv },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true, Stateless: true, PropagateRequestCancellation: true})
	r.addTaskMethods()
	r.cancel = h.Watch(r.sync)
	r.sync()
	return r
}

// panicked logs the panic p of a request's handler, with its stack, and
// returns the error that answers the request.
func (r *mcpRole) panicked(method string, p any) error {
	r.h.Logger().Error("mcp: a request's handler panicked", "role", r.role, "method", method, "panic", p, "stack", string(debug.Stack()))
	return toolhost.Errorf(toolhost.CodeInternal, "mcp: %s failed inside the server", method)
}

// offers reports whether srv has the tool.
func (r *mcpRole) offers(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.offered[name]
	return ok
}

// instructions are the role's prompt with its groups (Host.RolePrompt); ""
// for a role that is gone.
func (r *mcpRole) instructions() string {
	p, _ := r.h.Roles().Prompt(r.role)
	return p
}

// sync makes the server's tools the role's: it adds new and changed tools and
// removes gone ones; the SDK then sends notifications/tools/list_changed. So
// for the role's prompts and resources (syncItems).
func (r *mcpRole) sync() {
	r.mu.Lock()
	defer r.mu.Unlock()
	want := map[string]host.Function{}
	list, _ := r.h.Tools(host.ToolQuery{Role: r.role}) // a deleted role has no tools
	for _, d := range list.Tools {
		if !list.Meta[d.Function.Name].Conversation { // no MCP client has one the runtime holds
			want[d.Function.Name] = d.Function
		}
	}
	r.syncItems(list)
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
	r.agents.Range(func(_, v any) bool {
		r.announce(v.(*mcpAgent), !changed)
		return true
	})
}

// visible returns the names of the tools an agent's list holds: its
// offer ([host.ToolQuery.Agent]) that the server offers, sorted.
func (r *mcpRole) visible(a *mcpAgent) []string {
	list, _ := r.h.Tools(host.ToolQuery{Agent: a.agentID}) // a deleted role or agent lists nothing
	names := make([]string, 0, len(list.Tools))
	for _, d := range list.Tools {
		if _, ok := r.offered[d.Function.Name]; ok {
			names = append(names, d.Function.Name)
		}
	}
	slices.Sort(names)
	return names
}

// announce records the agent's list as it is now, and, when tell is set and
// the list differs from the one it knows (it loaded tools), sends its
// session notifications/tools/list_changed. r.mu is held.
func (r *mcpRole) announce(a *mcpAgent, tell bool) {
	names := r.visible(a)
	a.mu.Lock()
	same := slices.Equal(a.visible, names)
	a.visible = names
	a.mu.Unlock()
	if tell && !same && a.ss != nil {
		_, err := r.send(context.Background(), "notifications/tools/list_changed",
			&mcp.ServerRequest[*mcp.ToolListChangedParams]{Session: a.ss, Params: &mcp.ToolListChangedParams{}})
		if err != nil {
			r.h.Logger().Debug("mcp: list_changed not sent", "role", r.role, "agent", a.agentID, "error", err)
		}
	}
}

// list answers tools/list with the calling agent's own list, sorted by
// name; clients may not keep it (its cacheScope is private, its ttlMs 0),
// since load_tools changes it.
func (r *mcpRole) list(ctx context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	var meta mcp.Meta
	if req.Params != nil {
		meta = req.Params.Meta
	}
	a, err := r.agent(ctx, req.Session, req.Extra, meta)
	if err != nil {
		return nil, err
	}
	defer a.done()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.announce(a, false)
	out := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(a.visible)), Cacheable: mcp.Cacheable{CacheScope: "private"}}
	for _, name := range a.visible {
		out.Tools = append(out.Tools, r.offered[name])
	}
	return out, nil
}

// addTool offers fn to the role's clients, its input schema normalised by
// mcpoffer.InputSchema. A tool that still cannot be offered is withdrawn (an
// earlier version of it included) and logged; the host lists it among its
// diagnostics, which follow its group's registrations.
func (r *mcpRole) addTool(fn host.Function) {
	schema, err := mcpoffer.InputSchema(fn.Parameters)
	t := mcpTool(fn, schema)
	if err == nil {
		err = mcpoffer.AddTool(r.srv, t, r.call)
	}
	r.offered[fn.Name] = t
	if err != nil {
		delete(r.offered, fn.Name)
		r.srv.RemoveTools(fn.Name)
		r.h.Logger().Warn("mcp: tool not offered to the role's clients", "role", r.role, "tool", fn.Name, "reason", err)
	}
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

// agent returns the agent a request of session ss calls as, creating it
// on first use (see mcpAgent); meta is the _meta of its params. The agent
// is busy until its done is called.
func (r *mcpRole) agent(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra, meta mcp.Meta) (*mcpAgent, error) {
	k, c, err := r.agentKeyOf(ctx, ss, extra, meta)
	if err != nil {
		return nil, err
	}
	if a, ok := r.agents.Load(k); ok && r.live(a.(*mcpAgent)) {
		return a.(*mcpAgent), nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.agents.Load(k); ok && r.live(a.(*mcpAgent)) { // else it is ending: a new agent takes its key
		return a.(*mcpAgent), nil
	}
	a := &mcpAgent{key: k, cred: c.Credential, principal: c.Principal, calls: map[*int]context.CancelFunc{}, subs: map[string]bool{}}
	if !k.sessionless() {
		a.ss = ss
	}
	// Over HTTP, a sessionless agent, and an agent a session's client named
	// beside the session's own, count against the credential's bound: the
	// front has admitted the request, which found or made its entry.
	if r.open != nil && (a.ss == nil || k.name != "") {
		if a.entry, err = r.open.admit(a.cred, r, k.entryID(r.role)); err != nil {
			return nil, err
		}
	}
	var created store.Agent
	if k.sessionless() {
		// Any host sharing the store finds the same agent for the key
		// (shared.go).
		created, err = r.h.Agents().Client(ctx, r.role, a.cred, clientKeyPrefix+k.name)
	} else {
		created, err = r.h.Agents().Create(ctx, r.role, store.Agent{Credential: a.cred})
	}
	if err != nil {
		if a.entry != nil {
			r.open.drop(a.entry)
		}
		return nil, err
	}
	a.agentID = created.ID
	if k.sessionless() {
		r.used(a) // another host may have made it long ago
	}
	r.announce(a, false) // its list, as it starts: what a later change is compared with
	r.agents.Store(k, a)
	if a.entry != nil {
		r.open.attach(a.entry, a)
	}
	if a.ss != nil {
		// Over HTTP the front says why when it ends a session (DELETE,
		// eviction); one it did not end, the SDK ended idle.
		why := "the MCP session ended"
		if r.open != nil {
			why = r.open.idleReason()
		}
		r.forgetting.Go(func() {
			_ = ss.Wait()
			r.forget(a, why)
		})
	}
	return a, nil
}

// agentKeyOf returns the key of the agent a request of the caller ctx
// carries calls as, and the caller. The key's name is the client's choice,
// in its _meta or its header, among the agents of its scope: its session,
// or, for a sessionless request over HTTP, its credential.
func (r *mcpRole) agentKeyOf(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra, meta mcp.Meta) (agentKey, Caller, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return agentKey{}, Caller{}, err
	}
	var k agentKey
	if ss != nil { // none for a call the front answers itself (callDirect)
		k.scope = ss.ID()
	}
	if k.scope == "" && r.open != nil {
		k.scope = credScope + c.Credential
	}
	k.name, _ = meta[agentKeyMeta].(string)
	if extra != nil && extra.Header != nil {
		k.name = cmp.Or(k.name, extra.Header.Get(agentKeyHeader))
	}
	if len(k.name) > maxAgentKey {
		// Invalid params for the SDK's answers to the methods other than
		// tools/call (which makes it a result); it was an error of code 0.
		msg := fmt.Sprintf("the agent key (%s or %s) is %d bytes, more than %d", agentKeyMeta, agentKeyHeader, len(k.name), maxAgentKey)
		return agentKey{}, Caller{}, &toolhost.Error{Code: toolhost.CodeValidation, Message: msg,
			Err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}}
	}
	return k, c, nil
}

// session returns the id of the agent's session, "" when it has none.
func (a *mcpAgent) session() string {
	if a.ss == nil {
		return ""
	}
	return a.ss.ID()
}

// busy counts a request of the agent in, until done, and reports whether
// the agent goes on: false for one whose entry has left the front's table,
// which is ending.
func (a *mcpAgent) busy() bool {
	return a.entry == nil || a.entry.table.begin(a.entry)
}

// live counts a request of agent a in, as busy does, and reports whether
// a goes on: false, too, for a sessionless agent that ended elsewhere
// (another host ended it idle or to make room: shared.go), which a is
// then forgotten for here.
func (r *mcpRole) live(a *mcpAgent) bool {
	if !a.key.sessionless() {
		return a.busy()
	}
	if st, ok := r.h.Agents().Get(a.agentID); ok && st.Final() {
		r.forget(a, st.Error)
		return false
	}
	if !a.busy() {
		return false
	}
	r.used(a)
	return true
}

// done counts a request of the agent out.
func (a *mcpAgent) done() {
	if a.entry != nil {
		a.entry.table.end(a.entry)
	}
}

// forget drops an agent whose session ended, or that the front ended, and
// marks its agent terminated, once, with the reason the front gave, else
// why. Its entry leaves the table first, so that a request of its key
// from then on makes a new agent.
func (r *mcpRole) forget(a *mcpAgent, why string) {
	if a.entry != nil {
		r.open.drop(a.entry)
	}
	r.agents.CompareAndDelete(a.key, a)
	a.mu.Lock()
	ended := a.ended
	a.ended, why = true, cmp.Or(a.why, why)
	a.mu.Unlock()
	if ended {
		return
	}
	// Its calls held for its client's approval end with it: their client
	// is gone, and an approval outliving its agent would run for nobody.
	r.held.cancelOf(a)
	ctx, cancel := context.WithTimeout(context.Background(), endAgentTimeout)
	defer cancel()
	r.unsubscribeAll(ctx, a)
	if _, err := r.h.Store().TerminateAgent(ctx, a.agentID, why); err != nil && !errors.Is(err, store.ErrFinal) {
		r.h.Logger().Warn("mcp: the agent of an ended session is not marked terminated", "role", r.role, "agent", a.agentID, "error", err)
	}
}

// endAgentTimeout bounds the store's write that marks a session's agent
// terminated.
const endAgentTimeout = 30 * time.Second

// ending records why the agents of the session with the id are about to
// end, for their records, and cancels their calls: the SDK closes a session
// once its calls have returned.
func (r *mcpRole) ending(id, why string) {
	r.agents.Range(func(k, v any) bool {
		if k.(agentKey).scope == id {
			a := v.(*mcpAgent)
			a.mu.Lock()
			a.why = why
			for _, cancel := range a.calls {
				cancel()
			}
			a.mu.Unlock()
		}
		return true
	})
}

// track returns ctx, cancelled when the agent's session ends, and the
// function that drops it once its call has returned.
func (a *mcpAgent) track(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	key := new(int)
	a.mu.Lock()
	a.calls[key] = cancel
	a.mu.Unlock()
	return ctx, func() {
		a.mu.Lock()
		delete(a.calls, key)
		a.mu.Unlock()
		cancel()
	}
}

// call runs a tools/call: progress notifications go to the client when it
// asked for them; a tool the role's server does not offer is refused as
// the protocol's unknown tool (callUnoffered). A tool of a deferred group
// that the agent has not loaded is the role's all the same, callable as
// any (docs/configuration.md): it is only left out of the agent's list.
func (r *mcpRole) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, err := r.agent(ctx, req.Session, req.Extra, req.Params.Meta)
	if err != nil {
		return errorResult(err), nil
	}
	defer a.done()
	ctx, untrack := a.track(ctx)
	defer untrack()
	if tp, ok := req.Params.Meta["traceparent"].(string); ok && r.h.TracerProvider() != nil {
		// A client in a trace says so in _meta (SEP-414): the call's spans
		// join it.
		ts, _ := req.Params.Meta["tracestate"].(string)
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": ts})
	}
	if token := req.Params.GetProgressToken(); token != nil {
		ctx = toolhost.WithProgress(ctx, func(progress, total float64, message string) {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: message})
		})
	}
	if !r.offers(req.Params.Name) {
		return r.callUnoffered(ctx, a, req)
	}
	return r.callTool(ctx, a, req)
}

// callTool runs a's tools/call req, its module's requests going to its
// client (approval.go), or resumes the held call its retry names.
func (r *mcpRole) callTool(ctx context.Context, a *mcpAgent, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	rq := roundRequestOf("tools/call", req, req.Params.InputResponses, req.Params.RequestState)
	var res mcp.Result
	var err error
	if rq.state != "" {
		res, err = r.resume(ctx, a, rq)
	} else {
		res, err = r.callAsking(ctx, a, rq, r.runTool(a, req))
	}
	out, _ := res.(*mcp.CallToolResult)
	return out, err
}

// runTool runs a's call req as r.run does.
func (r *mcpRole) runTool(a *mcpAgent, req *mcp.CallToolRequest) func(context.Context) (mcp.Result, error) {
	return func(ctx context.Context) (mcp.Result, error) {
		return r.run(ctx, a, req.Params.Name, req.Params.Arguments)
	}
}

// callUnoffered runs a call of a tool the role's server does not offer
// through the pipeline, which records it (tool_call.started and
// tool_call.failed, as for any call) and refuses it: that refusal
// (tool_not_available, unknown_tool) is the protocol's error for an unknown
// tool, invalid params (-32602), in every era. A tool that came meanwhile,
// before the list was announced, runs.
func (r *mcpRole) callUnoffered(ctx context.Context, a *mcpAgent, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	res, err := r.pipeline(ctx, a, req.Params.Name, req.Params.Arguments)
	switch code := toolhost.CodeOf(err); {
	case err == nil:
		return toolResult(res), nil
	case code == toolhost.CodeToolNotAvailable || code == toolhost.CodeUnknownTool:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %s", code, err)}
	}
	return errorResult(err), nil
}

// run calls a tool through the host's pipeline as the session's agent. A
// pipeline error is a result with IsError, so the model sees it; an MCP
// server's own protocol error (toolhost.MetaProtocolError) is the same
// protocol error to the client.
func (r *mcpRole) run(ctx context.Context, a *mcpAgent, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	res, err := r.pipeline(ctx, a, tool, args)
	if err != nil {
		return errorResult(err), nil
	}
	if _, ok := res.Meta[toolhost.MetaProtocolError]; ok {
		return nil, failed(res)
	}
	return toolResult(res), nil
}

// pipeline calls a tool through the host's pipeline as agent a.
func (r *mcpRole) pipeline(ctx context.Context, a *mcpAgent, tool string, args json.RawMessage) (*toolhost.Result, error) {
	return r.h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: args,
		Context: toolhost.CallContext{AgentID: a.agentID, Session: a.session(), Channel: "mcp", Principal: a.principal, Credential: a.cred}})
}

// errorResult is a pipeline error as a tool result with IsError, so that
// the model sees it: "CODE: message"; a rate_limited one says when to
// retry in _meta too, as retry_after_ms (as in the HTTP API's error).
func errorResult(err error) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
		&mcp.TextContent{Text: fmt.Sprintf("%s: %s", toolhost.CodeOf(err), err)},
	}}
	if ms := toolhost.InfoOf(err).RetryAfterMs; ms > 0 {
		out.Meta = mcp.Meta{"retry_after_ms": ms}
	}
	return out
}

// toolResult maps a result envelope to MCP content. A result with Content
// (an mcp_server module's) is its blocks, in order, as the server sent them
// (failed or not: nothing is put before a server's own error); any other is
// the error (when not ok), stdout, stderr (labelled), a paging cursor, and
// image attachments.
func toolResult(res *toolhost.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: !res.OK, Content: []mcp.Content{}}
	text := func(s string) { out.Content = append(out.Content, &mcp.TextContent{Text: s}) }
	if len(res.Content) > 0 {
		out.Content = mcpcontent.To(res.Content)
	} else {
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
