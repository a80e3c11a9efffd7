package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/hosttest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/internal/protocol"
)

// TestFirstPartyToolsHaveTitles: every tool of the first-party modules
// (each directory of plugins/ and examples/ with a main.go) and of the
// runtime's groups has a title, as MCP clients show it. The modules are
// found on disk and the tools listed from the host a user gets (toolhost's
// own startHost: a config loading every module, builtin blocks for the
// reserved ids and plugin blocks for the others, and the runtime's groups),
// so a new module, group or tool is checked without naming it here.
//
// Titles are in sentence case ("Read file", "Run JavaScript"): a capital
// first letter, later words lower-case unless they are acronyms or names
// with a capital inside (HTTP, URL, JavaScript), no final full stop, and
// no two tools share one.
func TestFirstPartyToolsHaveTitles(t *testing.T) {
	var modules []string // paths relative to the repository's root
	for _, dir := range []string{"plugins", "examples"} {
		mains, err := filepath.Glob(filepath.Join("..", "..", dir, "*", "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mains {
			modules = append(modules, dir+"/"+filepath.Base(filepath.Dir(m)))
		}
	}
	if len(modules) < 5 { // workspace, command, network, chrome, notes
		t.Fatalf("found only the modules %v below plugins/ and examples/", modules)
	}

	dir := t.TempDir()
	pluginDir := filepath.Join(dir, "plugins")
	args := []string{"build", "-o", pluginDir + string(filepath.Separator)}
	for _, m := range modules {
		args = append(args, "./"+m)
	}
	build := exec.Command("go", args...)
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	// The sandboxes are off: what is checked is what the modules describe,
	// not how they are confined.
	var blocks strings.Builder
	names := make([]string, len(modules))
	for i, m := range modules {
		names[i] = filepath.Base(m)
		kind := "plugin"
		if protocol.IsReserved(names[i]) {
			kind = "builtin"
		}
		fmt.Fprintf(&blocks, "%s %q {\n  path    = %q\n  sandbox = \"off\"\n}\n", kind, names[i], names[i])
	}
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("workspace  = %q\nplugin_dir = %q\ndata_dir   = %q\n%s", ws, pluginDir, filepath.Join(dir, "data"), blocks.String())
	cfgPath := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(cfgPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}

	var stderr bytes.Buffer
	c := &common{config: cfgPath, logLevel: "warn", console: &bytes.Buffer{}}
	s, ok := c.startHost(context.Background(), &stderr, recordAgents, "")
	if !ok {
		t.Fatalf("the host did not start:\n%s\nconfig:\n%s", stderr.Bytes(), src)
	}
	t.Cleanup(func() { _ = s.Close() })
	h := s.h

	// Every module must be serving its groups: one that is not would have
	// its tools go unchecked.
	if down := hosttest.AwaitRunning(h, proctest.Patience); len(down) > 0 {
		t.Fatalf("modules not running: %v\n%s", down, stderr.Bytes())
	}
	groups := h.Modules().Groups()
	sources := map[string]bool{}
	runtimeGroups := 0
	for _, g := range groups {
		sources[g.Source.Name] = true
		if g.Source.Kind == host.SourceRuntime {
			runtimeGroups++
		}
	}
	for _, name := range names {
		if !sources[name] {
			t.Errorf("module %s registered no group", name)
		}
	}
	if runtimeGroups == 0 {
		t.Errorf("no runtime group is registered")
	}

	titled := map[string]string{} // title → the tool that has it
	tools := 0
	for _, info := range groups {
		g, ok := h.Modules().Group(info.ID)
		if !ok {
			t.Fatalf("group %s is listed but not registered", info.ID)
		}
		for _, tool := range g.Spec.Tools {
			tools++
			where := fmt.Sprintf("%s (group %s, %s %s)", tool.Name, info.ID, info.Source.Kind, info.Source.Name)
			if tool.Title == "" {
				t.Errorf("%s has no title: give it sdk.Title(\"…\")", where)
				continue
			}
			if problem := titleStyle(tool.Title); problem != "" {
				t.Errorf("%s: title %q %s", where, tool.Title, problem)
			}
			if other, dup := titled[tool.Title]; dup {
				t.Errorf("%s: title %q is also %s's", where, tool.Title, other)
			}
			titled[tool.Title] = tool.Name
		}
	}
	t.Logf("%d tools of %d groups (%d of the runtime) from the modules %v", tools, len(groups), runtimeGroups, modules)
}

// titleStyle says what is wrong with a title in sentence case, or "".
func titleStyle(title string) string {
	if title != strings.TrimSpace(title) || strings.Contains(title, "  ") {
		return "has stray spaces"
	}
	if strings.HasSuffix(title, ".") {
		return "ends with a full stop"
	}
	if r, _ := utf8.DecodeRuneInString(title); !unicode.IsUpper(r) {
		return "does not start with a capital letter"
	}
	for _, w := range strings.Fields(title)[1:] {
		r, size := utf8.DecodeRuneInString(w)
		if unicode.IsUpper(r) && !slices.ContainsFunc([]rune(w[size:]), unicode.IsUpper) {
			return fmt.Sprintf("is not in sentence case: %q should be lower-case (an acronym or a name such as JavaScript may keep its capitals)", w)
		}
	}
	return ""
}
