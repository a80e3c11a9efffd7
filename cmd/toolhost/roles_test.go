package main

import (
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/host"
)

// TestPrintTokens: tools -tokens prints all tools, the role's and, only
// when the role defers groups, what an agent starts with, each with the
// share it saves against all tools (rounded down, so never overstated).
func TestPrintTokens(t *testing.T) {
	defs := func(n int) []host.ToolDefinition { return make([]host.ToolDefinition, n) }
	cases := []struct {
		name string
		rt   host.ToolList
		want []string
	}{
		{"eager role", host.ToolList{Role: "dev", Tools: defs(12), Tokens: 1283, EagerTokens: 1283, AllTokens: 3051, AllTools: 30}, []string{
			"tokens (o200k_base):",
			"  all tools   3051  30 tools",
			`  role "dev"  1283  12 tools  57% below all tools`,
		}},
		{"deferred groups", host.ToolList{Role: "dev", Tools: defs(12), Deferred: []string{"a", "b", "c", "d", "e", "f", "g"}, Tokens: 1283, EagerTokens: 458, AllTokens: 3051, AllTools: 30}, []string{
			"tokens (o200k_base):",
			"  all tools   3051  30 tools",
			`  role "dev"  1283  12 tools  57% below all tools`,
			"  at start    458   5 tools   84% below all tools; 7 tools of deferred groups load on demand",
		}},
		{"no role", host.ToolList{Tools: defs(3), Tokens: 90, EagerTokens: 90, AllTokens: 90, AllTools: 3}, []string{
			"tokens (o200k_base):",
			"  all tools  90  3 tools",
			"  no role    90  3 tools  0% below all tools",
		}},
		{"no tools at all", host.ToolList{Role: "empty"}, []string{
			"tokens (o200k_base):",
			"  all tools     0  0 tools",
			`  role "empty"  0  0 tools`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			printTokens(&b, c.rt)
			got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			for i := range got {
				got[i] = strings.TrimRight(got[i], " ")
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestModuleWarningsWhereModulesStart: on the default config, whose chrome
// block lifts the memory limit, the commands that start no module (roles,
// tokens, validate) write nothing on stderr; groups, which starts them,
// still says how chrome's sandbox is loosened.
func TestModuleWarningsWhereModulesStart(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TOOLHOST_DATA_DIR", filepath.Join(dir, "data"))
	t.Setenv("TOOLHOST_WORKSPACE", filepath.Join(dir, "workspace"))
	t.Setenv("TOOLHOST_PLUGIN_DIR", filepath.Join(dir, "plugins")) // empty: groups reports the modules failed, after its warning
	t.Setenv("TOOLHOST_LOG_LEVEL", "")
	cfg := filepath.Join("..", "..", "config.hcl")
	for _, args := range [][]string{{"roles", "list"}, {"roles", "show"}, {"tokens", "list"}, {"validate"}} {
		var stdout, stderr strings.Builder
		argv := append(slices.Clone(args), "-config", cfg)
		if len(args) > 1 && args[1] == "show" {
			argv = append(argv, "developer")
		}
		if code := run(argv, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
			t.Errorf("toolhost %s: exit %d, stderr:\n%s", strings.Join(argv, " "), code, stderr.String())
		}
	}
	var stderr strings.Builder
	run([]string{"groups", "-config", cfg}, io.Discard, &stderr)
	if !strings.Contains(stderr.String(), "sandbox: no memory_mb limit: plugin=chrome") {
		t.Errorf("toolhost groups does not warn about chrome's sandbox; stderr:\n%s", stderr.String())
	}
}
