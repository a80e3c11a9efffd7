package rules_test

import (
	"context"
	"fmt"

	"github.com/toolhost/toolhost/rules"
)

// A role's rules, checked once and then evaluated in order for each call:
// the first rule whose tools and condition match decides.
func ExampleCheck() {
	compiled, err := rules.Check([]rules.Rule{
		{Name: "no-force-push", Tools: []string{"run_command"}, When: `args.command.contains("push --force")`,
			Action: rules.Deny, Reason: "history is shared"},
		{Name: "outside-src", Tools: []string{"group:workspace"}, When: `!path.clean(args.path).startsWith("src/")`,
			Action: rules.Approve, Reason: "a write outside src/"},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	decide := func(tool, group string, args map[string]any) string {
		vars := rules.VarsOf(tool, group, "dev", "agent-1", args)
		for _, r := range compiled {
			if !rules.Applies(r.Tools, tool, group) {
				continue
			}
			if ok, err := r.Cond.Match(context.Background(), vars); err != nil {
				return "error: " + err.Error()
			} else if ok {
				return fmt.Sprintf("%s by %s (%s)", r.Action, r.Name, r.Reason)
			}
		}
		return "no rule"
	}
	fmt.Println(decide("run_command", "command", map[string]any{"command": "git push --force origin main"}))
	fmt.Println(decide("run_command", "command", map[string]any{"command": "git status"}))
	fmt.Println(decide("write_file", "workspace", map[string]any{"path": "src/../.git/config"}))
	fmt.Println(decide("write_file", "workspace", map[string]any{"path": "src/main.go"}))
	// Output:
	// deny by no-force-push (history is shared)
	// no rule
	// approve by outside-src (a write outside src/)
	// no rule
}

// A condition compiled alone and matched against calls. url.host parses
// the URL as a client would, so a rule compares the host, not the text.
func ExampleCompile() {
	cond, err := rules.Compile(`url.host(args.url) == "example.com"`)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, u := range []string{"https://EXAMPLE.com/a", "https://example.com.evil.test/", "https://example.com@evil.test/"} {
		ok, err := cond.Match(context.Background(), rules.VarsOf("fetch", "network", "dev", "agent-1", map[string]any{"url": u}))
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(u, ok)
	}

	_, err = rules.Compile(`argz.url == ""`)
	fmt.Println(err)
	// Output:
	// https://EXAMPLE.com/a true
	// https://example.com.evil.test/ false
	// https://example.com@evil.test/ false
	// line 1, column 1 of the expression: undeclared reference to 'argz' (did you mean 'args'?)
}
