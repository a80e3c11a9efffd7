package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// mcpConfig has a role limited to the console group.
var mcpConfig = &config.Config{Roles: []config.Role{{Name: "printer", ToolGroups: []string{"console", "notes"}, Pos: "config.hcl:1,1"}}}

// The protocol versions the tests' go-sdk clients pin: the newest of the
// session era, and the first sessionless one.
const (
	sessionEra     = "2025-11-25"
	sessionlessEra = "2026-07-28"
)

// connect opens a client session of sessionEra on transport t; changed
// receives a value for each notifications/tools/list_changed.
func connect(t *testing.T, tr mcp.Transport) (*mcp.ClientSession, chan struct{}) {
	t.Helper()
	return connectAs(t, tr, sessionEra)
}

// connectAs is connect, the client asking for protocol version.
func connectAs(t *testing.T, tr mcp.Transport, version string) (*mcp.ClientSession, chan struct{}) {
	t.Helper()
	changed := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, changed
}

func jsonValue(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMCPStreamableHTTP: in each era, the go-sdk client lists the role's
// tools and calls them as one agent; another session (2025), or another
// agent key (2026), is another agent.
func TestMCPStreamableHTTP(t *testing.T) {
	for _, era := range []string{sessionEra, sessionlessEra} {
		t.Run(era, func(t *testing.T) {
			srv, h := serve(t, mcpConfig, group("console", "console_print"), group("artifact", "put_artifact", "get_artifact"))
			cs, _ := connectAs(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/printer"}, era)
			if (cs.ID() != "") != (era == sessionEra) {
				t.Errorf("MCP session id %q in era %s", cs.ID(), era)
			}

			var want host.ToolList
			if code := do(t, "GET", srv.URL+"/api/roles/printer/tools", nil, &want); code != 200 {
				t.Fatalf("role tools = %d", code)
			}
			list, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Tools) != len(want.Tools) || len(list.Tools) != 1 {
				t.Fatalf("tools/list = %d tools, want %d", len(list.Tools), len(want.Tools))
			}
			got, def := list.Tools[0], want.Tools[0].Function
			if got.Name != def.Name || got.Description != def.Description ||
				!reflect.DeepEqual(jsonValue(t, got.InputSchema), jsonValue(t, def.Parameters)) {
				t.Errorf("tool = %+v, want %+v", got, def)
			}

			if text, isErr := mcptest.CallText(t, cs, "console_print", map[string]string{"text": "hi"}); isErr || text != "console_print:hi" {
				t.Errorf("call = %q (error %v)", text, isErr)
			}
			// A tool outside the role is the protocol's unknown tool, its
			// refusal recorded as any call's (checkCallEvents).
			if e := mcptest.CallRefused(t, cs, "get_artifact", map[string]string{"text": "x"}); e.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(e.Message, string(toolhost.CodeToolNotAvailable)+": ") {
				t.Errorf("call outside the role = %d %q, want -32602 tool_not_available", e.Code, e.Message)
			}
			if text, isErr := mcptest.CallText(t, cs, "console_print", map[string]any{"text": 1}); !isErr || !strings.HasPrefix(text, string(toolhost.CodeValidation)+": ") {
				t.Errorf("invalid call = %q (error %v)", text, isErr)
			}
			checkCallEvents(t, h, "console_print")

			// Another session, or agent key, is another agent.
			other, _ := connectAs(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/printer",
				HTTPClient: &http.Client{Transport: withHeader{"Toolhost-Agent", "other"}}}, era)
			mcptest.CallText(t, other, "console_print", map[string]string{"text": "again"})
			if err := h.Events().Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			events, _ := h.Events().List(context.Background(), store.EventFilter{Tool: "console_print", Type: store.EventCallCompleted})
			if len(events) != 2 || events[0].AgentID == events[1].AgentID {
				t.Errorf("two clients, events %+v: want two agents", events)
			}

			var e apiError
			if code := do(t, "POST", srv.URL+"/mcp/ghost", `{}`, &e); code != 404 || e.Error.Code != toolhost.CodeValidation {
				t.Errorf("unknown role = %d %+v", code, e)
			}
		})
	}
}

// withHeader is http.DefaultTransport adding a header to each request.
type withHeader struct{ name, value string }

func (w withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(w.name, w.value)
	return http.DefaultTransport.RoundTrip(r)
}

