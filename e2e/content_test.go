package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/server"
)

// clockTime is a time of day as server-everything writes one into the
// resources it makes (toLocaleTimeString), which differ between two calls.
var clockTime = regexp.MustCompile(`\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?`)

// TestContentLikeDirect: npm's everything server, called directly by a
// go-sdk client and through /mcp/ROLE of a host that loads it (over HTTP in
// each era, and over stdio), gives the client the same content: its tiny
// image, its annotated message with an image, its resource links and its
// embedded resource, each block in order with its annotations.
func TestContentLikeDirect(t *testing.T) {
	bin := mcptest.NPMServer(t, "mcp-server-everything")
	ctx := context.Background()
	cfg := &config.Config{
		Limits: config.Limits{Timeout: 30 * time.Second},
		Plugins: []config.Plugin{{Name: "everything", Kind: config.KindMCP, Path: bin, StartTimeout: proctest.Patience,
			Restart: config.RestartNever, Sandbox: mcptest.NPMSandbox()}},
		Roles: []config.Role{{Name: "tester", ToolGroups: []string{"everything"}}},
	}
	cfg.Auth.Disabled = true
	h, err := host.New(cfg, &host.Options{DescribeTimeout: proctest.Patience})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	handler, err := server.New(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)

	connect := func(tr mcp.Transport, version string) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	direct := connect(&mcp.CommandTransport{Command: exec.Command(bin)}, "")
	clients := map[string]*mcp.ClientSession{
		"http 2025-11-25": connect(&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/tester"}, "2025-11-25"),
		"http 2026-07-28": connect(&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/tester"}, "2026-07-28"),
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- server.ServeMCP(ctx, h, "tester", &mcp.IOTransport{Reader: serverIn, Writer: serverOut})
	}()
	clients["stdio"] = connect(&mcp.IOTransport{Reader: clientIn, Writer: clientOut}, "")
	t.Cleanup(func() { _ = clientOut.Close(); <-done })

	content := func(cs *mcp.ClientSession, tool string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %+v, %v", tool, res, err)
		}
		b, _ := json.Marshal(res.Content)
		return clockTime.ReplaceAllString(string(b), "TIME")
	}
	for _, c := range []struct {
		server, ours string
		args         map[string]any
	}{
		{"get-tiny-image", "get_tiny_image", map[string]any{}},
		{"get-annotated-message", "get_annotated_message", map[string]any{"messageType": "error", "includeImage": true}},
		{"get-resource-links", "get_resource_links", map[string]any{"count": 4}},
		{"get-resource-reference", "get_resource_reference", map[string]any{"resourceType": "Text", "resourceId": 2}},
	} {
		want := content(direct, c.server, c.args)
		for name, cs := range clients {
			if got := content(cs, c.ours, c.args); got != want {
				t.Errorf("%s, %s:\n got %s\nwant %s", c.ours, name, got, want)
			}
		}
	}
}
