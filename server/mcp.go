package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

// routesMCP serves each role's MCP server as streamable HTTP at /mcp/{role},
// to the admin and to the role's tokens.
func (s *Server) routesMCP() {
	f := &mcpFront{h: s.h, roles: map[string]*mcpRole{}}
	s.roleRoute("/mcp/{role}", func(w http.ResponseWriter, r *http.Request) {
		if role, ok := s.openRole(w, r, r.PathValue("role")); ok {
			f.role(role.Name).http.ServeHTTP(w, r)
		}
	})
}

// ServeMCP serves the MCP server of a role on one transport (such as
// &mcp.StdioTransport{}) until the client disconnects or ctx ends. Its tool
// set follows the role's while it runs; calls go through h.Call as an agent
// of the role created for the session.
func ServeMCP(ctx context.Context, h *host.Host, role string, t mcp.Transport) error {
	if _, err := h.Role(role); err != nil {
		return err
	}
	r := newMCPRole(h, role)
	defer r.cancel()
	return r.srv.Run(ctx, t)
}

// mcpFront routes /mcp/{role} to the role's MCP server, made on first use.
type mcpFront struct {
	h     *host.Host
	mu    sync.Mutex
	roles map[string]*mcpRole
}

func (f *mcpFront) role(name string) *mcpRole {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.roles[name]
	if !ok {
		r = newMCPRole(f.h, name)
		f.roles[name] = r
	}
	return r
}

// mcpRole is the MCP server of one role, shared by the role's sessions; each
// session is an agent of the role.
type mcpRole struct {
	h      *host.Host
	role   string
	srv    *mcp.Server
	http   *mcp.StreamableHTTPHandler
	cancel func() // stops following the host's changes

	mu     sync.Mutex
	tools  map[string]host.Function      // registered on srv
	agents map[*mcp.ServerSession]string // session → agent id
}

func newMCPRole(h *host.Host, role string) *mcpRole {
	r := &mcpRole{h: h, role: role, tools: map[string]host.Function{}, agents: map[*mcp.ServerSession]string{}}
	r.srv = mcp.NewServer(&mcp.Implementation{Name: "toolhost", Title: "toolhost role " + role, Version: toolhost.Version()}, &mcp.ServerOptions{
		Capabilities:       &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		InitializedHandler: func(ctx context.Context, req *mcp.InitializedRequest) { _, _ = r.agent(ctx, req.Session) },
	})
	// Every call goes to the pipeline, which answers a tool outside the role
	// with tool_not_available where the SDK would say "unknown tool".
	// The role's prompt, as it is when a client connects, is the server's
	// instructions.
	r.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if call, ok := req.(*mcp.CallToolRequest); ok {
				return r.call(ctx, call)
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
	}
	for name, fn := range want {
		old, ok := r.tools[name]
		if !ok || old.Description != fn.Description || !bytes.Equal(old.Parameters, fn.Parameters) || old.Title != fn.Title ||
			!bytes.Equal(old.Annotations, fn.Annotations) || !bytes.Equal(old.OutputSchema, fn.OutputSchema) {
			r.addTool(fn)
		}
	}
	r.tools = want
}

// addTool offers fn to the role's clients, its input schema normalised by
// host.MCPInputSchema. A tool that still cannot be offered is withdrawn (an
// earlier version of it included) and logged; the host lists it among its
// diagnostics, which follow its group's registrations.
func (r *mcpRole) addTool(fn host.Function) {
	schema, err := host.MCPInputSchema(fn.Parameters)
	if err == nil {
		err = addMCPTool(r.srv, mcpTool(fn, schema), r.call)
	}
	if err != nil {
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

// agent returns the id of the session's agent, creating the agent on first use.
func (r *mcpRole) agent(ctx context.Context, ss *mcp.ServerSession) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.agents[ss]; ok {
		return id, nil
	}
	a, err := r.h.CreateAgent(ctx, r.role, store.Agent{})
	if err != nil {
		return "", err
	}
	r.agents[ss] = a.ID
	go r.forget(ss)
	return a.ID, nil
}

// forget drops a session's agent id when the session ends.
func (r *mcpRole) forget(ss *mcp.ServerSession) {
	_ = ss.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.agents, ss)
}

// call runs a tools/call through the host's pipeline as the session's agent.
// A pipeline error is a result with IsError, so the model sees it.
func (r *mcpRole) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	agentID, err := r.agent(ctx, req.Session)
	if err != nil {
		return errorResult(err), nil
	}
	if token := req.Params.GetProgressToken(); token != nil {
		ctx = toolhost.WithProgress(ctx, func(progress, total float64, message string) {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: message})
		})
	}
	res, err := r.h.Call(ctx, &toolhost.CallRequest{Tool: req.Params.Name, Arguments: req.Params.Arguments,
		Context: toolhost.CallContext{AgentID: agentID, Session: req.Session.ID(), Channel: "mcp"}})
	if err != nil {
		return errorResult(err), nil
	}
	return toolResult(res), nil
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
	if sc, ok := res.Meta["structured_content"]; ok { // an MCP server's, passed on
		out.StructuredContent = sc
	}
	return out
}
