package rules

import (
	"fmt"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
	"pgregory.net/rapid"
)

// exprGen draws a CEL expression of type ty ('b'ool, 's'tring,
// 'n'umber or 'd'yn) of at most depth levels over args (keys a, b and c,
// a nested map's keys too), the call's strings, literals of every kind
// direct evaluation handles, and its operators and functions. A dyn
// stands for any type, so that most expressions drawn pass CEL's checker.
func exprGen(ty byte, depth int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		leaves := map[byte][]string{
			'd': {"args.a", "args.b", "args.c", "args['a']", "args.a.a", "args.b.c"},
			's': {"tool", "role", "agent", "group", "'a'", "''", "'ab'", "'../x'", "'a/./b'"},
			'n': {"1", "0", "-1", "9007199254740993", "2.5", "1.0", "1e300"},
			'b': {"true", "false", "null == args.a"},
		}
		if depth == 0 || rapid.IntRange(0, 3).Draw(t, "leaf") == 0 {
			if ty != 'd' && rapid.Bool().Draw(t, "dyn") {
				ty = 'd'
			}
			return rapid.SampledFrom(leaves[ty]).Draw(t, "leaf")
		}
		sub := func(ty byte) string { return exprGen(ty, depth-1).Draw(t, string(ty)) }
		any := func() string { return sub(rapid.SampledFrom([]byte("bsnd")).Draw(t, "type")) }
		switch ty {
		case 'd':
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				return fmt.Sprintf("args[%s]", sub('s'))
			case 1:
				return fmt.Sprintf("(%s).a", sub('d'))
			}
			return fmt.Sprintf("(%s) ? (%s) : (%s)", sub('b'), any(), any())
		case 's':
			return fmt.Sprintf("%s(%s)", rapid.SampledFrom([]string{"path.clean", "url.host"}).Draw(t, "f"), sub('s'))
		case 'n':
			if rapid.Bool().Draw(t, "member") {
				return fmt.Sprintf("(%s).size()", sub('s'))
			}
			return fmt.Sprintf("size(%s)", sub('d'))
		}
		switch rapid.IntRange(0, 8).Draw(t, "op") {
		case 0:
			return fmt.Sprintf("has((%s).%s)", sub('d'), rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "key"))
		case 1:
			return fmt.Sprintf("(%s).%s(%s)", sub('s'), rapid.SampledFrom([]string{"contains", "startsWith", "endsWith"}).Draw(t, "f"), sub('s'))
		case 2:
			return fmt.Sprintf("(%s).matches(%s)", sub('s'), rapid.SampledFrom([]string{"'^a'", "'b$'", "'[.]'", "''"}).Draw(t, "re"))
		case 3, 4:
			ty := rapid.SampledFrom([]byte("bsnd")).Draw(t, "operands")
			return fmt.Sprintf("(%s) %s (%s)", sub(ty), rapid.SampledFrom([]string{"==", "!=", "<", "<=", ">", ">="}).Draw(t, "cmp"), sub(ty))
		case 5:
			return fmt.Sprintf("!(%s)", sub('b'))
		case 6:
			return fmt.Sprintf("(%s) && (%s)", sub('b'), sub('b'))
		case 7:
			return fmt.Sprintf("(%s) || (%s)", sub('b'), sub('b'))
		}
		return fmt.Sprintf("(%s) ? (%s) : (%s)", sub('b'), sub('b'), sub('b'))
	})
}

// valueGen draws an argument's value: strings, numbers (some past what a
// float64 holds exactly of an int), bools, null, lists and maps.
func valueGen(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		scalars := []any{"a", "ab", "", "../x", "a/./b", "https://A.example:8/x", "ünï", "sudo rm",
			0.0, 1.0, -1.0, 2.5, 9007199254740992.0, 1e300, true, false, nil}
		if depth == 0 {
			return rapid.SampledFrom(scalars).Draw(t, "scalar")
		}
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 0:
			return rapid.SliceOfN(valueGen(depth-1), 0, 3).Draw(t, "list")
		case 1:
			return argsGen(depth-1).Draw(t, "map")
		}
		return rapid.SampledFrom(scalars).Draw(t, "scalar")
	})
}

