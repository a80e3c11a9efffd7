package rules

import (
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
)

// direct is a condition, or a part of one, evaluated straight on a call's
// variables and its arguments as JSON decoded them, without CEL's
// interpreter: a Go closure per node of the checked expression. It gives a
// value and true, or false where it is not sure of CEL's answer (an error
// in CEL, such as a missing key or a value of the wrong type, or a case it
// does not handle): the caller then asks CEL, whose answer, and error
// message, is the one that stands. A direct evaluation therefore decides
// a call only where it gives what CEL gives, which TestDirectAgreesWithCEL
// checks on generated conditions and arguments.
//
// CEL's evaluation reaches some tens of objects per condition; in a
// serving host, whose caches the call's RPC and store writes have just
// filled, ten rules cost about 10 µs a call (BenchmarkRules in package
// host). Evaluated directly they cost a few.
//
// Values are what encoding/json makes (string, float64, bool, nil,
// []any, map[string]any), int64 for CEL's ints, and *string for the
// call's tool, group, role and agent (a pointer into its Vars, which a
// value holds without an allocation).
type direct func(v *Vars) (any, bool)

// maxExact is the largest magnitude of an int64 that a float64 holds
// exactly: past it, comparing the two is left to CEL.
const maxExact = 1 << 53

// number returns a number as a float64, when it is one and is exact.
func number(x any) (float64, bool) {
	switch n := x.(type) {
	case float64:
		return n, !math.IsNaN(n)
	case int64:
		return float64(n), n >= -maxExact && n <= maxExact
	}
	return 0, false
}

// kind is a value's kind: 's'tring, 'b'ool, 'z' (null), 'n'umber, 'l'ist
// or 'm'ap; 0 for anything else.
func kind(x any) byte {
	switch x.(type) {
	case string, *string:
		return 's'
	case bool:
		return 'b'
	case nil:
		return 'z'
	case float64, int64:
		return 'n'
	case []any:
		return 'l'
	case map[string]any:
		return 'm'
	}
	return 0
}

// lowerDirect makes the direct evaluation of a checked expression, or
// returns nil when it uses what lowerDirect does not handle (loops, `+`
// and other arithmetic, conversions, other functions, uint and bytes
// literals, list and map literals): CEL alone then evaluates it. Only a
// linear condition is lowered, one CEL too evaluates without a cost bound
// (see linear), so that the two never differ by the bound.
func lowerDirect(e ast.Expr) direct {
	switch e.Kind() {
	case ast.LiteralKind:
		var x any
		switch l := e.AsLiteral().(type) {
		case types.String:
			x = string(l)
		case types.Bool:
			x = bool(l)
		case types.Int:
			x = int64(l)
		case types.Double:
			x = float64(l)
		case types.Null:
			x = nil
		default:
			return nil
		}
		return func(*Vars) (any, bool) { return x, true }
	case ast.IdentKind:
		switch e.AsIdent() {
		case "args":
			return func(v *Vars) (any, bool) { return v.raw, true }
		case "tool":
			return func(v *Vars) (any, bool) { return &v.tool, true }
		case "group":
			return func(v *Vars) (any, bool) { return &v.group, true }
		case "role":
			return func(v *Vars) (any, bool) { return &v.role, true }
		case "agent":
			return func(v *Vars) (any, bool) { return &v.agent, true }
		}
		return nil
	case ast.SelectKind:
		s := e.AsSelect()
		operand := lowerDirect(s.Operand())
		if operand == nil {
			return nil
		}
		field := s.FieldName()
		if s.IsTestOnly() { // has(x.field)
			return func(v *Vars) (any, bool) {
				m, ok := dict(operand(v))
				if !ok {
					return nil, false
				}
				_, has := m[field]
				return has, true
			}
		}
		return func(v *Vars) (any, bool) {
			m, ok := dict(operand(v))
			x, has := m[field]
			return x, ok && has
		}
	case ast.CallKind:
		return lowerCall(e.AsCall())
	}
	return nil
}

