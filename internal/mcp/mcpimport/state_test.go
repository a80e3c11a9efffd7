package mcpimport

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
)

// TestMCPImportStatefulServers: npm's memory server, installed, run by
// node or fetched by npx, gets a file for its state outside its code (its
// code is read-only in the sandbox) and that file's directory read-write,
// with a comment saying what the import chose; a file the client names is
// kept, its directory read-write; one the import cannot use is a note.
func TestMCPImportStatefulServers(t *testing.T) {
	const chosen = `MEMORY_FILE_PATH = "/home/me/toolhost/mcp-state/memory/memory.jsonl"`
	const chosenDir = `read_write = ["/home/me/toolhost/mcp-state/memory"]`
	for _, tc := range []struct {
		name, server string
		want         []string
		not          []string
	}{
		{"installed", `{"command": "/home/me/mcp/node_modules/.bin/mcp-server-memory"}`,
			[]string{chosen, chosenDir, "# server-memory keeps its knowledge graph in a file beside its code, read-only in the sandbox,\n" +
				"# unless MEMORY_FILE_PATH names one elsewhere. Where you want it the import cannot know: it chose\n" +
				"# /home/me/toolhost/mcp-state/memory/memory.jsonl; to move it, change env and read_write together.\n" +
				"# Make its directory before the server starts: mkdir -p /home/me/toolhost/mcp-state/memory\nmcp_server \"memory\" {"}, nil},
		{"run by node", `{"command": "node", "args": ["/home/me/mcp/node_modules/@modelcontextprotocol/server-memory/dist/index.js"]}`,
			[]string{chosen, chosenDir}, nil},
		{"fetched by npx", `{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory@latest"]}`,
			[]string{chosen, chosenDir}, nil},
		{"a file the client names", `{"command": "/home/me/mcp/node_modules/.bin/mcp-server-memory", "env": {"MEMORY_FILE_PATH": "/srv/ws/memory.jsonl"}}`,
			[]string{`MEMORY_FILE_PATH = "/srv/ws/memory.jsonl"`, `read_write = ["/srv/ws"]`, "# server-memory keeps its knowledge graph in /srv/ws/memory.jsonl (MEMORY_FILE_PATH): its directory is read_write."},
			[]string{"mcp-state"}},
		{"a relative file", `{"command": "/home/me/mcp/node_modules/.bin/mcp-server-memory", "env": {"MEMORY_FILE_PATH": "memory.jsonl"}}`,
			[]string{`# MEMORY_FILE_PATH "memory.jsonl" is relative: server-memory resolves it against its own code's directory`},
			[]string{"read_write =", "mcp-state"}},
		{"a file the client fills in", `{"command": "/home/me/mcp/node_modules/.bin/mcp-server-memory", "env": {"MEMORY_FILE_PATH": "${HOME}/memory.jsonl"}}`,
			[]string{"# server-memory keeps its knowledge graph in the file MEMORY_FILE_PATH names, which the client fills in"},
			[]string{"read_write =", "mcp-state"}},
		{"another server", `{"command": "/home/me/.local/bin/search-mcp"}`, nil, []string{"MEMORY_FILE_PATH", "read_write ="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := importMCP(context.Background(), []byte(`{"mcpServers": {"memory": `+tc.server+`}}`), "f.json", testMachine())
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.want {
				if !strings.Contains(string(out), want) {
					t.Errorf("no %q in\n%s", want, out)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(string(out), not) {
					t.Errorf("%q in\n%s", not, out)
				}
			}
			if _, err := config.Parse(out, "/home/me/toolhost/config.hcl", &config.Options{Getenv: func(string) string { return "" }}); err != nil {
				t.Errorf("the config does not load: %v\n%s", err, out)
			}
		})
	}
}

// TestMCPImportMemoryWrites imports npm's memory server as a client has it
// (its bin link, nothing else), loads the block the import printed as the
// config it was written for, and makes it write: create_entities succeeds
// in its sandbox, and the file the import chose holds the entity.
func TestMCPImportMemoryWrites(t *testing.T) {
	server := mcptest.NPMServer(t, "mcp-server-memory")
	dir := t.TempDir()
	file := filepath.Join(dir, "config.hcl")
	client := clientJSON(t, map[string]any{"mcpServers": map[string]any{"memory": map[string]any{"command": server}}})
	blocks, _, err := Import(context.Background(), client, "claude_desktop_config.json", Options{ConfigFile: file, Probe: true})
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "mcp-state", "memory")
	for _, line := range []string{"MEMORY_FILE_PATH = " + strconv.Quote(filepath.Join(state, "memory.jsonl")), "read_write = [" + strconv.Quote(state) + "]",
		"# The import made its directory, " + state + "."} {
		if !strings.Contains(string(blocks), line) {
			t.Errorf("no %q in\n%s", line, blocks)
		}
	}
	if fi, err := os.Stat(state); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the state directory: %v, %v", fi, err)
	}
	h := startImported(t, file, blocks)
	if st := h.Modules().List()[0]; st.State != host.StateRunning {
		t.Fatalf("memory: %s %s\n%s", st.State, st.LastError, blocks)
	}
	args := `{"entities": [{"name": "toolhost", "entityType": "project", "observations": ["runs modules in a sandbox"]}]}`
	res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "create_entities", Arguments: []byte(args)})
	if err != nil || !res.OK {
		t.Fatalf("create_entities: %+v, %v", res, err)
	}
	if got, err := os.ReadFile(filepath.Join(state, "memory.jsonl")); err != nil || !strings.Contains(string(got), `"name":"toolhost"`) {
		t.Errorf("memory.jsonl: %q, %v", got, err)
	}
}
