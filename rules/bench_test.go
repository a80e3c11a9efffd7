package rules

import (
	"context"
	"encoding/json"
	"testing"
)

// BenchmarkMatch evaluates ten conditions that do not match on one call's
// variables, made of its arguments as the host's validation decoded them,
// as the host does for a role with ten rules: chained (as the host does:
// directly, see direct), one by one, and by CEL alone (the chain's one
// program, which the host runs where the direct evaluation is not sure).
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
	var args map[string]any
	if err := json.Unmarshal([]byte(`{"text":"hello world"}`), &args); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("chained", func(b *testing.B) {
		ch := NewChain(cs)
		b.ReportAllocs()
		for b.Loop() {
			if i, err := ch.First(ctx, VarsOf("echo", "g", "r", "a", args)); i != -1 || err != nil {
				b.Fatal(i, err)
			}
		}
	})
	b.Run("cel", func(b *testing.B) {
		ch := NewChain(cs)
		b.ReportAllocs()
		for b.Loop() {
			if out, _, err := ch.prg.Eval(VarsOf("echo", "g", "r", "a", args)); err != nil || out.Value() != int64(-1) {
				b.Fatal(out, err)
			}
		}
	})
	b.Run("each", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v := VarsOf("echo", "g", "r", "a", args)
			for _, c := range cs {
				if ok, err := c.Match(ctx, v); ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		}
	})
}
