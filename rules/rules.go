// Package rules holds a role's rules and limits as data, and compiles and
// evaluates the rules' conditions, written in CEL: once compiled, a
// condition is evaluated against a call's tool, group, role, agent and
// arguments, bounded in cost and memory whatever the expression or the
// arguments.
//
// A rule is a policy on a call's arguments, not a sandbox: it sees the
// arguments as written, not what a shell, a file system or a resolver will
// make of them. The helpers path.clean and url.host let a rule see a path
// after cleaning and a host after parsing, the forms a sound rule compares.
package rules

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolhost/toolhost"
)

// Action is what a matching rule decides.
type Action string

// The actions.
const (
	// Deny refuses the call (code policy), naming the rule and its reason.
	Deny Action = "deny"
	// Approve asks the approver, naming the rule in the approval.
	Approve Action = "approve"
	// Allow ends the evaluation: no later rule applies.
	Allow Action = "allow"
)

// Rule is a role's `rule "NAME" {}`: when a call of one of its tools
// matches its condition, its action decides. A role's rules are evaluated
// in order, and the first that matches decides.
type Rule struct {
	// Name is unique among the role's rules.
	Name string `json:"name"`
	// Tools are the tools it applies to: tool names, "group:NAME" for
	// every tool of a group, or the MCP methods on groups' prompts and
	// resources ("resources/read", "prompts/get" and the others of
	// [toolhost.IsItemMethod]); none: every tool and method of the role.
	Tools []string `json:"tools,omitempty"`
	// When is the condition, a CEL expression over args, tool, group, role
	// and agent; empty: every call of its tools matches.
	When string `json:"when,omitempty"`
	// Action is [Deny], [Approve] or [Allow].
	Action Action `json:"action"`
	// Reason says why, to the caller refused and to the approver.
	Reason string `json:"reason,omitempty"`
}

// UnmarshalJSON reads a rule's fields, and nothing else: another key, or
// one of them spelled otherwise, is an error.
func (r *Rule) UnmarshalJSON(b []byte) error {
	type fields Rule // without this method
	if err := strictJSON(b, (*fields)(r)); err != nil {
		return fmt.Errorf("rule: %w", err)
	}
	return nil
}

// Limit is a role's `limit "TARGET" {}`: at most Calls calls per period
// Per, per agent of the role, of its target.
type Limit struct {
	// Target is a tool name, "group:NAME", an item method such as
	// "resources/read" ([CheckTool]) or "*" (every tool and method of the
	// role).
	Target string
	// Calls is the bucket's capacity, at least 1.
	Calls int
	// Per is the period in which Calls calls are allowed, greater than 0.
	Per time.Duration
	// By is whose calls a bucket counts: [ByCredential] ("" too), one
	// bucket per credential whatever agents, sessions or keys it makes, or
	// [ByRole], one bucket that every credential of the role shares.
	By string
}

// The values of [Limit.By].
const (
	ByCredential = "credential"
	ByRole       = "role"
)

// CheckBy says what is wrong with a limit's by, or nil.
func CheckBy(by string) error {
	if by == "" || by == ByCredential || by == ByRole {
		return nil
	}
	return fmt.Errorf(`%q is neither "credential" nor "role"`, by)
}

type limitJSON struct {
	Target string `json:"target"`
	Calls  int    `json:"calls"`
	Per    string `json:"per"`
	By     string `json:"by,omitempty"`
}

// MarshalJSON writes the limit as {"target", "calls", "per", "by"}, per as a
// duration such as "1m0s", by only when it is "role".
func (l Limit) MarshalJSON() ([]byte, error) {
	by := l.By
	if by == ByCredential {
		by = ""
	}
	return json.Marshal(limitJSON{l.Target, l.Calls, l.Per.String(), by})
}

// UnmarshalJSON reads what [Limit.MarshalJSON] writes, and nothing else
// (another key, or one of those spelled otherwise, is an error); per is a
// duration such as "1m" or "30s".
func (l *Limit) UnmarshalJSON(b []byte) error {
	var j limitJSON
	if err := strictJSON(b, &j); err != nil {
		return fmt.Errorf("limit: %w", err)
	}
	if err := CheckBy(j.By); err != nil {
		return fmt.Errorf("by: %w", err)
	}
	*l = Limit{Target: j.Target, Calls: j.Calls, By: j.By}
	if j.Per != "" {
		d, err := time.ParseDuration(j.Per)
		if err != nil {
			return fmt.Errorf("per: %q is not a duration such as \"30s\" or \"1m\"", j.Per)
		}
		l.Per = d
	}
	return nil
}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	toolRE   = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	groupRE  = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)
	actionOK = []Action{Deny, Approve, Allow}
)

