package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/rules"
	"pgregory.net/rapid"
)

// TestRuleSpellingAttacks: a rule is a policy on the arguments as written.
// Each row is an argument spelled to slip past a rule, and whether the
// rule holds (refuses it, policy) or not (the call runs: the echo tool
// stands in for the command or file tool). Substring and prefix rules on
// raw text do not hold against shell quoting, case or "..": the rows that
// say so are the documented limits (docs/security.md), not bugs. The
// sound forms hold: a command allowed only in a plain alphabet and
// refused when a word is sudo, and a path compared after path.clean.
func TestRuleSpellingAttacks(t *testing.T) {
	const (
		naive    = "args.text.contains('sudo')"
		plain    = `!args.text.matches('^[A-Za-z0-9 ._/=:-]*$') || args.text.matches('(^|[^A-Za-z0-9_])(?i:sudo)([^A-Za-z0-9_]|$)')`
		rawSrc   = "!args.text.startsWith('src/')"
		cleanSrc = "!path.clean(args.text).startsWith('src/')"
	)
	tests := []struct {
		attack, when, text string
		holds              bool
	}{
		{"sudo as written", naive, "sudo rm -rf /", true},
		{"sudo through $(printf su)do", naive, "$(printf su)do rm -rf /", false},
		{"sudo through s\\udo", naive, `s\udo rm -rf /`, false},
		{"sudo upper case", naive, "SUDO rm -rf /", false},
		{"sudo after extra spaces", naive, "   sudo   rm", true},
		{"sudo by full path", naive, "/usr/bin/sudo rm", true},
		{"plain alphabet: sudo as written", plain, "sudo rm -rf /", true},
		{"plain alphabet: $(printf su)do", plain, "$(printf su)do rm -rf /", true},
		{"plain alphabet: s\\udo", plain, `s\udo rm -rf /`, true},
		{"plain alphabet: SUDO", plain, "SUDO rm -rf /", true},
		{"plain alphabet: extra spaces", plain, "   sudo   rm", true},
		{"plain alphabet: full path", plain, "/usr/bin/sudo rm", true},
		{"plain alphabet: quotes", plain, "su''do rm", true},
		{"plain alphabet: a harmless command runs", plain, "ls -la src/", false},
		{"raw prefix: src/../etc/passwd", rawSrc, "src/../etc/passwd", false},
		{"raw prefix: ./src/a", rawSrc, "./src/a", true}, // refused though inside: raw text is neither sound nor complete
		{"raw prefix: src//../../etc", rawSrc, "src//../../etc", false},
		{"raw prefix: src/a runs", rawSrc, "src/a", false},
		{"raw prefix: src/a/../b runs", rawSrc, "src/a/../b", false},
		{"raw prefix: /src/a", rawSrc, "/src/a", true},
		{"cleaned: src/a runs", cleanSrc, "src/a", false},
		{"cleaned: src/../etc/passwd", cleanSrc, "src/../etc/passwd", true},
		{"cleaned: src//../../etc", cleanSrc, "src//../../etc", true},
		{"cleaned: /src/a (absolute)", cleanSrc, "/src/a", true},
		{"cleaned: ./src/a runs", cleanSrc, "./src/a", false},
		{"cleaned: src/a/../b runs", cleanSrc, "src/a/../b", false},
	}
	var rs []rules.Rule
	for i, tt := range tests {
		if !slices.ContainsFunc(rs, func(r rules.Rule) bool { return r.When == tt.when }) {
			rs = append(rs, rules.Rule{Name: fmt.Sprintf("r%d", i), Tools: []string{"echo"}, When: tt.when, Action: rules.Deny, Reason: "refused"})
		}
	}
	ctx := context.Background()
	for _, r := range rs {
		h := rulesHost(t, r)
		for _, tt := range tests {
			if tt.when != r.When {
				continue
			}
			t.Run(tt.attack, func(t *testing.T) {
				args, _ := json.Marshal(map[string]string{"text": tt.text})
				res, err := roleCall(h, ctx, "echo", string(args))
				switch {
				case tt.holds && !errors.Is(err, toolhost.ErrPolicy):
					t.Fatalf("%q against %s: %+v, %v; want policy", tt.text, tt.when, res, err)
				case !tt.holds && (err != nil || res.Stdout != tt.text):
					t.Fatalf("%q against %s: %+v, %v; want it to run (the rule does not hold)", tt.text, tt.when, res, err)
				}
			})
		}
	}
}

