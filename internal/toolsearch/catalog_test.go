package toolsearch

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
)

var update = flag.Bool("update", false, "regenerate testdata/catalog.json from the real modules and npm MCP servers")

const catalogPath = "testdata/catalog.json"

// uncatalogued are the reserved groups left out of the catalog: tool_search
// (find_tools, load_tools), whose tools are always loaded, and code
// (run_script), which scripts the others.
var uncatalogued = []string{"tool_search", "code"}

// loadCatalog reads the committed catalog, each tool with its group's
// description.
func loadCatalog(t testing.TB) Catalog {
	t.Helper()
	c, err := LoadCatalog(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCatalog checks the committed catalog: about 65 tools, unique names,
// every tool's group listed, every group with tools, every input schema an
// object. With -update it first regenerates the file from the real
// modules (go build of cmd/toolhost and plugins/*, the npm servers from
// the test cache, where scripts/test installs them).
func TestCatalog(t *testing.T) {
	if *update {
		writeCatalog(t)
	}
	c := loadCatalog(t)
	if len(c.Tools) < 60 {
		t.Errorf("%d tools in the catalog, want about 65", len(c.Tools))
	}
	groups := map[string]int{}
	for _, g := range c.Groups {
		groups[g.ID] = 0
	}
	names := map[string]bool{}
	for _, d := range c.Tools {
		if names[d.Name] {
			t.Errorf("tool %s twice", d.Name)
		}
		names[d.Name] = true
		if _, ok := groups[d.Group]; !ok {
			t.Errorf("tool %s: group %q is not in the catalog's groups", d.Name, d.Group)
		}
		groups[d.Group]++
		var schema struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(d.InputSchema, &schema); err != nil || schema.Type != "object" {
			t.Errorf("tool %s: input schema %s is not an object schema (%v)", d.Name, d.InputSchema, err)
		}
	}
	for id, n := range groups {
		if n == 0 {
			t.Errorf("group %s has no tools", id)
		}
	}
	for _, want := range []string{"workspace", "command", "network", "chrome", "fs", "memory", "everything"} {
		if groups[want] == 0 {
			t.Errorf("no tools of group %s", want)
		}
	}
}

// writeCatalog regenerates testdata/catalog.json: it builds toolhost and
// the first-party plugins into a temporary directory, writes a config that
// loads them beside the npm MCP servers, and asks `toolhost groups -json`
// and `toolhost tools -json` (the tools of a caller without a role: every
// tool) for the definitions.
func writeCatalog(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	build := func(out, pkg string) {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	build(filepath.Join(bin, "toolhost"), "./cmd/toolhost")
	for _, p := range []string{"workspace", "command", "network", "chrome"} {
		build(filepath.Join(bin, "plugins", p), "./plugins/"+p)
	}
	fsRoot := filepath.Join(dir, "files")
	if err := os.Mkdir(fsRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	// The memory server's file in a directory of its own: the directory of
	// its file is writable by it, and must not hold the config or binaries.
	memDir := filepath.Join(dir, "memory")
	if err := os.Mkdir(memDir, 0o755); err != nil {
		t.Fatal(err)
	}
	servers, err := mcptest.ReferenceServers(fsRoot, filepath.Join(memDir, "memory.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`
plugin_dir = %q
data_dir   = %q
builtin "workspace" {
  config {}
}
builtin "command" {
  config {}
}
builtin "network" {
  config {}
}
plugin "chrome" {
  path    = "chrome"
  sandbox = "off"
}
%s`, filepath.Join(bin, "plugins"), filepath.Join(dir, "data"), servers)
	cfgPath := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	toolhost := func(args ...string) []byte {
		cmd := exec.Command(filepath.Join(bin, "toolhost"), append(args, "-config", cfgPath)...)
		cmd.Dir = dir
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "TOOLHOST_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("toolhost %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}

	var groups []struct {
		ID          string   `json:"id"`
		Description string   `json:"description"`
		Tools       []string `json:"tools"`
		Source      struct {
			Kind  string `json:"kind"`
			State string `json:"state"`
		} `json:"source"`
	}
	if err := json.Unmarshal(toolhost("groups", "-json"), &groups); err != nil {
		t.Fatalf("toolhost groups -json: %v", err)
	}
	var tools struct {
		Tools []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		Meta map[string]struct {
			Group       string          `json:"group"`
			Title       string          `json:"title"`
			Annotations json.RawMessage `json:"annotations"`
		} `json:"meta"`
		AllTools int `json:"allTools"`
	}
	if err := json.Unmarshal(toolhost("tools", "-json"), &tools); err != nil {
		t.Fatalf("toolhost tools -json: %v", err)
	}
	// Every tool but those of the uncatalogued groups (tool_search, never
	// deferred and never searched; code, only a role's that names it).
	listed := map[string]bool{}
	for _, tool := range tools.Tools {
		listed[tool.Function.Name] = true
	}
	var unlisted []string
	for _, g := range groups {
		for _, name := range g.Tools {
			if !listed[name] && !slices.Contains(uncatalogued, g.ID) {
				unlisted = append(unlisted, name)
			}
		}
	}
	if len(unlisted) > 0 {
		t.Fatalf("toolhost tools -json left out %v (%d of %d tools listed)", unlisted, len(tools.Tools), tools.AllTools)
	}

	c := Catalog{About: "Generated by `go generate ./internal/toolsearch` (go test -run '^TestCatalog$' -update): " +
		"toolhost tools -json and toolhost groups -json with the builtin modules workspace, command and network, " +
		"the chrome plugin, the runtime's groups but tool_search and code, and the npm MCP servers filesystem (mcp_server \"fs\", tool_prefix \"fs_\"), " +
		"memory and everything. Do not edit by hand."}
	for _, g := range groups {
		if slices.Contains(uncatalogued, g.ID) {
			continue
		}
		if g.Source.State != "running" {
			t.Fatalf("group %s is %s", g.ID, g.Source.State)
		}
		c.Groups = append(c.Groups, CatalogGroup{ID: g.ID, Description: g.Description, Source: g.Source.Kind})
	}
	for _, tool := range tools.Tools {
		f := tool.Function
		if slices.Contains(uncatalogued, tools.Meta[f.Name].Group) {
			continue
		}
		m := tools.Meta[f.Name]
		c.Tools = append(c.Tools, Doc{Name: f.Name, Title: m.Title, Group: m.Group, Description: f.Description, InputSchema: f.Parameters, Annotations: m.Annotations})
	}
	slices.SortFunc(c.Groups, func(a, b CatalogGroup) int { return strings.Compare(a.ID, b.ID) })
	slices.SortStableFunc(c.Tools, func(a, b Doc) int { return strings.Compare(a.Group, b.Group) })
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	out := buf.Bytes()
	if bytes.Contains(out, []byte(dir)) {
		t.Fatalf("the catalog mentions the temporary directory %s: it would differ at every run", dir)
	}
	if err := os.WriteFile(catalogPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d groups, %d tools", catalogPath, len(c.Groups), len(c.Tools))
}
