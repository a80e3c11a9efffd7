package server

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
)

// TestMCPSessionLoadsDeferredTools: a session of a role that defers a group
// lists the eager tools and tool_search's; loading a deferred tool sends
// that session alone notifications/tools/list_changed, and its list, not
// the other session's, then holds the tool.
func TestMCPSessionLoadsDeferredTools(t *testing.T) {
	ok := func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return sdk.Text("ok"), nil }
	files := &sdk.Group{ID: "files", Description: "Files.", Tools: []sdk.Tool{
		sdk.NewTool("peek", "Peek at a file.", ok), sdk.NewTool("poke", "Poke a file.", ok),
	}}
	srv, h := serve(t, &config.Config{}, files)
	rt := agents.New(h, &agents.Options{Console: io.Discard})
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	if _, err := h.Roles().Create(context.Background(), host.RoleSpec{Name: "lazy", ToolGroups: []string{"console", "files"}, DeferredGroups: []string{"files"}}); err != nil {
		t.Fatal(err)
	}
	a, aChanged := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/lazy"})
	b, bChanged := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/lazy"})
	// A session that never listed learns of no one else's loading either.
	_, cChanged := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/lazy"})
	eager := []string{"console_print", "find_tools", "load_tools"}
	for _, cs := range []*mcp.ClientSession{a, b} {
		if got := mcptest.ToolNames(t, cs); !slices.Equal(got, eager) {
			t.Fatalf("list before loading: %v, want %v", got, eager)
		}
	}
	// Deferred tools are the role's all the same: calling one needs no load.
	if text, isErr := mcptest.CallText(t, b, "poke", map[string]any{}); isErr || text != "ok" {
		t.Fatalf("poke, not loaded: %q, error %v", text, isErr)
	}
	if text, isErr := mcptest.CallText(t, a, "load_tools", map[string]any{"names": []string{"peek"}}); isErr {
		t.Fatalf("load_tools: %s", text)
	}
	select {
	case <-aChanged:
	case <-time.After(proctest.Patience):
		t.Fatal("the loading session got no list_changed")
	}
	if got := mcptest.ToolNames(t, a); !slices.Equal(got, []string{"console_print", "find_tools", "load_tools", "peek"}) {
		t.Errorf("the loading session's list: %v", got)
	}
	time.Sleep(200 * time.Millisecond) // time for a stray notification to arrive
	if got := mcptest.ToolNames(t, b); !slices.Equal(got, eager) || len(bChanged) > 0 || len(cChanged) > 0 {
		t.Errorf("the other session's list: %v, %d list_changed; the unlisted session's %d", got, len(bChanged), len(cChanged))
	}

	// Sessionless clients keep what they loaded by their agent key: the
	// same key lists the loaded tool on its next request, another does not.
	keyed := func(key string) *mcp.ClientSession {
		cs, _ := connectAs(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/lazy",
			HTTPClient: &http.Client{Transport: withHeader{"Toolhost-Agent", key}}}, sessionlessEra)
		return cs
	}
	if text, isErr := mcptest.CallText(t, keyed("k1"), "load_tools", map[string]any{"names": []string{"poke"}}); isErr {
		t.Fatalf("load_tools, sessionless: %s", text)
	}
	if got := mcptest.ToolNames(t, keyed("k1")); !slices.Equal(got, []string{"console_print", "find_tools", "load_tools", "poke"}) {
		t.Errorf("the loading key's list: %v", got)
	}
	if got := mcptest.ToolNames(t, keyed("k2")); !slices.Equal(got, eager) {
		t.Errorf("another key's list: %v", got)
	}
}

// TestMCPOffersOnlyWorkingTools: the context group's tools work on a
// conversation the runtime holds, which an MCP client's agent has not: a
// role with the group does not offer them over MCP, and a call of one is
// refused as an unknown tool (-32602, tool_not_available) rather than
// failing inside the tool.
func TestMCPOffersOnlyWorkingTools(t *testing.T) {
	srv, h := serve(t, &config.Config{})
	rt := agents.New(h, &agents.Options{Console: io.Discard})
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	if _, err := h.Roles().Create(context.Background(), host.RoleSpec{Name: "talker", ToolGroups: []string{"console", "context"}}); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{sessionEra, sessionlessEra} {
		cs, _ := connectAs(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/talker"}, era)
		if got := mcptest.ToolNames(t, cs); !slices.Equal(got, []string{"console_print"}) {
			t.Errorf("%s: tools/list %v, want console_print alone", era, got)
		}
		if e := mcptest.CallRefused(t, cs, "get_context_status", map[string]any{}); e.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(e.Message, string(toolhost.CodeToolNotAvailable)+": ") {
			t.Errorf("%s: get_context_status: %d %q, want -32602 tool_not_available", era, e.Code, e.Message)
		}
	}
}