// checkCallEvents checks that the tool's calls were recorded as started and
// completed by one agent of the role printer.
func checkCallEvents(t *testing.T, h *host.Host, tool string) {
	t.Helper()
	ctx := context.Background()
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	events, err := h.Events().List(ctx, store.EventFilter{Tool: tool})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, ev := range events {
		types[ev.Type] = true
		a, ok := h.Agents().Get(ev.AgentID)
		if !ok || ev.Role != "printer" || ev.AgentID != events[0].AgentID {
			t.Errorf("event %s: agent %q (%v) role %q", ev.Type, ev.AgentID, ok, ev.Role)
		}
		if r, _ := h.Roles().Get("printer"); a.RoleID != r.ID {
			t.Errorf("agent %+v is not of role printer", a)
		}
	}
	if !types[store.EventCallStarted] || !types[store.EventCallCompleted] {
		t.Errorf("events = %+v", events)
	}
}

func TestMCPListChangedOnUnload(t *testing.T) {
	srv, h := serve(t, mcpConfig, group("console", "console_print"))
	cs, changed := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/printer"})
	if got := mcptest.ToolNames(t, cs); !slices.Equal(got, []string{"console_print"}) {
		t.Fatalf("tools = %v", got)
	}
	if err := h.Modules().Register(context.Background(), group("notes", "add_note")); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, changed)
	if got := mcptest.ToolNames(t, cs); !slices.Equal(got, []string{"add_note", "console_print"}) {
		t.Fatalf("tools after register = %v", got)
	}
	if err := h.Modules().Unload("notes"); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, changed)
	if got := mcptest.ToolNames(t, cs); !slices.Equal(got, []string{"console_print"}) {
		t.Fatalf("tools after unload = %v", got)
	}
}

func waitChanged(t *testing.T, changed chan struct{}) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(proctest.Patience):
		t.Fatal("no notifications/tools/list_changed")
	}
}

func TestMCPPluginExitReachesSessions(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "notes")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/notes").CombinedOutput(); err != nil {
		t.Fatalf("build notes: %v\n%s", err, out)
	}
	cfg := *mcpConfig
	cfg.Plugins = []config.Plugin{{Name: "notes", Kind: config.KindPlugin, Path: bin, Restart: config.RestartNever,
		StartTimeout: proctest.Patience, Config: []byte("{}")}}
	srv, h := serve(t, &cfg, group("console", "console_print"))
	cs, changed := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/printer"})
	if got := mcptest.ToolNames(t, cs); !slices.Contains(got, "add_note") {
		t.Fatalf("tools = %v", got)
	}
	if text, isErr := mcptest.CallText(t, cs, "add_note", map[string]string{"title": "a", "body": "b"}); isErr || text != "saved a" {
		t.Fatalf("add_note = %q (error %v)", text, isErr)
	}
	pid := 0
	for _, g := range h.Modules().Groups() {
		if g.ID == "notes" {
			pid = g.Source.Pid
		}
	}
	if pid == 0 {
		t.Fatalf("no pid for notes in %+v", h.Modules().Groups())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, changed)
	if got := mcptest.ToolNames(t, cs); slices.Contains(got, "add_note") || !slices.Contains(got, "console_print") {
		t.Fatalf("tools after SIGKILL = %v", got)
	}
}

func TestMCPTransport(t *testing.T) {
	_, h := serve(t, mcpConfig, group("console", "console_print"), group("artifact", "get_artifact"))
	ctx, cancel := context.WithCancel(context.Background())
	serverSide, clientSide := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- ServeMCP(ctx, h, "printer", serverSide) }()
	cs, _ := connect(t, clientSide)
	if got := mcptest.ToolNames(t, cs); !slices.Equal(got, []string{"console_print"}) {
		t.Fatalf("tools = %v", got)
	}
	if text, isErr := mcptest.CallText(t, cs, "console_print", map[string]string{"text": "io"}); isErr || text != "console_print:io" {
		t.Errorf("call = %q (error %v)", text, isErr)
	}
	_ = cs.Close()
	cancel()
	<-done
	if err := ServeMCP(context.Background(), h, "ghost", serverSide); err == nil {
		t.Error("ServeMCP of an unknown role: no error")
	}
}

