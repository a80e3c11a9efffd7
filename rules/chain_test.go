package rules

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// chainConds are conditions for the chain's property: ones that hold or
// not depending on the arguments, ones that fail (a missing key, a value
// not a bool, a URL without a host, the cost bound passed), the literal
// true and none (nil).
var chainConds = []string{
	"", "true", "args.s.contains('a')", "args.s.startsWith('b')", "size(args.s) > 2", "args.n > 3",
	"has(args.m) && args.m", "args.missing == 'x'", "args.s", "url.host(args.s) == 'a'", "tool == 't'",
	"args.n > 3 || args.missing", "args.missing || args.n > 3", "!(args.s.endsWith('a'))",
	"[1,2,3,4,5,6,7,8,9,10].all(i, [1,2,3,4,5,6,7,8,9,10].all(j, [1,2,3,4,5,6,7,8,9,10].all(k, size(args.big + args.big) > 0)))",
}

// TestChainFirst is the property that a chain's First gives what
// evaluating its conditions one by one gives: the first that holds, or the
// first that fails before one holds, with an error.
func TestChainFirst(t *testing.T) {
	big := strings.Repeat("x", 20_000)
	rapid.Check(t, func(t *rapid.T) {
		exprs := rapid.SliceOfN(rapid.SampledFrom(chainConds), 1, 8).Draw(t, "conds")
		conds := make([]*Condition, len(exprs))
		for i, e := range exprs {
			c, err := Compile(e)
			if err != nil {
				t.Fatal(e, err)
			}
			conds[i] = c
		}
		args := map[string]any{"big": big}
		if rapid.Bool().Draw(t, "has s") {
			args["s"] = rapid.SampledFrom([]string{"", "a", "ba", "bbb", "abc", "https://a/x"}).Draw(t, "s")
		}
		if rapid.Bool().Draw(t, "has n") {
			args["n"] = float64(rapid.IntRange(0, 6).Draw(t, "n"))
		}
		if rapid.Bool().Draw(t, "has m") {
			args["m"] = rapid.SampledFrom([]any{true, false, "yes"}).Draw(t, "m")
		}
		v := VarsOf(rapid.SampledFrom([]string{"t", "u"}).Draw(t, "tool"), "g", "r", "", args)
		ctx := context.Background()
		want, wantErr := -1, error(nil)
		for i, c := range conds {
			if ok, err := c.Match(ctx, v); ok || err != nil {
				want, wantErr = i, err
				break
			}
		}
		ch := NewChain(conds)
		if len(conds) > 1 && !conds[0].Always() && ch.prg == nil {
			t.Fatalf("%q: not chained", exprs)
		}
		got, err := ch.First(ctx, v)
		if got != want || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("%q on %v: First = %d, %v; one by one %d, %v", exprs, args, got, err, want, wantErr)
		}
	})
}

// TestChainBeyondTheParser: a chain too long for CEL's parser is
// evaluated one by one, with the same answer.
func TestChainBeyondTheParser(t *testing.T) {
	var conds []*Condition
	for i := range 300 {
		c, err := Compile(fmt.Sprintf("args.s == '%d'", i))
		if err != nil {
			t.Fatal(err)
		}
		conds = append(conds, c)
	}
	ch := NewChain(conds)
	if ch.prg != nil {
		t.Fatal("300 nested conditionals compiled; the test needs a chain that does not")
	}
	if i, err := ch.First(context.Background(), VarsOf("t", "g", "r", "", map[string]any{"s": "299"})); i != 299 || err != nil {
		t.Fatalf("First = %d, %v", i, err)
	}
}
