package rules

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// The bounds of a condition: its length, and the cost of one evaluation
// (the operations it performs, each call weighed by the size of what it
// reads and builds: see sizeCost). A condition
// past them fails, which refuses the call (fail closed), whatever the
// arguments. CEL's memory limit is not used: it counts the arguments
// themselves, and would refuse any call with more than a few thousand
// values in them.
const (
	maxConditionLen = 4096
	costLimit       = 1_000_000
)

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

// celEnv returns the CEL environment of conditions: args, a map of the call's
// arguments as JSON decodes them (numbers are doubles); tool, group, role
// and agent, strings (agent is "" for a caller without one); CEL's standard
// functions (contains, startsWith, matches with RE2, size, …); and
// path.clean(string) (a path with "." and ".." resolved and repeated "/"
// dropped, as Go's [path.Clean] does) and url.host(string) (the host a URL
// names, lower-cased, without port, brackets or trailing dot; an error for
// what does not parse as an absolute URL with a host). CEL's strings
// extension is left out: its replace can build, in one step and before any
// cost is counted, a string the square of its input's size.
func celEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("tool", cel.StringType),
			cel.Variable("group", cel.StringType),
			cel.Variable("role", cel.StringType),
			cel.Variable("agent", cel.StringType),
			cel.ParserExpressionSizeLimit(maxConditionLen),
			cel.Function("path.clean", cel.Overload("path_clean_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return types.String(cleanPath(string(v.(types.String)))) }))),
			cel.Function("url.host", cel.Overload("url_host_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					h, err := urlHost(string(v.(types.String)))
					if err != nil {
						return types.NewErr("%v", err)
					}
					return types.String(h)
				}))),
		)
	})
	return env, envErr
}

// cleanPath is path.clean: the path with "." and ".." resolved lexically
// and repeated "/" dropped ("src/../etc/passwd" is "etc/passwd"); "" is
// ".". It knows nothing of symbolic links, which only the sandbox and the
// tool's own checks see.
func cleanPath(p string) string { return path.Clean(p) }

// urlHost is url.host: the host an absolute URL names, lower-cased,
// without port, brackets or trailing dot.
func urlHost(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("url.host: %w", err)
	}
	h := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if h == "" {
		return "", fmt.Errorf("url.host: %q names no host", s)
	}
	return h, nil
}

// Condition is a rule's compiled condition.
type Condition struct {
	expr string
	prg  cel.Program
	// direct is its direct evaluation, when it has one (see direct).
	direct direct
	// constant is set for a literal true or false: a condition that does
	// not depend on the call.
	constant *bool
}

// ConditionError is an expression that does not compile: a syntax error,
// an unknown name or function, or a result other than a bool.
type ConditionError struct {
	// Line and Column (1-based) are where in the expression, when known.
	Line, Column int
	// Message says what is wrong.
	Message string
}

func (e *ConditionError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d, column %d of the expression: %s", e.Line, e.Column, e.Message)
	}
	return e.Message
}

// compiled memoises Compile's conditions by expression, up to
// maxCompiled of them: a role's views are rebuilt whenever groups or roles
// change, and its conditions are compiled once all the same.
var compiled sync.Map

// maxCompiled bounds the conditions compiled is kept to; an expression
// past it is compiled again each time it is asked for.
const maxCompiled = 4096

var compiledCount atomic.Int64

// Compile compiles a condition: empty is nil (every call matches). The
// result must be a bool (or dyn, such as args.force, which must then be a
// bool when evaluated).
func Compile(expr string) (*Condition, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil
	}
	if c, ok := compiled.Load(expr); ok {
		return c.(*Condition), nil
	}
	c, err := compile(expr)
	if err == nil && compiledCount.Load() < maxCompiled {
		if _, loaded := compiled.LoadOrStore(expr, c); !loaded {
			compiledCount.Add(1)
		}
	}
	return c, err
}

func compile(expr string) (*Condition, error) {
	e, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("rules: the CEL environment: %w", err)
	}
	if len(expr) > maxConditionLen {
		return nil, &ConditionError{Message: fmt.Sprintf("%d bytes; at most %d", len(expr), maxConditionLen)}
	}
	checked, iss := e.Compile(expr)
	if iss.Err() != nil {
		first := iss.Errors()[0]
		ce := &ConditionError{Message: first.Message}
		if loc := first.Location; loc != nil && loc.Line() > 0 {
			ce.Line, ce.Column = loc.Line(), loc.Column()+1
		}
		return nil, ce
	}
	if t := checked.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, &ConditionError{Message: fmt.Sprintf("the result is a %s; a condition must be a bool", t)}
	}
	c := &Condition{expr: expr}
	if x := checked.NativeRep().Expr(); x.Kind() == ast.LiteralKind {
		if b, ok := x.AsLiteral().(types.Bool); ok {
			v := bool(b)
			c.constant = &v
		}
	}
	if linear(checked) { // evaluated by CEL within no bound either
		c.direct = lowerDirect(checked.NativeRep().Expr())
	}
	c.prg, err = program(e, checked)
	if err != nil {
		return nil, &ConditionError{Message: err.Error()}
	}
	return c, nil
}

