package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/proctest"
)

// TestGoSDKClient drives the MCP front of a real `toolhost serve` (the
// TypeScript client test's config) with the go-sdk client, over streamable
// HTTP with the role's token and over stdio (`toolhost mcp -role`): the
// instructions are the role's prompt, get_workspace_info's
// structuredContent validates against its outputSchema, run_command's lines
// come as progress notifications, and cancelling the call's context stops
// the command on the machine.
func TestGoSDKClient(t *testing.T) {
	srv := newServe(t, fmt.Sprintf(tsConfig, pluginDir))
	srv.start()
	token := srv.roleToken("developer", "go-client", "")
	prompt := rolePrompt(t, srv.cfg, "developer")

	var (
		mu       sync.Mutex
		progress = map[any][]string{} // progress token → messages
	)
	connect := func(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				defer mu.Unlock()
				progress[req.Params.ProgressToken] = append(progress[req.Params.ProgressToken], req.Params.Message)
			},
		})
		cs, err := client.Connect(context.Background(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	for _, tr := range []struct {
		name string
		make func() mcp.Transport
	}{
		{"http", func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: srv.base + "/mcp/developer",
				HTTPClient: &http.Client{Transport: bearerTransport(token)}}
		}},
		{"stdio", func() mcp.Transport {
			cmd := exec.Command(srv.bin, "mcp", "-role", "developer", "-config", srv.cfg)
			cmd.Dir = srv.dir
			return &mcp.CommandTransport{Command: cmd}
		}},
	} {
		t.Run(tr.name, func(t *testing.T) {
			cs := connect(t, tr.make())
			if got := cs.InitializeResult().Instructions; got != prompt {
				t.Errorf("instructions:\n%s\nwant the role's prompt:\n%s", got, prompt)
			}

			t.Run("structured", func(t *testing.T) {
				tools, err := cs.ListTools(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				i := slices.IndexFunc(tools.Tools, func(tool *mcp.Tool) bool { return tool.Name == "get_workspace_info" })
				if i < 0 || tools.Tools[i].OutputSchema == nil {
					t.Fatalf("get_workspace_info listed with no outputSchema")
				}
				var schema jsonschema.Schema
				b, _ := json.Marshal(tools.Tools[i].OutputSchema)
				if err := json.Unmarshal(b, &schema); err != nil {
					t.Fatal(err)
				}
				resolved, err := schema.Resolve(nil)
				if err != nil {
					t.Fatal(err)
				}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_workspace_info", Arguments: map[string]any{}})
				if err != nil || res.IsError || res.StructuredContent == nil {
					t.Fatalf("result %+v, %v: want structured content", res, err)
				}
				var sc any
				b, _ = json.Marshal(res.StructuredContent)
				_ = json.Unmarshal(b, &sc)
				if err := resolved.Validate(sc); err != nil || !strings.Contains(string(b), srv.dir) {
					t.Errorf("structuredContent %s against the outputSchema: %v", b, err)
				}
			})

			t.Run("progress", func(t *testing.T) {
				token := "lines-" + tr.name
				params := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{
					"command": "echo one; sleep 0.3; echo two; sleep 0.3; echo three; sleep 0.3"}}
				params.SetProgressToken(token)
				res, err := cs.CallTool(context.Background(), params)
				if err != nil || res.IsError {
					t.Fatalf("run_command: %+v, %v", res, err)
				}
				mu.Lock()
				got := progress[token]
				mu.Unlock()
				if !slices.Equal(got, []string{"one", "two", "three"}) {
					t.Errorf("progress messages %q, want one, two, three", got)
				}
			})

			t.Run("cancel", func(t *testing.T) {
				marker := proctest.Marker()
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{
						"command": "sleep " + marker, "timeout_seconds": 600}})
					done <- err
				}()
				t.Cleanup(cancel)
				proctest.Eventually(t, "the call's sleep runs", func() bool { return proctest.Running("sleep", marker) > 0 })
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("the cancelled call returned %v", err)
				}
				proctest.Eventually(t, "the cancelled call's sleep is gone", func() bool { return proctest.Running("sleep", marker) == 0 })
				alive(t, cs) // ping, or tools/list in 2026-07-28, which has no ping
			})
		})
	}
}