// groupPrefix marks a group in a rule's tools or a limit's target.
const groupPrefix = "group:"

// CheckName says what is wrong with a rule's name, or nil.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%q must start with a letter or digit and continue with up to 63 letters, digits, '_', '.' or '-'", name)
	}
	return nil
}

// CheckTool says what is wrong with an entry of a rule's tools (a tool
// name, "group:NAME" or an item method such as "resources/read"), or nil.
func CheckTool(item string) error {
	if g, ok := strings.CutPrefix(item, groupPrefix); ok && groupRE.MatchString(g) || toolRE.MatchString(item) || toolhost.IsItemMethod(item) {
		return nil
	}
	return fmt.Errorf(`%q is neither a tool name, "group:NAME" nor an MCP method such as "resources/read"`, item)
}

// CheckAction says what is wrong with an action, or nil.
func CheckAction(a Action) error {
	if !slices.Contains(actionOK, a) {
		return fmt.Errorf(`%q is not an action: deny, approve or allow`, a)
	}
	return nil
}

// CheckTarget says what is wrong with a limit's target (a tool name,
// "group:NAME" or "*"), or nil.
func CheckTarget(target string) error {
	if target == "*" || CheckTool(target) == nil {
		return nil
	}
	return fmt.Errorf(`%q is neither a tool name, "group:NAME" nor "*"`, target)
}

// Counts reports whether the limit counts a call of tool, of group.
func (l Limit) Counts(tool, group string) bool {
	return l.Target == "*" || Applies([]string{l.Target}, tool, group)
}

// check says what is wrong with a limit, and in which field, or nil.
func (l Limit) check() (string, error) {
	switch {
	case CheckTarget(l.Target) != nil:
		return "target", CheckTarget(l.Target)
	case l.Calls < 1:
		return "calls", fmt.Errorf("%d; at least 1", l.Calls)
	case l.Per <= 0:
		return "per", fmt.Errorf("%s; must be greater than 0", l.Per)
	}
	return "", nil
}

// Applies reports whether a rule's tools (or a limit's target, without
// "*") name the tool or its group; no tools name every tool.
func Applies(tools []string, tool, group string) bool {
	if len(tools) == 0 {
		return true
	}
	for _, t := range tools {
		if t == tool || strings.HasPrefix(t, groupPrefix) && t[len(groupPrefix):] == group {
			return true
		}
	}
	return false
}

// Compiled is a rule with its condition compiled (nil: none, every call of
// its tools matches).
type Compiled struct {
	Rule
	Cond *Condition
}

// Error is what is wrong with one of a role's rules or limits: its kind
// ("rules" or "limits"), index, name (a rule's) and field.
type Error struct {
	Kind  string
	Index int
	Name  string
	Field string
	Err   error
}

func (e *Error) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("%s[%d] %q: %s: %v", e.Kind, e.Index, e.Name, e.Field, e.Err)
	}
	return fmt.Sprintf("%s[%d]: %s: %v", e.Kind, e.Index, e.Field, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Check says what is wrong with a role's rules (a name invalid or
// repeated, a tool, an action, a condition that does not compile) and
// limits, as an [*Error] naming the first at fault, and returns the rules
// compiled.
func Check(rs []Rule, ls []Limit) ([]Compiled, error) {
	out := make([]Compiled, len(rs))
	for i, r := range rs {
		fail := func(field string, err error) ([]Compiled, error) {
			return nil, &Error{Kind: "rules", Index: i, Name: r.Name, Field: field, Err: err}
		}
		if err := CheckName(r.Name); err != nil {
			return fail("name", err)
		}
		for _, p := range rs[:i] {
			if p.Name == r.Name {
				return fail("name", fmt.Errorf("a rule named %q comes before it; names are unique in a role", r.Name))
			}
		}
		for _, t := range r.Tools {
			if err := CheckTool(t); err != nil {
				return fail("tools", err)
			}
		}
		if err := CheckAction(r.Action); err != nil {
			return fail("action", err)
		}
		c, err := Compile(r.When)
		if err != nil {
			return fail("when", err)
		}
		out[i] = Compiled{Rule: r, Cond: c}
	}
	for i, l := range ls {
		if field, err := l.check(); err != nil {
			return nil, &Error{Kind: "limits", Index: i, Field: field, Err: err}
		}
	}
	return out, nil
}
