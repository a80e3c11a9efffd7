package mcpimport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpsource"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/server"
)

// group is a registered group as the probe lists it: offered is its tools,
// skipped those another group serves.
func group(id string, kind host.SourceKind, offered []string, skipped ...string) host.GroupInfo {
	g := host.GroupInfo{ID: id, Description: "Group " + id + ".", Tools: offered, ToolCount: len(offered), Source: host.SourceInfo{Kind: kind, Name: id}}
	for _, n := range skipped {
		g.Skipped = append(g.Skipped, host.SkippedTool{Name: n, Reason: "another group serves it"})
	}
	return g
}

// TestMCPImportPrefixes: from what the probe learned, the import writes a
// tool_prefix for a server whose tool names another group has too (the
// config's, or another imported server's), and stops, saying why, where a
// prefix would not make them the server's own.
func TestMCPImportPrefixes(t *testing.T) {
	workspace := group("workspace", host.SourceBuiltin, []string{"read_file", "write_file", "grep"})
	server := func(name string) string {
		return `"` + name + `": {"command": "node", "args": ["/opt/brain/index.js"]}`
	}
	for _, tc := range []struct {
		name    string
		servers []string // their names
		learned learned
		want    []string // in the output, in order
		not     []string // not in the output
		err     string   // the import fails saying so
	}{
		{name: "no clash: no prefix, the description",
			servers: []string{"notes"},
			learned: learned{groups: []host.GroupInfo{workspace, group("notes", host.SourceMCP, []string{"add_note", "search"})}},
			want:    []string{"mcp_server \"notes\" {\n  description = \"Group notes.\"\n  command     = \"node\"\n"},
			not:     []string{"tool_prefix"}},
		{name: "a core group's names",
			servers: []string{"files"},
			learned: learned{groups: []host.GroupInfo{workspace, group("files", host.SourceMCP, []string{"directory_tree"}, "write_file", "read_file")}},
			want: []string{"# tool_prefix, since the host offers each tool name once:\n#   group workspace has read_file, write_file too\nmcp_server \"files\" {\n",
				"  tool_prefix = \"files_\"\n"}},
		{name: "a plugin's names: the config's block keeps them",
			servers: []string{"kb"},
			learned: learned{groups: []host.GroupInfo{group("notes", host.SourcePlugin, []string{"search"}), group("kb", host.SourceMCP, []string{"search"})}},
			want:    []string{"#   group notes has all 1 of its tool names too\n", "  tool_prefix = \"kb_\"\n"}},
		{name: "two servers: both prefixed",
			servers: []string{"a", "b"},
			learned: learned{groups: []host.GroupInfo{group("a", host.SourceMCP, []string{"search", "x"}), group("b", host.SourceMCP, []string{"y"}, "search")}},
			want:    []string{`#   mcp_server "b" has search too`, `tool_prefix = "a_"`, `#   mcp_server "a" has search too`, `tool_prefix = "b_"`}},
		{name: "a label that is no tool name",
			servers: []string{"My-Very-Long-Server-Name-With-Many-Words"},
			learned: learned{groups: []host.GroupInfo{workspace, group("my-very-long-server-name-with-many-words", host.SourceMCP, []string{"x"}, "grep")}},
			want:    []string{`tool_prefix = "my_very_long_server_name_with_m_"`}},
		{name: "not started: said, nothing checked",
			servers: []string{"files", "notes"},
			learned: learned{groups: []host.GroupInfo{workspace, group("notes", host.SourceMCP, []string{"x"})}, down: map[string]string{"files": "exited\nat once", "chrome": "not found"}},
			want: []string{"# chrome did not start here (not found): its tool names are not checked against the servers'\n\n",
				"# not started here (exited): its tool names are not checked against the other groups'\nmcp_server \"files\" {\n  command = \"node\"\n"},
			not: []string{"tool_prefix"}},
		{name: "a prefixed name is taken too",
			servers: []string{"files"},
			learned: learned{groups: []host.GroupInfo{group("workspace", host.SourceBuiltin, []string{"read_file", "files_read_file"}), group("files", host.SourceMCP, []string{"stat"}, "read_file")}},
			err:     `claude.json: mcp_server "files": its tool read_file is files_read_file with tool_prefix "files_", a name group workspace has too: write its tool_prefix by hand`},
		{name: "a prefixed name is another server's",
			servers: []string{"a", "b", "c"},
			learned: learned{groups: []host.GroupInfo{group("a", host.SourceMCP, []string{"b_x"}), group("b", host.SourceMCP, []string{"x"}), group("c", host.SourceMCP, nil, "x")}},
			err:     `mcp_server "b": its tool x is b_x with tool_prefix "b_", a name mcp_server "a" has too`},
		{name: "the prefix is to blame, whichever server comes first",
			servers: []string{"a", "b", "z"},
			learned: learned{groups: []host.GroupInfo{group("a", host.SourceMCP, []string{"x"}), group("b", host.SourceMCP, nil, "x"), group("z", host.SourceMCP, []string{"a_x"})}},
			err:     `mcp_server "a": its tool x is a_x with tool_prefix "a_", a name mcp_server "z" has too`},
		{name: "a label that is a core tool's name",
			servers: []string{"grep"},
			learned: learned{groups: []host.GroupInfo{workspace, func() host.GroupInfo {
				g := group("grep", host.SourceMCP, nil, "x")
				g.Blocked = true
				return g
			}()}},
			err: `mcp_server "grep": its label is the name of another group's tool, so the host would offer none of its tools, whatever its tool_prefix: rename "grep" in claude.json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries := make([]string, len(tc.servers))
			for i, s := range tc.servers {
				entries[i] = server(s)
			}
			m := testMachine()
			var probed string
			m.probe = func(_ context.Context, blocks []byte) (*learned, error) {
				probed = string(blocks)
				return &tc.learned, nil
			}
			out, _, err := importMCP(context.Background(), []byte(`{"mcpServers": {`+strings.Join(entries, ", ")+`}}`), "claude.json", m)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q\n%s", err, tc.err, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The probe starts the blocks as written, but for what it learns.
			if strings.Contains(probed, "tool_prefix") || strings.Contains(probed, "description") || !strings.Contains(probed, "sandbox {") {
				t.Errorf("the probe started\n%s", probed)
			}
			rest := string(out)
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("no %q (in this order) in\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tc.not {
				if strings.Contains(string(out), n) {
					t.Errorf("%q in\n%s", n, out)
				}
			}
			if _, err := config.Parse(out, "/home/me/toolhost/config.hcl", &config.Options{Getenv: func(string) string { return "" }}); err != nil {
				t.Errorf("the config does not load: %v\n%s", err, out)
			}
		})
	}
}

// TestMCPImportClaudeDesktop imports a Claude Desktop config naming npm's
// filesystem and memory servers beside the repository's config.hcl, whose
// modules are built as `scripts/build` would, and serves the result: a
// role with either server's group alone is offered every tool of it (the
// filesystem server's read_file, write_file, edit_file and search_files
// are the workspace module's names too, so the import wrote it a
// tool_prefix; without one the role got 10 of 14 tools), /api/groups
// counts exactly those, and each server runs confined, in the sandbox the
// import wrote: other namespaces than the test's, its directory visible,
// the data directory not.
func TestMCPImportClaudeDesktop(t *testing.T) {
	servers := map[string]string{"filesystem": mcptest.NPMServer(t, "mcp-server-filesystem"), "memory": mcptest.NPMServer(t, "mcp-server-memory")}
	dir, root := t.TempDir(), t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "plugins")+string(filepath.Separator),
		"./plugins/workspace", "./plugins/command", "./plugins/network", "./plugins/chrome")
	build.Dir = filepath.Join("..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the modules: %v\n%s", err, out)
	}
	base, err := os.ReadFile(filepath.Join("..", "..", "..", "config.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(file, base, 0o644); err != nil {
		t.Fatal(err)
	}
	client := clientJSON(t, map[string]any{"mcpServers": map[string]any{
		"filesystem": map[string]any{"command": servers["filesystem"], "args": []string{root}},
		"memory":     map[string]any{"command": servers["memory"]},
	}})

	blocks, warnings, err := Import(context.Background(), client, "claude_desktop_config.json", Options{ConfigFile: file, Probe: true})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("%v, warnings %q", err, warnings)
	}
	out := string(blocks)
	for _, want := range []string{"#   group workspace has edit_file, read_file, search_files, write_file too\nmcp_server \"filesystem\" {\n",
		"  tool_prefix = \"filesystem_\"\n", "mcp_server \"memory\" {\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Count(out, "tool_prefix") != 2 || strings.Count(out, "\n  sandbox {\n") != 2 || strings.Count(out, "\n  description = \"MCP server ") != 2 {
		t.Errorf("want one tool_prefix (and its comment), and a sandbox block and a description for each server:\n%s", out)
	}
	roles := "role \"files\" {\n  tool_groups = [\"filesystem\"]\n}\nrole \"memories\" {\n  tool_groups = [\"memory\"]\n}\n"
	if err := os.WriteFile(file, slices.Concat(base, []byte("\n"), blocks, []byte(roles)), 0o644); err != nil {
		t.Fatal(err)
	}

	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for i := range cfg.Plugins {
		cfg.Plugins[i].StartTimeout = proctest.Patience // node, on a loaded machine
	}
	cfg.Auth.Token = "import-test-token-0123456789abcdef"
	h, err := host.New(cfg, &host.Options{DescribeTimeout: proctest.Patience})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	rt := agents.New(h, &agents.Options{Console: io.Discard})
	t.Cleanup(func() { _ = rt.Close() })
	ctx := context.Background()
	if err := rt.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range h.Modules().List() {
		if p.State != host.StateRunning {
			t.Fatalf("%s %s: %s %s", p.Kind, p.Name, p.State, p.LastError)
		}
	}
	handler, err := server.New(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	var groups []host.GroupInfo
	getJSON(t, srv.URL+"/api/groups", cfg.Auth.Token, &groups)

	modules := filepath.Join(mcptest.NPMDir(), "node_modules")
	for _, tc := range []struct {
		role, group, prefix string
		args                []string
		visible             string // a path its sandbox shows
	}{{"files", "filesystem", "filesystem_", []string{root}, root}, {"memories", "memory", "", nil, modules}} {
		// Every tool the server has, as listed by a client of its own.
		ins, err := mcpsource.Inspect(ctx, append([]string{servers[tc.group]}, tc.args...), "", tc.prefix, nil)
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for _, tool := range ins.Group.Tools {
			all = append(all, tool.Name)
		}
		var role host.ToolList
		getJSON(t, srv.URL+"/api/roles/"+tc.role+"/tools", cfg.Auth.Token, &role)
		var offered []string
		for _, d := range role.Tools {
			offered = append(offered, d.Function.Name)
		}
		slices.Sort(all)
		slices.Sort(offered)
		if len(all) < 9 || !slices.Equal(offered, all) {
			t.Errorf("role %s is offered %v, want every tool of %s: %v", tc.role, offered, tc.group, all)
		}
		i := slices.IndexFunc(groups, func(g host.GroupInfo) bool { return g.ID == tc.group })
		if i < 0 {
			t.Fatalf("/api/groups has no %s: %+v", tc.group, groups)
		}
		if g := groups[i]; g.ToolCount != len(offered) || len(g.Skipped) > 0 {
			t.Errorf("/api/groups: %s's toolCount %d, skipped %+v; role %s is offered %d", tc.group, g.ToolCount, g.Skipped, tc.role, len(offered))
		}
		confined(t, h, tc.group, tc.visible, h.Store().Dir())
	}

	// The tools answer, through the prefix and from the sandbox.
	call := func(role, tool string, args map[string]any) string {
		t.Helper()
		raw, _ := json.Marshal(args)
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: raw, Context: toolhost.CallContext{Role: role}})
		if err != nil || !res.OK {
			t.Fatalf("%s: %+v, %v", tool, res, err)
		}
		return res.Stdout
	}
	call("files", "filesystem_write_file", map[string]any{"path": filepath.Join(root, "a.txt"), "content": "from the sandbox"})
	if got := call("files", "filesystem_read_file", map[string]any{"path": filepath.Join(root, "a.txt")}); !strings.Contains(got, "from the sandbox") {
		t.Errorf("filesystem_read_file: %q", got)
	}
	if got := call("memories", "read_graph", map[string]any{}); !strings.Contains(got, "entities") {
		t.Errorf("read_graph: %q", got)
	}

	// The memory server's resource reaches the role's MCP clients: listed,
	// and read through /mcp/memories.
	bearer := &http.Client{Transport: bearerTransport{token: cfg.Auth.Token}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "import-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/memories", HTTPClient: bearer, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	listed, err := cs.ListResources(ctx, nil)
	if err != nil || !slices.ContainsFunc(listed.Resources, func(r *mcp.Resource) bool { return r.URI == "memory://knowledge-graph" }) {
		t.Fatalf("/mcp/memories lists %+v, %v: want memory://knowledge-graph", listed, err)
	}
	graph, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memory://knowledge-graph"})
	if err != nil || len(graph.Contents) != 1 || !strings.Contains(graph.Contents[0].Text, "entities") {
		t.Errorf("read memory://knowledge-graph: %+v, %v", graph, err)
	}
}

// bearerTransport sends its token with every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// confined checks that the process of the group's server runs under
// bubblewrap: its node process in other mount and user namespaces than
// the test's, seeing visible and not hidden.
func confined(t *testing.T, h *host.Host, group, visible, hidden string) {
	t.Helper()
	i := slices.IndexFunc(h.Modules().List(), func(p host.PluginStatus) bool { return p.Name == group })
	pid := h.Modules().List()[i].Pid
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || filepath.Base(exe) != "bwrap" {
		t.Fatalf("%s: its process runs %q (%v), not bubblewrap", group, exe, err)
	}
	node := 0
	for todo := []int{pid}; len(todo) > 0 && node == 0; {
		p := todo[0]
		todo = todo[1:]
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); filepath.Base(exe) == "node" {
			node = p
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				n, _ := strconv.Atoi(c)
				todo = append(todo, n)
			}
		}
	}
	if node == 0 {
		t.Fatalf("%s: no node process below bubblewrap (pid %d)", group, pid)
	}
	for _, ns := range []string{"mnt", "user", "pid"} {
		mine, _ := os.Readlink("/proc/self/ns/" + ns)
		its, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", node, ns))
		if err != nil || its == mine {
			t.Errorf("%s: node (pid %d) in %s namespace %q (%v), the test's own", group, node, ns, its, err)
		}
	}
	seen := func(p string) bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d/root%s", node, p))
		return err == nil
	}
	if !seen(visible) || seen(hidden) {
		t.Errorf("%s: the server sees %s: %v, %s: %v", group, visible, seen(visible), hidden, seen(hidden))
	}
}

// getJSON decodes the answer to a GET of url with the token.
func getJSON(t *testing.T, url, token string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
}
