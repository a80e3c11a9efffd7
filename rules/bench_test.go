package rules

import (
	"context"
	"testing"
)

// BenchmarkMatch evaluates ten conditions that do not match on one call's
// variables, decoded once, as the host does for a role with ten rules.
func BenchmarkMatch(b *testing.B) {
	exprs := []string{
		"args.text.contains('sudo')", "args.text.startsWith('/etc')", "path.clean(args.text).startsWith('..')",
		"args.text.matches('^rm ')", "size(args.text) > 10000", "tool == 'x' && args.text == ''", "role == 'nobody'",
		"agent == 'nobody'", "args.text.endsWith('.key')", "args.text.contains('$(')",
	}
	var cs []*Condition
	for _, e := range exprs {
		c, err := Compile(e)
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, c)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		v, err := NewVars("echo", "g", "r", "a", []byte(`{"text":"hello world"}`))
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cs {
			if ok, err := c.Match(ctx, v); ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	}
}
