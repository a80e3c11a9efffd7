package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// TestMCPServerGroup: npm's everything server, loaded as an mcp_server
// module, is called through POST /api/call and through our MCP front, where
// its long-running operation reports progress to our client and is
// cancelled with our client's call.
func TestMCPServerGroup(t *testing.T) {
	cfg := &config.Config{
		Limits: config.Limits{Timeout: 30 * time.Second},
		Plugins: []config.Plugin{{Name: "everything", Kind: config.KindMCP, Path: mcptest.NPMServer(t, "mcp-server-everything"),
			Restart: config.RestartOnFailure, MaxRestarts: 1, StartTimeout: proctest.Patience, Sandbox: mcptest.NPMSandbox()}},
		Roles: []config.Role{{Name: "tester", ToolGroups: []string{"everything"}}},
	}
	srv, _ := serve(t, cfg)

	var res struct {
		OK     bool   `json:"ok"`
		Stdout string `json:"stdout"`
	}
	if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"tool": "echo", "arguments": map[string]any{"message": "through the API"}}, &res); code != 200 || !res.OK || !strings.Contains(res.Stdout, "through the API") {
		t.Fatalf("POST /api/call echo = %d %+v", code, res)
	}

	var mu sync.Mutex
	var progress []float64
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Progress)
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/tester"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if out, isErr := mcptest.CallText(t, cs, "echo", map[string]any{"message": "through MCP"}); isErr || !strings.Contains(out, "through MCP") {
		t.Errorf("echo over MCP: %q (error %v)", out, isErr)
	}

	// The server's output schema and structured results reach our clients.
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if tool.Name == "get_structured_content" && tool.OutputSchema == nil {
			t.Error("get_structured_content lost its output schema")
		}
	}
	sc, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_structured_content", Arguments: map[string]any{"location": "Chicago"}})
	if err != nil || sc.IsError || sc.StructuredContent == nil {
		t.Errorf("get_structured_content: %+v, %v", sc, err)
	}

	params := &mcp.CallToolParams{Name: "trigger_long_running_operation", Arguments: map[string]any{"duration": 1, "steps": 4}}
	params.SetProgressToken("op-1")
	if r, err := cs.CallTool(context.Background(), params); err != nil || r.IsError {
		t.Fatalf("long-running operation: %+v, %v", r, err)
	}
	// The client may handle notifications after the result.
	proctest.Eventually(t, "the server's progress notifications reach the client", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) >= 2
	})

	// Cancelled by our client: the call ends long before the operation's
	// 20 s (15 s leaves a loaded machine room), and the server serves on.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "trigger_long_running_operation", Arguments: map[string]any{"duration": 20, "steps": 4}})
	if err == nil || time.Since(start) > 15*time.Second {
		t.Errorf("a cancelled call returned %v after %s", err, time.Since(start))
	}
	if out, isErr := mcptest.CallText(t, cs, "echo", map[string]any{"message": "still here"}); isErr || !strings.Contains(out, "still here") {
		t.Errorf("echo after the cancellation: %q", out)
	}
}
