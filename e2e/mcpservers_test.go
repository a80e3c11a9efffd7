package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/server"
)

// TestMCPServersBesideModules loads npm's filesystem, memory and everything
// servers beside the first-party workspace and command modules, from one
// config file: filesystem's tools take their prefix, a role holding only
// memory lists exactly memory's tools on our MCP front and calls them there,
// and SIGKILL of a server's process unregisters its group and brings it
// back. The processes are gone after Close.
func TestMCPServersBesideModules(t *testing.T) {
	dir, files := t.TempDir(), t.TempDir()
	servers, err := mcptest.ReferenceServers(files, filepath.Join(files, "memory.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`
plugin_dir = %q
data_dir   = "data"
builtin "workspace" {
  config {}
}
builtin "command" {
  config {}
}
%s
role "rememberer" {
  tool_groups = ["memory"]
}
`, pluginDir, servers)
	cfg, err := config.Parse([]byte(src), filepath.Join(dir, "config.hcl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth.Disabled = true
	h, err := host.New(cfg, &host.Options{DescribeTimeout: proctest.Patience, RestartBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = h.Close()
		}
	})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, p := range h.Modules().List() {
		if p.State != host.StateRunning {
			t.Fatalf("%s: %s %s", p.Name, p.State, p.LastError)
		}
		pids[p.Name] = p.Pid
	}
	groupTools := func(id string) []string {
		g, _ := h.Modules().Group(id)
		var names []string
		for _, tool := range g.Spec.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		return names
	}
	if fs := groupTools("fs"); !slices.Contains(fs, "fs_read_text_file") || !slices.Contains(fs, "fs_write_file") {
		t.Errorf("fs's tools: %v", fs)
	}
	if ws := groupTools("workspace"); !slices.Contains(ws, "read_file") {
		t.Errorf("workspace's tools: %v", ws)
	}

	handler, err := server.New(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/rememberer"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got, want := mcptest.ToolNames(t, cs), groupTools("memory"); !slices.Equal(got, want) || len(got) == 0 {
		t.Errorf("the role's MCP tools %v, want memory's %v", got, want)
	}
	if _, isErr := mcptest.CallText(t, cs, "create_entities", map[string]any{"entities": []map[string]any{{"name": "e2e", "entityType": "test", "observations": []string{"seen through the front"}}}}); isErr {
		t.Error("create_entities failed")
	}
	if out, _ := mcptest.CallText(t, cs, "read_graph", map[string]any{}); !strings.Contains(out, "seen through the front") {
		t.Errorf("read_graph: %s", out)
	}
	if e := mcptest.CallRefused(t, cs, "run_command", map[string]any{"command": "id"}); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "tool_not_available") {
		t.Errorf("run_command from the memory role: %d %s", e.Code, e.Message)
	}

	// SIGKILL of the memory server: unregistered, then back.
	killed := time.Now()
	if err := syscall.Kill(pids["memory"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the memory group is unregistered", func() bool { _, ok := h.Modules().Group("memory"); return !ok })
	t.Logf("memory's group unregistered %s after the SIGKILL", time.Since(killed))
	proctest.Eventually(t, "memory is back", func() bool { _, ok := h.Modules().Group("memory"); return ok })
	res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "read_graph", Arguments: []byte(`{}`)})
	if err != nil || !res.OK || !strings.Contains(res.Stdout, "seen through the front") {
		t.Errorf("read_graph after the restart: %+v, %v", res, err)
	}

	// Close leaves no server process.
	for _, p := range h.Modules().List() {
		pids[p.Name] = p.Pid
	}
	closed = true
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for name, pid := range pids {
		if pid != 0 && syscall.Kill(pid, 0) == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(b), ") Z ") {
				t.Errorf("%s's process %d outlived Close", name, pid)
			}
		}
	}
}

// TestFirstPartyAnnotations: every first-party module's tool states MCP's
// hints, truthfully for the ones that matter most to a client deciding what
// to approve.
func TestFirstPartyAnnotations(t *testing.T) {
	h := startHost(t, t.TempDir())
	hints := map[string]map[string]bool{}
	for _, id := range []string{"workspace", "command", "network", "chrome"} {
		g, ok := h.Modules().Group(id)
		if !ok {
			t.Fatalf("no group %s", id)
		}
		for _, tool := range g.Spec.Tools {
			var a map[string]bool
			if err := json.Unmarshal(tool.Annotations, &a); err != nil || len(a) != 4 {
				t.Errorf("%s: annotations %s", tool.Name, tool.Annotations)
			}
			hints[tool.Name] = a
		}
	}
	for tool, want := range map[string]string{
		"read_file": "readOnlyHint", "search_files": "readOnlyHint", "get_text": "readOnlyHint",
		"write_file": "destructiveHint", "edit_file": "destructiveHint", "run_command": "destructiveHint",
		"http_request": "openWorldHint", "navigate": "openWorldHint",
	} {
		if !hints[tool][want] {
			t.Errorf("%s: %v, want %s", tool, hints[tool], want)
		}
	}
	if hints["read_file"]["openWorldHint"] || hints["write_file"]["readOnlyHint"] {
		t.Errorf("read_file %v, write_file %v", hints["read_file"], hints["write_file"])
	}
}