// program plans a checked condition (or chain) for evaluation. One that is
// linear goes without the cost tracking, which costs about as much as the
// evaluation itself; any other is evaluated within the cost bound
// ([costLimit], sizeCost).
func program(e *cel.Env, checked *cel.Ast) (cel.Program, error) {
	if linear(checked) {
		return e.Program(checked, cel.EvalOptions(cel.OptOptimize))
	}
	return e.Program(checked, cel.CostLimit(costLimit), cel.CostTracking(sizeCost{}), cel.EvalOptions(cel.OptOptimize))
}

// linear reports whether a checked expression has no loop (a macro such
// as all, exists, map or filter, which CEL makes a comprehension), no `+`
// (which can build a string or list as long as all its operands), and at
// most maxLinearCalls calls: it reads each of its operands once per call,
// so its time is bounded by its size times the arguments', which
// validation bounds.
func linear(checked *cel.Ast) bool {
	root := ast.NavigateAST(checked.NativeRep())
	loops := ast.MatchDescendants(root, ast.KindMatcher(ast.ComprehensionKind))
	sums := ast.MatchDescendants(root, ast.FunctionMatcher(operators.Add))
	return len(loops) == 0 && len(sums) == 0 && len(ast.MatchDescendants(root, ast.KindMatcher(ast.CallKind))) <= maxLinearCalls
}

// maxLinearCalls is the most calls a condition (or a role's chain of them)
// may make and go without cost tracking: 64 passes over the largest
// arguments validation lets through.
const maxLinearCalls = 64

// Always reports whether the condition holds whatever the call: none, or
// a literal true.
func (c *Condition) Always() bool { return c == nil || c.constant != nil && *c.constant }

// Never reports whether the condition holds for no call: a literal false.
func (c *Condition) Never() bool { return c != nil && c.constant != nil && !*c.constant }

// Vars are the variables of one call, made once and shared by the
// conditions evaluated on it.
type Vars struct {
	tool, group, role, agent string
	raw                      map[string]any
	args                     ref.Val // raw as a CEL value, made when CEL first reads it
}

// VarsOf makes a call's variables of its arguments as JSON decodes them
// into a map (numbers float64), such as the host's validation decoded
// them; nil is {}. The map is not changed, and must not change while the
// variables are used.
func VarsOf(tool, group, role, agent string, args map[string]any) *Vars {
	if args == nil {
		args = map[string]any{}
	}
	return &Vars{tool: tool, group: group, role: role, agent: agent, raw: args}
}

// ResolveName gives CEL the variable named name.
func (v *Vars) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		if v.args == nil {
			// The top-level values are made CEL values once, rather than
			// at every condition reading them.
			m := make(map[string]any, len(v.raw))
			for k, x := range v.raw {
				m[k] = types.DefaultTypeAdapter.NativeToValue(x)
			}
			v.args = types.NewStringInterfaceMap(types.DefaultTypeAdapter, m)
		}
		return v.args, true
	case "tool":
		return types.String(v.tool), true
	case "group":
		return types.String(v.group), true
	case "role":
		return types.String(v.role), true
	case "agent":
		return types.String(v.agent), true
	}
	return nil, false
}

// Parent is nil: the variables are all there is.
func (v *Vars) Parent() interpreter.Activation { return nil }

// ErrNotBool is the error of a condition whose value is not a bool.
var ErrNotBool = errors.New("the condition's value is not a bool")

// Match evaluates the condition on a call's variables, within its cost
// bound (which bounds its time: tens of milliseconds at most on these
// machines; ctx is not watched, so that an evaluation costs no context of
// its own). An error (a missing key, the bound passed, a value not a bool)
// is for the caller to refuse the call on.
func (c *Condition) Match(_ context.Context, v *Vars) (bool, error) {
	if c == nil {
		return true, nil
	}
	if c.constant != nil {
		return *c.constant, nil
	}
	if c.direct != nil {
		if b, ok := boolOf(c.direct(v)); ok {
			return b, nil
		}
	}
	out, _, err := c.prg.Eval(v)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%w: it is a %s", ErrNotBool, out.Type().(ref.Type).TypeName())
	}
	return bool(b), nil
}

// sizeCost charges every call 1 plus a tenth of the bytes of the strings,
// and of the elements of the lists and maps, it takes and returns. CEL's
// own model charges by size only the calls whose types it knows when
// compiling, and args is dynamic: "args.s + args.s" would cost 1 however
// long args.s, and a comprehension over it could build gigabytes within
// the limit. With this, what a condition reads and builds is bounded by
// ten times the cost limit.
type sizeCost struct{}

// CallCost implements CEL's ActualCostEstimator.
func (sizeCost) CallCost(_, _ string, args []ref.Val, result ref.Val) *uint64 {
	n := 10 + size(result)
	for _, a := range args {
		n += size(a)
	}
	if n /= 10; n < uint64(len(smallCosts)) {
		return &smallCosts[n] // CEL only reads it: no allocation per call
	}
	big := n
	return &big
}

// smallCosts are the costs 0–1023, for CallCost to point at.
var smallCosts = func() (c [1024]uint64) {
	for i := range c {
		c[i] = uint64(i)
	}
	return c
}()

// size is a value's bytes (string, bytes) or elements (list, map).
func size(v ref.Val) uint64 {
	switch x := v.(type) {
	case types.String:
		return uint64(len(x))
	case types.Bytes:
		return uint64(len(x))
	case traits.Sizer:
		if n, ok := x.Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
	}
	return 0
}
