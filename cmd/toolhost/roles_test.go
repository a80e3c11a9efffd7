package main

import (
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
		rt   host.RoleTools
		want []string
	}{
		{"eager role", host.RoleTools{Role: "dev", Tools: defs(12), Tokens: 1283, EagerTokens: 1283, AllTokens: 3051, AllTools: 30}, []string{
			"tokens (o200k_base):",
			"  all tools   3051  30 tools",
			`  role "dev"  1283  12 tools  57% below all tools`,
		}},
		{"deferred groups", host.RoleTools{Role: "dev", Tools: defs(12), Deferred: []string{"a", "b", "c", "d", "e", "f", "g"}, Tokens: 1283, EagerTokens: 458, AllTokens: 3051, AllTools: 30}, []string{
			"tokens (o200k_base):",
			"  all tools   3051  30 tools",
			`  role "dev"  1283  12 tools  57% below all tools`,
			"  at start    458   5 tools   84% below all tools; 7 tools of deferred groups load on demand",
		}},
		{"no role", host.RoleTools{Tools: defs(3), Tokens: 90, EagerTokens: 90, AllTokens: 90, AllTools: 3}, []string{
			"tokens (o200k_base):",
			"  all tools  90  3 tools",
			"  no role    90  3 tools  0% below all tools",
		}},
		{"no tools at all", host.RoleTools{Role: "empty"}, []string{
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