// TestMCPInstructions: a client gets the role's prompt, as the role is when
// it connects, as the server's instructions, and this build's version.
func TestMCPInstructions(t *testing.T) {
	srv, h := serve(t, &config.Config{}, group("console", "console_print"))
	ctx := context.Background()
	if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: "writer", Prompt: "You write reports.", ToolGroups: []string{"console"}}); err != nil {
		t.Fatal(err)
	}
	check := func(prompt string) {
		t.Helper()
		cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/writer"})
		init := cs.InitializeResult()
		want, err := h.Roles().Prompt("writer")
		if err != nil {
			t.Fatal(err)
		}
		if init.Instructions != want || !strings.HasPrefix(init.Instructions, prompt+"\n") || !strings.Contains(init.Instructions, "- console: ") {
			t.Errorf("instructions %q, want the role's prompt %q", init.Instructions, want)
		}
		if v := init.ServerInfo.Version; v == "" || v != toolhost.Version() {
			t.Errorf("serverInfo.version %q, want %q", v, toolhost.Version())
		}
	}
	check("You write reports.")
	p := "You write short reports."
	if _, err := h.Roles().Update(ctx, "writer", host.RoleUpdate{Prompt: &p}); err != nil {
		t.Fatal(err)
	}
	check(p)
}

// TestMCPAnnotations: a tool's title and hints reach MCP clients and
// /api/roles/{r}/tools.
func TestMCPAnnotations(t *testing.T) {
	g := &sdk.Group{ID: "files", Description: "Files.", Tools: []sdk.Tool{
		sdk.NewTool("peek", "Peek.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return sdk.Text("ok"), nil },
			sdk.ReadOnly(), sdk.Title("Peek at a file")),
	}}
	srv, _ := serve(t, &config.Config{Roles: []config.Role{{Name: "reader", ToolGroups: []string{"files"}, Pos: "config.hcl:1,1"}}}, g)
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/reader"})
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 1 {
		t.Fatalf("tools/list: %v, %v", list, err)
	}
	tool := list.Tools[0]
	if a := tool.Annotations; a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil || *a.OpenWorldHint || tool.Title != "Peek at a file" {
		t.Errorf("tool %+v, annotations %+v", tool, tool.Annotations)
	}
	var rt host.ToolList
	if code := do(t, "GET", srv.URL+"/api/roles/reader/tools", nil, &rt); code != 200 {
		t.Fatalf("role tools = %d", code)
	}
	m := rt.Meta["peek"]
	var hints map[string]bool
	if m.Annotations != nil {
		_ = json.Unmarshal(*m.Annotations, &hints)
	}
	if m.Title != "Peek at a file" || !hints["readOnlyHint"] || hints["openWorldHint"] {
		t.Errorf("meta %+v, hints %v", m, hints)
	}
}

// TestMCPStructuredOutput: a structured tool's outputSchema and
// structuredContent reach an MCP client, and the content validates against
// the schema; content the host dropped for the byte limit makes the result
// an error rather than one a client would refuse for lacking it. The server
// names its website.
func TestMCPStructuredOutput(t *testing.T) {
	type out struct {
		Data string `json:"data"`
	}
	g := &sdk.Group{ID: "typed", Description: "Typed.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("make", "Make data.", func(_ context.Context, r *sdk.Request[struct {
			N int `json:"n"`
		}]) (out, error) {
			return out{Data: strings.Repeat("x", r.Args.N)}, nil
		}),
	}}
	cfg := &config.Config{WebsiteURL: "https://tools.example.com/",
		Limits: config.Limits{Timeout: 10 * time.Second, MaxOutputLines: 100, MaxOutputBytes: 1000},
		Roles:  []config.Role{{Name: "maker", ToolGroups: []string{"typed"}, Pos: "config.hcl:1,1"}}}
	srv, _ := serve(t, cfg, g)
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/maker"})
	if got := cs.InitializeResult().ServerInfo.WebsiteURL; got != "https://tools.example.com/" {
		t.Errorf("serverInfo.websiteUrl = %q", got)
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 1 || list.Tools[0].OutputSchema == nil {
		t.Fatalf("tools/list: %+v, %v", list, err)
	}
	var schema jsonschema.Schema
	b, _ := json.Marshal(list.Tools[0].OutputSchema)
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "make", Arguments: map[string]any{"n": 10}})
	if err != nil || res.IsError || res.StructuredContent == nil {
		t.Fatalf("result %+v, %v", res, err)
	}
	var sc any
	b, _ = json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &sc)
	if err := resolved.Validate(sc); err != nil {
		t.Errorf("structuredContent %s: %v", b, err)
	}
	text, isErr := mcptest.CallText(t, cs, "make", map[string]any{"n": 5000})
	if !isErr || !strings.Contains(text, "larger than the output limit") {
		t.Errorf("a structured result past the limit: error %v, %q", isErr, text)
	}
}