// TestRuleCostAttacks: a hostile condition, or hostile arguments, cannot
// exhaust the host: evaluation stops at the cost bound and the call is
// refused (policy, fail closed), and the host goes on serving calls. Each
// row would, unbounded, build gigabytes or run for minutes.
func TestRuleCostAttacks(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("a", 1<<20)
	ten := "[0,1,2,3,4,5,6,7,8,9]"
	tests := []struct {
		attack, when, text string
		refusedAtSave      bool // the environment lacks what the attack needs
	}{
		{"string doubling in nested comprehensions", fmt.Sprintf("%s.map(a, %s.map(b, %s.map(c, %s.map(d, args.text + args.text)))).size() > 0", ten, ten, ten, ten), big, false},
		{"six nested comprehensions", fmt.Sprintf("%s.map(a, %s.map(b, %s.map(c, %s.map(d, %s.map(e, %s.map(f, 1)))))).size() > 0", ten, ten, ten, ten, ten, ten), "x", false},
		{"a regular expression over a huge argument, repeated", fmt.Sprintf("%s.map(a, %s.map(b, %s.map(c, args.text.matches('(a|aa)*c')))).size() > 0", ten, ten, ten), big, false},
		{"string repetition by replace", "args.text.replace('a', args.text).size() > 0", big, true},
		{"concatenation without a loop", strings.Repeat("args.text + ", 40) + "args.text != ''", big, false},
		{"a hundred passes over a huge argument without a loop", strings.Repeat("args.text.contains('b') || ", 100) + "false", big, false},
		{"a comprehension over a huge argument split", "args.text.split('').exists(c, c == 'b')", big, true},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.attack, func(t *testing.T) {
			if _, err := rules.Compile(tt.when); tt.refusedAtSave || err != nil {
				if !tt.refusedAtSave || err == nil || !strings.Contains(err.Error(), "undeclared reference") {
					t.Fatalf("compile: %v; refused at save: %v", err, tt.refusedAtSave)
				}
				return
			}
			h := rulesHost(t, rules.Rule{Name: "hostile", Tools: []string{"echo"}, When: tt.when, Action: rules.Deny})
			args, _ := json.Marshal(map[string]string{"text": tt.text})
			_, err := roleCall(h, ctx, "echo", string(args))
			if !errors.Is(err, toolhost.ErrPolicy) || !strings.Contains(err.Error(), "could not be evaluated") || !strings.Contains(err.Error(), "cost limit") {
				t.Fatalf("%v; want policy: cost limit", err)
			}
			if res, err := roleCall(h, ctx, "log", `{"text":"still here"}`); err != nil || !res.OK {
				t.Fatalf("after the attack: %+v, %v", res, err)
			}
		})
	}
}

// TestRulesListingEqualsCalling: with random rules, a tool is listed
// exactly when some arguments may call it. Each conditional rule tests a
// letter of its own (so conditions are independent, as listing assumes),
// and the arguments tried are every set of those letters.
func TestRulesListingEqualsCalling(t *testing.T) {
	h := rulesHost(t)
	ctx := context.Background()
	tools := []string{"echo", "log"} // both take a text

	rapid.Check(t, func(rt *rapid.T) {
		rs := genRules(rt, tools)
		if _, err := h.Roles().Update(ctx, "dev", RoleUpdate{Rules: &rs}); err != nil {
			rt.Fatal(err)
		}
		defs, err := roleTools(h, "dev")
		if err != nil {
			rt.Fatal(err)
		}
		for _, tool := range tools {
			listed := slices.ContainsFunc(defs.Tools, func(d ToolDefinition) bool { return d.Function.Name == tool })
			callable := false
			for _, text := range letterSets(len(rs)) {
				args := `{"text":"` + text + `"}`
				_, err := roleCall(h, ctx, tool, args)
				if err == nil {
					callable = true
					break
				}
				if !errors.Is(err, toolhost.ErrPolicy) {
					rt.Fatalf("%s(%s): %v", tool, args, err)
				}
			}
			if listed != callable {
				rt.Fatalf("%s: listed %v, callable for some arguments %v; rules %+v", tool, listed, callable, rs)
			}
		}
	})
}

// genRules draws up to 5 rules over the tools; rule i's condition, when
// it has one, tests the letter 'a'+i of args.text.
func genRules(rt *rapid.T, tools []string) []rules.Rule {
	n := rapid.IntRange(0, 5).Draw(rt, "rules")
	rs := make([]rules.Rule, n)
	for i := range rs {
		letter := string(rune('a' + i))
		conds := []string{"", "true", "false", "args.text.contains('" + letter + "')", "!args.text.contains('" + letter + "')"}
		var ts []string
		for _, tool := range tools {
			if rapid.Bool().Draw(rt, fmt.Sprintf("rule %d names %s", i, tool)) {
				ts = append(ts, tool)
			}
		}
		if rapid.Bool().Draw(rt, fmt.Sprintf("rule %d names the group", i)) {
			ts = []string{"group:testgroup"}
		}
		rs[i] = rules.Rule{Name: fmt.Sprintf("r%d", i), Tools: ts, When: rapid.SampledFrom(conds).Draw(rt, fmt.Sprintf("rule %d when", i)),
			Action: rapid.SampledFrom([]rules.Action{rules.Deny, rules.Allow, rules.Approve}).Draw(rt, fmt.Sprintf("rule %d action", i))}
	}
	return rs
}

// letterSets is every string of distinct letters among the first n.
func letterSets(n int) []string {
	var out []string
	for mask := 0; mask < 1<<n; mask++ {
		var b strings.Builder
		for i := range n {
			if mask&(1<<i) != 0 {
				b.WriteRune(rune('a' + i))
			}
		}
		out = append(out, b.String())
	}
	return out
}
