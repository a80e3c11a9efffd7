package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
)

// TestMCPStdio runs `toolhost mcp -role R` as a real process and talks to it
// over stdio with the MCP SDK's client, as an MCP client would. toolhost
// is built as scripts/build builds it, with its commit stamped, and its
// serverInfo.version is what `toolhost version` prints.
func TestMCPStdio(t *testing.T) {
	dir := t.TempDir()
	stamp := "-X github.com/toolhost/toolhost.stampRevision=0123456789abcdef0123456789abcdef01234567 -X github.com/toolhost/toolhost.stampTime=2026-12-01T10:00:00Z"
	for pkg, out := range map[string]string{".": "bin/toolhost", "../../examples/notes": "bin/notes"} {
		if b, err := exec.Command("go", "build", "-ldflags", stamp, "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
	}
	b, err := exec.Command(filepath.Join(dir, "bin", "toolhost"), "version", "-json").Output()
	var build struct{ Version string }
	if err != nil || json.Unmarshal(b, &build) != nil || build.Version == "" || build.Version == "devel" {
		t.Fatalf("toolhost version -json: %v, %s", err, b)
	}
	cfg := filepath.Join(dir, "config.hcl")
	src := `plugin_dir = "bin"
plugin "notes" {
  path = "notes"
}
role "scribe" {
  tool_groups = ["notes"]
  tools {
    deny = ["search_notes"]
  }
}
`
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.Command(filepath.Join(dir, "bin", "toolhost"), "mcp", "-role", "scribe", "-config", cfg)
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ServerInfo.Version; v != build.Version {
		t.Errorf("serverInfo.version %q, toolhost version %q", v, build.Version)
	}
	if names := mcptest.ToolNames(t, cs); !slices.Equal(names, []string{"add_note", "get_note"}) {
		t.Fatalf("tools = %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_note", Arguments: map[string]any{"title": "t", "body": "b"}})
	if err != nil || res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "saved t") {
		t.Fatalf("add_note = %+v, %v", res, err)
	}
	if e := mcptest.CallRefused(t, cs, "search_notes", map[string]any{"query": "t"}); e.Code != jsonrpc.CodeInvalidParams || !strings.Contains(e.Message, "tool_not_available") {
		t.Fatalf("search_notes (denied) = %d %s, want -32602 tool_not_available", e.Code, e.Message)
	}

	// A line that is not JSON-RPC gets -32700, and the process goes on: a
	// sessionless tools/list after it is answered.
	raw := exec.Command(filepath.Join(dir, "bin", "toolhost"), "mcp", "-role", "scribe", "-config", cfg)
	raw.Stderr = os.Stderr
	in, _ := raw.StdinPipe()
	out, _ := raw.StdoutPipe()
	if err := raw.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close(); _ = raw.Wait() }()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if _, err := io.WriteString(in, "not json at all\n"+`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta+`}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for _, want := range []string{`"code":-32700`, `"name":"add_note"`} {
		if !lines.Scan() || !strings.Contains(lines.Text(), want) {
			t.Fatalf("toolhost mcp answered %q (%v), want %s", lines.Text(), lines.Err(), want)
		}
	}
}

// TestMCPInspect: `mcp inspect` starts npm's memory server and prints the
// group an mcp_server block would give, names prefixed and mapped back.
func TestMCPInspect(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run([]string{"mcp", "inspect", "-tool-prefix", "mem_", "--", mcptest.NPMServer(t, "mcp-server-memory")}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var ins struct {
		Group struct {
			Tools []struct{ Name string } `json:"tools"`
		} `json:"group"`
		Names map[string]string `json:"names"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &ins); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if len(ins.Group.Tools) == 0 || ins.Names["mem_create_entities"] != "create_entities" {
		t.Errorf("inspect printed %s", stdout.String())
	}
	if code := run([]string{"mcp", "inspect"}, &stdout, &stderr); code != 2 {
		t.Errorf("no server: exit %d, want 2 (usage)", code)
	}
}

// TestMCPImportExitStatus checks the command's exit statuses: 2 for usage,
// 1 for a file that cannot be imported, with nothing on stdout; and that
// the import's warnings go to stderr.
func TestMCPImportExitStatus(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "claude.json"), filepath.Join(dir, "bad.json")
	for file, src := range map[string]string{
		good: `{"mcpServers": {"x": {"command": "x", "env": {"A": "${TOOLHOST_TOKEN}"}}}}`,
		bad:  `{"mcpServers": {"x": {}}}`,
	} {
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"mcp", "import", "-probe=false", good}, 0, "toolhost: warning: " + good + `: "x" env A refers to TOOLHOST_TOKEN`},
		{[]string{"mcp", "import"}, 2, "usage: toolhost mcp import [flags] FILE"},
		{[]string{"mcp", "import", "a.json", "b.json"}, 2, "usage: toolhost mcp import [flags] FILE"},
		{[]string{"mcp", "import", "-x", good}, 2, "flag provided but not defined: -x"},
		{[]string{"mcp", "import", filepath.Join(dir, "missing.json")}, 1, "missing.json: no such file"},
		{[]string{"mcp", "import", bad}, 1, `bad.json: mcpServers."x": has neither command`},
	} {
		var stdout, stderr bytes.Buffer
		if got := run(tc.args, &stdout, &stderr); got != tc.status || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%v: status %d, stderr %q; want %d, %q", tc.args, got, stderr.String(), tc.status, tc.stderr)
		}
		if (tc.status == 0) != (stdout.Len() > 0) {
			t.Errorf("%v: stdout %q", tc.args, stdout.String())
		}
	}
}
