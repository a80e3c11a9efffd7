package main

import (
	"os/exec"
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

// TestNoWarningForTheConfigsChoices: on the default config, whose chrome
// block lifts the memory limit on purpose, the commands that start no
// module (roles, tokens, validate) write nothing on stderr, and those that
// start the modules (groups, tools, call) warn of no lifted limit and say
// no line twice.
func TestNoWarningForTheConfigsChoices(t *testing.T) {
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	b, err := exec.Command("go", "build", "-o", plugins+"/", "../../plugins/workspace", "../../plugins/command", "../../plugins/network", "../../plugins/chrome").CombinedOutput()
	if err != nil {
		t.Fatalf("build the modules: %v\n%s", err, b)
	}
	t.Setenv("TOOLHOST_DATA_DIR", filepath.Join(dir, "data"))
	t.Setenv("TOOLHOST_WORKSPACE", filepath.Join(dir, "workspace"))
	t.Setenv("TOOLHOST_PLUGIN_DIR", plugins)
	t.Setenv("TOOLHOST_LOG_LEVEL", "")
	cfg := filepath.Join("..", "..", "config.hcl")
	for _, args := range [][]string{{"roles", "list"}, {"roles", "show", "developer"}, {"tokens", "list"}, {"validate"}} {
		code, _, stderr := runCLI(append(slices.Clone(args), "-config", cfg)...)
		if code != 0 || stderr != "" {
			t.Errorf("toolhost %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, stderr)
		}
	}
	for _, args := range [][]string{{"groups"}, {"tools", "-role", "developer"}, {"call", "-role", "developer", "get_workspace_info", "{}"}} {
		code, _, stderr := runCLI(append(slices.Clone(args), "-config", cfg)...)
		if code != 0 || strings.Contains(stderr, "memory_mb") {
			t.Errorf("toolhost %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, stderr)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(stderr, "\n") {
			if _, msg, ok := strings.Cut(line, "] "); ok && seen[msg] { // past the log line's time
				t.Errorf("toolhost %s says %q twice; stderr:\n%s", strings.Join(args, " "), msg, stderr)
			} else if ok {
				seen[msg] = true
			}
		}
	}
}
