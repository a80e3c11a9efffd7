package server

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
)

// TestMCPClientRunsAScript: a client of /mcp/ROLE of a role with the
// code group lists run_script, its description naming the role's tools,
// and runs a script over them; its result is the script's, as structured
// content and as the same JSON in text.
func TestMCPClientRunsAScript(t *testing.T) {
	type count struct {
		N int `json:"n"`
	}
	files := &sdk.Group{ID: "files", Description: "Files.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("count", "Count something.", func(context.Context, *sdk.Request[struct{}]) (count, error) { return count{N: 3}, nil }),
		sdk.NewTool("peek", "Peek at a file.", func(_ context.Context, r *sdk.Request[struct {
			Path string `json:"path"`
		}]) (*sdk.Result, error) {
			return sdk.Text("peeked at " + r.Args.Path), nil
		}),
	}}
	srv, h := serve(t, &config.Config{}, files)
	rt := agents.New(h, &agents.Options{Console: io.Discard})
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	if _, err := h.Roles().Create(context.Background(), host.RoleSpec{Name: "scripter", ToolGroups: []string{"files", "code"}}); err != nil {
		t.Fatal(err)
	}
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/scripter"})
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var desc string
	for _, tool := range list.Tools {
		if tool.Name == "run_script" {
			desc = tool.Description
		}
	}
	if !strings.Contains(desc, "\ncount()\n") || !strings.HasSuffix(desc, "\npeek(path: str)") {
		t.Fatalf("run_script's description over MCP:\n%s", desc)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_script", Arguments: map[string]any{
		"script": `result = {"n": count()["n"], "peek": peek(path = "a.go")}`}})
	if err != nil || res.IsError {
		t.Fatalf("run_script: %+v %v", res, err)
	}
	const want = `{"result":{"n":3,"peek":"peeked at a.go"}}`
	sc, _ := json.Marshal(res.StructuredContent)
	if text := res.Content[0].(*mcp.TextContent).Text; text != want || string(sc) != want {
		t.Errorf("text %s, structured %s; want %s", text, sc, want)
	}
}