// lowerCall lowers the operators and functions it knows.
func lowerCall(c ast.CallExpr) direct {
	args := c.Args()
	if c.IsMemberFunction() {
		args = append([]ast.Expr{c.Target()}, args...)
	}
	fs := make([]direct, len(args))
	for i, a := range args {
		if fs[i] = lowerDirect(a); fs[i] == nil {
			return nil
		}
	}
	switch name := c.FunctionName(); {
	case name == operators.LogicalAnd && len(fs) == 2:
		return logical(fs[0], fs[1], false)
	case name == operators.LogicalOr && len(fs) == 2:
		return logical(fs[0], fs[1], true)
	case name == operators.LogicalNot && len(fs) == 1:
		return func(v *Vars) (any, bool) {
			b, ok := boolOf(fs[0](v))
			return !b, ok
		}
	case name == operators.Conditional && len(fs) == 3:
		return func(v *Vars) (any, bool) {
			b, ok := boolOf(fs[0](v))
			switch {
			case !ok:
				return nil, false
			case b:
				return fs[1](v)
			}
			return fs[2](v)
		}
	case (name == operators.Equals || name == operators.NotEquals) && len(fs) == 2:
		negate := name == operators.NotEquals
		return func(v *Vars) (any, bool) {
			a, aok := fs[0](v)
			b, bok := fs[1](v)
			if !aok || !bok {
				return nil, false
			}
			eq, ok := equal(a, b)
			return eq != negate, ok
		}
	case len(fs) == 2 && orderings[name] != nil:
		holds := orderings[name]
		return func(v *Vars) (any, bool) {
			a, aok := fs[0](v)
			b, bok := fs[1](v)
			if !aok || !bok {
				return nil, false
			}
			c, ok := compare(a, b)
			return ok && holds(c), ok
		}
	case name == operators.Index && len(fs) == 2:
		return func(v *Vars) (any, bool) {
			m, ok := dict(fs[0](v))
			k, kok := str(fs[1](v))
			x, has := m[k]
			return x, ok && kok && has
		}
	case name == overloads.Size && len(fs) == 1:
		return func(v *Vars) (any, bool) {
			x, ok := fs[0](v)
			if !ok {
				return nil, false
			}
			switch x := x.(type) {
			case map[string]any:
				return int64(len(x)), true
			case []any:
				return int64(len(x)), true
			}
			if s, ok := str(x, true); ok {
				return int64(utf8.RuneCountInString(s)), true
			}
			return nil, false
		}
	case name == overloads.Contains && len(fs) == 2:
		return strings2(fs, strings.Contains)
	case name == overloads.StartsWith && len(fs) == 2:
		return strings2(fs, strings.HasPrefix)
	case name == overloads.EndsWith && len(fs) == 2:
		return strings2(fs, strings.HasSuffix)
	case name == overloads.Matches && len(fs) == 2:
		lit := args[1]
		if lit.Kind() != ast.LiteralKind {
			return nil
		}
		pattern, ok := lit.AsLiteral().(types.String)
		if !ok {
			return nil
		}
		re, err := regexp.Compile(string(pattern))
		if err != nil {
			return nil
		}
		return func(v *Vars) (any, bool) {
			s, ok := str(fs[0](v))
			return ok && re.MatchString(s), ok
		}
	case name == "path.clean" && len(fs) == 1:
		return func(v *Vars) (any, bool) {
			s, ok := str(fs[0](v))
			if !ok {
				return nil, false
			}
			return cleanPath(s), true
		}
	case name == "url.host" && len(fs) == 1:
		return func(v *Vars) (any, bool) {
			s, ok := str(fs[0](v))
			if !ok {
				return nil, false
			}
			h, err := urlHost(s)
			return h, err == nil
		}
	}
	return nil
}

// logical is `a && b` (or `a || b`) as CEL evaluates it: false (true) when
// either side is, whatever the other, even an error; otherwise both must
// be bools.
func logical(a, b direct, or bool) direct {
	return func(v *Vars) (any, bool) {
		x, xok := boolOf(a(v))
		if xok && x == or {
			return or, true
		}
		y, yok := boolOf(b(v))
		if yok && y == or {
			return or, true
		}
		return !or, xok && yok
	}
}

// strings2 is a function of two strings to a bool.
func strings2(fs []direct, f func(string, string) bool) direct {
	return func(v *Vars) (any, bool) {
		s, sok := str(fs[0](v))
		t, tok := str(fs[1](v))
		return sok && tok && f(s, t), sok && tok
	}
}

// orderings are the comparison operators, each over compare's result.
var orderings = map[string]func(int) bool{
	operators.Less:          func(c int) bool { return c < 0 },
	operators.LessEquals:    func(c int) bool { return c <= 0 },
	operators.Greater:       func(c int) bool { return c > 0 },
	operators.GreaterEquals: func(c int) bool { return c >= 0 },
}

// boolOf, str and dict take a direct evaluation's result as a bool, a
// string or a map: false when it is not sure or is of another kind.
func boolOf(x any, ok bool) (bool, bool) {
	b, isBool := x.(bool)
	return b, ok && isBool
}

func str(x any, ok bool) (string, bool) {
	switch s := x.(type) {
	case string:
		return s, ok
	case *string:
		return *s, ok
	}
	return "", false
}

func dict(x any, ok bool) (map[string]any, bool) {
	m, isMap := x.(map[string]any)
	return m, ok && isMap
}

// equal is CEL's equality on the values it is sure of: numbers of either
// kind by their value, strings, bools and null by theirs, and values of
// different kinds unequal; two lists, or two maps, are left to CEL.
func equal(a, b any) (bool, bool) {
	ka, kb := kind(a), kind(b)
	switch {
	case ka == 0 || kb == 0:
		return false, false
	case ka == 'n' && kb == 'n':
		x, xok := number(a)
		y, yok := number(b)
		return x == y, xok && yok
	case ka != kb:
		return false, true
	case ka == 's':
		x, _ := str(a, true)
		y, _ := str(b, true)
		return x == y, true
	case ka == 'l' || ka == 'm':
		return false, false
	}
	return a == b, true
}

// compare orders two strings (by their bytes), two bools (false first)
// or two numbers of either kind; anything else is left to CEL.
func compare(a, b any) (int, bool) {
	if x, ok := number(a); ok {
		y, ok := number(b)
		switch {
		case !ok:
			return 0, false
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	}
	if x, ok := str(a, true); ok {
		y, ok := str(b, true)
		return strings.Compare(x, y), ok
	}
	if x, ok := a.(bool); ok {
		y, ok := b.(bool)
		switch {
		case !ok:
			return 0, false
		case x == y:
			return 0, true
		case y:
			return -1, true
		}
		return 1, true
	}
	return 0, false
}