// argsGen draws a map over some of the keys a, b and c.
func argsGen(depth int) *rapid.Generator[map[string]any] {
	return rapid.Custom(func(t *rapid.T) map[string]any {
		m := map[string]any{}
		for _, k := range []string{"a", "b", "c"} {
			if rapid.Bool().Draw(t, "has "+k) {
				m[k] = valueGen(depth).Draw(t, k)
			}
		}
		return m
	})
}

// TestDirectAgreesWithCEL is the property that direct evaluation, where
// it is sure, gives what CEL gives: the same value, and never a value
// where CEL fails. It must be sure of a good part of the cases, or the
// property says little.
func TestDirectAgreesWithCEL(t *testing.T) {
	var runs, lowered, sure, celOK int
	var unsure []string
	rapid.Check(t, func(t *rapid.T) {
		expr := exprGen(rapid.SampledFrom([]byte("bd")).Draw(t, "type"), 4).Draw(t, "expr")
		runs++
		c, err := Compile(expr)
		if err != nil || c.direct == nil {
			return // the checker refused it, or it has a part direct does not handle
		}
		lowered++
		for i := range 10 { // each expression on ten calls
			v := VarsOf(rapid.SampledFrom([]string{"t", "a"}).Draw(t, "tool"), "g", "a", "", argsGen(2).Draw(t, fmt.Sprint("args ", i)))
			got, ok := c.direct(v)
			out, _, err := c.prg.Eval(v)
			if err == nil {
				celOK++
			}
			if !ok {
				if err == nil && len(unsure) < 10 {
					unsure = append(unsure, fmt.Sprintf("%s on %v: CEL gives %v", expr, v.raw, out))
				}
				continue
			}
			sure++
			if err != nil {
				t.Fatalf("%s on %v: direct gives %#v; CEL fails: %v", expr, v.raw, got, err)
			}
			want := out.Value()
			switch out := out.(type) {
			case types.Null:
				want = nil
			case types.Int:
				want = int64(out)
			}
			if k := kind(got); k != 'l' && k != 'm' { // the args, or a list or map in them: CEL's is made of its own values
				if g, w := fmt.Sprintf("%T %v", native(got), native(got)), fmt.Sprintf("%T %v", want, want); g != w {
					t.Fatalf("%s on %v: direct gives %s; CEL %s", expr, v.raw, g, w)
				}
			}
		}
	})
	t.Logf("%d expressions: %d lowered; of their 10 evaluations each, CEL gave a value in %d, and direct evaluation was sure in %d", runs, lowered, celOK, sure)
	if lowered < runs*3/4 || sure < celOK*9/10 {
		t.Fatalf("only %d of %d expressions lowered, and direct evaluation sure in %d of the %d evaluations where CEL gave a value: the property says little. Unsure, for example:\n%s", lowered, runs, sure, celOK, strings.Join(unsure, "\n"))
	}
}

// native is a value as CEL's Value gives a scalar: the call's strings
// are strings.
func native(x any) any {
	if s, ok := x.(*string); ok {
		return *s
	}
	return x
}

// TestDirectLowers: the conditions rules are written with have a direct
// evaluation, and those with what it does not handle, or that CEL
// evaluates within its cost bound, have none.
func TestDirectLowers(t *testing.T) {
	for expr, want := range map[string]bool{
		"args.command.contains('sudo')":                            true,
		"!path.clean(args.path).startsWith('src/')":                true,
		"has(args.url) && url.host(args.url) == 'example.com'":     true,
		"size(args) > 100 || args.n >= 2.5 || tool == 'x'":         true,
		"args.command.matches('^rm ')":                             true,
		"args['k'] == null ? role != 'r' : agent == ''":            true,
		"args.command.matches(args.re)":                            false,
		"args.list.exists(x, x == 'a')":                            false,
		"args.a + args.b == 'ab'":                                  false,
		"'a' in args.list":                                         false,
		"int(args.n) == 1":                                         false,
		"args.s == b'a'":                                           false,
		strings.Repeat("true && ", 10) + "args.s.endsWith('.key')": true,
		strings.Repeat("args.s.contains('a') || ", 40) + "true":    false, // past maxLinearCalls: CEL bounds its cost
	} {
		c, err := Compile(expr)
		if err != nil {
			t.Fatal(expr, err)
		}
		if got := c.direct != nil; got != want {
			t.Errorf("%s: lowered %v, want %v", expr, got, want)
		}
	}
}
