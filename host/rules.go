package host

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/rules"
)

// roleRules is the part of a role's view its rules make: the rules
// compiled, which of them apply to each listed tool, and the tools they
// deny whatever the arguments (not listed, so that listing equals calling).
type roleRules struct {
	list   []rules.Compiled
	byTool map[string][]int        // a listed tool's rules that may match, in order
	chains map[string]*rules.Chain // their conditions, chained
	hidden map[string]int          // a tool denied whatever its arguments: the rule
}

// compileRules compiles a role's rules for its view. A rule whose
// condition does not compile (the API and the config refuse one, so only a
// store written otherwise holds it) denies its tools whatever the
// arguments: it fails closed.
func compileRules(rs []rules.Rule) *roleRules {
	if len(rs) == 0 {
		return nil
	}
	out := &roleRules{list: make([]rules.Compiled, len(rs)), byTool: map[string][]int{}, chains: map[string]*rules.Chain{}, hidden: map[string]int{}}
	for i, r := range rs {
		c, err := rules.Compile(r.When)
		if err != nil {
			r.Action, r.Reason, c = rules.Deny, fmt.Sprintf("its condition does not compile (%v); the call is refused", err), nil
		}
		out.list[i] = rules.Compiled{Rule: r, Cond: c}
	}
	return out
}

// listing decides whether a tool of group (or an item method on group's
// items) is listed under the rules, and the lines its description gains:
// what is refused, and what needs an approval. A tool is hidden when a
// rule denies it whatever the arguments (no condition, or a literal true)
// before any rule that could let a call through (a conditional allow or
// approve) comes. The rules are kept under ruleKey(tool, group).
func (rr *roleRules) listing(tool, group string) (listed bool, notes []string) {
	if rr == nil {
		return true, nil
	}
	key := ruleKey(tool, group)
	defer func() {
		if idx := rr.byTool[key]; len(idx) > 0 {
			conds := make([]*rules.Condition, len(idx))
			for j, i := range idx {
				conds[j] = rr.list[i].Cond
			}
			rr.chains[key] = rules.NewChain(conds)
		}
	}()
	passable := false
	for i := range rr.list {
		r := &rr.list[i]
		if !rules.Applies(r.Tools, tool, group) || r.Cond.Never() {
			continue
		}
		rr.byTool[key] = append(rr.byTool[key], i)
		what := r.Reason
		if what == "" {
			what = "rule " + r.Name
		}
		always := r.Cond.Always()
		switch {
		case always && r.Action == rules.Deny && !passable:
			delete(rr.byTool, key)
			rr.hidden[key] = i
			return false, nil
		case always && r.Action == rules.Deny:
			return true, append(notes, "Refused otherwise: "+what)
		case always && r.Action == rules.Approve:
			return true, append(notes, "Needs approval: "+what)
		case always:
			return true, notes
		case r.Action == rules.Deny:
			notes = append(notes, fmt.Sprintf("Refused when %s: %s", r.When, what))
		case r.Action == rules.Approve:
			notes = append(notes, fmt.Sprintf("Needs approval when %s: %s", r.When, what))
			passable = true
		default:
			passable = true
		}
	}
	return true, notes
}

// hiddenBy returns the rule that denies the tool whatever its arguments.
func (rr *roleRules) hiddenBy(tool string) (int, bool) {
	if rr == nil {
		return 0, false
	}
	i, ok := rr.hidden[tool]
	return i, ok
}

// describeRules adds the notes of the rules to a tool's description.
func describeRules(desc string, notes []string) string {
	if len(notes) == 0 {
		return desc
	}
	return strings.TrimRight(desc, "\n") + "\n\n" + strings.Join(notes, "\n")
}

// hiddenByRule is the error of a call of a tool that a rule denies
// whatever its arguments; it names the rule and its reason.
func (c *call) hiddenByRule(rr *roleRules, i int) error {
	c.rule = &rr.list[i]
	return c.refusal()
}

// refusal is the policy error of a call the rule c.rule denies.
func (c *call) refusal() error {
	reason := c.rule.Reason
	if reason == "" {
		reason = "no reason given"
	}
	return toolhost.Errorf(toolhost.CodePolicy, "call of %s refused by rule %q of role %q: %s", c.req.Tool, c.rule.Name, c.req.Context.Role, reason)
}

// checkRules evaluates the caller's role's rules on the call, in order,
// in one evaluation of their chained conditions (rules.Chain) on the
// arguments as validation decoded them: the first that matches decides. A deny fails
// the call with policy; an approve or an allow is returned (c.rule), for
// approve to act on. A condition that cannot be evaluated (a missing
// argument, its cost bound passed) refuses the call.
func (c *call) checkRules(ctx context.Context, rr *roleRules) error {
	if rr == nil {
		return nil
	}
	key := ruleKey(c.req.Tool, c.tool.group.Spec.ID)
	idx := rr.byTool[key]
	if len(idx) == 0 {
		return nil
	}
	_, span := c.stage(ctx, "rules")
	var err error
	defer func() { endStage(span, err) }()
	var vars *rules.Vars
	if !rr.list[idx[0]].Cond.Always() { // the first decides without them
		vars = rules.VarsOf(c.req.Tool, c.tool.group.Spec.ID, c.req.Context.Role, c.req.Context.AgentID, c.args)
	}
	first, err := rr.chains[key].First(ctx, vars)
	if first < 0 {
		return nil
	}
	r := &rr.list[idx[first]]
	c.rule = r
	if err != nil {
		if ctx.Err() != nil {
			err = toolhost.Errorf(toolhost.CodeOf(ctx.Err()), "rule %q: %w", r.Name, ctx.Err())
			return err
		}
		err = toolhost.Errorf(toolhost.CodePolicy, "call of %s refused: rule %q of role %q could not be evaluated on it (%v), and a rule that cannot decide refuses", c.req.Tool, r.Name, c.req.Context.Role, err)
		return err
	}
	if r.Action == rules.Deny {
		err = c.refusal()
	}
	return err
}

// ruleAsks reports whether the rule that decided the call asks the
// approver.
func (c *call) ruleAsks() bool { return c.rule != nil && c.rule.Action == rules.Approve }

// sentBy names, after the tool in an approval's error, the rule that sent
// the call for approval: ", sent for approval by rule R of role O," or
// nothing.
func (c *call) sentBy() string {
	if !c.ruleAsks() {
		return ""
	}
	return fmt.Sprintf(", sent for approval by rule %q of role %q,", c.rule.Name, c.req.Context.Role)
}

// markRule records in a terminal event's payload the rule that decided the
// call, and its action.
func (c *call) markRule(payload map[string]any) {
	if c.rule != nil {
		payload["rule"], payload["rule_action"] = c.rule.Name, string(c.rule.Action)
	}
}

// checkRoleRules refuses, with validation naming the rule or limit and its
// field ("rules[0] \"no_sudo\": when: …"), a role's rules, limits or
// code bounds ("code: timeout: …") that are not valid.
func checkRoleRules(rs []rules.Rule, ls []rules.Limit, code rules.CodeBounds) error {
	if _, err := rules.Check(rs, ls); err != nil {
		return toolhost.Errorf(toolhost.CodeValidation, "%v", err)
	}
	if err := code.Check(); err != nil {
		return toolhost.Errorf(toolhost.CodeValidation, "code: %v", err)
	}
	return nil
}
