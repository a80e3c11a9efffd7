package config

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/toolhost/toolhost/rules"
)

// Role is a `role "NAME" {}` block: a role declared in the file, read-only at
// run time (edit the file and restart to change it).
type Role struct {
	// Name is the block label, unique among roles; "root" is reserved.
	Name string
	// Description says what the role is for.
	Description string
	// Prompt is the role's system prompt.
	Prompt string
	// ToolGroups are the groups the role's agents may use; nil when the block
	// has no tool_groups (every group), otherwise as written, duplicates dropped.
	ToolGroups []string
	// DeferredGroups are groups of the role whose tools its agents load on
	// demand (tool_search's find_tools and load_tools) rather than carry in
	// every request; they may call them all the same.
	DeferredGroups []string
	// Tools allows optional tools and denies tools for this role.
	Tools ToolPolicy
	// ReadOnlyTools, the tools block's read_only, keeps only the role's
	// read-only tools: those whose MCP annotations say readOnlyHint, as the
	// module reports them or as a tool block's read_only overrides them. The
	// global tools block has no read_only: it is said of a role.
	ReadOnlyTools bool
	// Rules are the role's rule blocks, in file order: the first whose
	// tools and condition match a call decides it.
	Rules []Rule `json:",omitempty"`
	// Limits are the role's limit blocks, in file order.
	Limits []Limit `json:",omitempty"`
	// Code bounds the role's scripts (its code block), over the config's
	// code block.
	Code CodeBounds `json:",omitzero"`
	// Pos is where the block is declared, "file:line,col".
	Pos string
	// RulePos and LimitPos are where each of Rules and Limits is declared,
	// "file:line,col", index for index.
	RulePos  []string `json:",omitempty"`
	LimitPos []string `json:",omitempty"`
}

// Rule is a `rule "NAME" { tools, when, action, reason }` block of a role
// (see [rules.Rule]).
type Rule = rules.Rule

// Limit is a `limit "TARGET" { calls, per, by }` block of a role (see
// [rules.Limit]).
type Limit = rules.Limit

// ToolPolicy is a `tools {}` block: which optional tools are visible and which
// tools are hidden. Each entry names a tool, a group (a plugin's id) or
// "group:plugins" (every tool from a plugin block).
type ToolPolicy struct {
	// Allow makes optional tools visible.
	Allow []string
	// Deny hides tools, whatever allows them.
	Deny []string
}

// rootRole is the name of the role that always exists and no block may declare.
const rootRole = "root"

var (
	roleNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	policyItemRE = regexp.MustCompile(`^(group:plugins|[a-z][a-z0-9_-]{0,63})$`)
)

var roleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "description"}, {Name: "prompt"}, {Name: "tool_groups"}, {Name: "deferred_groups"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "tools"}, {Type: "rule", LabelNames: []string{"name"}}, {Type: "limit", LabelNames: []string{"target"}}, {Type: "code"}},
}

var ruleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "tools"}, {Name: "when"}, {Name: "action", Required: true}, {Name: "reason"}},
}

var limitSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "calls", Required: true}, {Name: "per", Required: true}, {Name: "by"}},
}

var toolsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "allow"}, {Name: "deny"}, {Name: "read_only"}},
}

// role decodes a role block; declared maps the role names seen so far to their blocks.
func (d *decoder) role(blk *hcl.Block, declared map[string]hcl.Range) Role {
	r := Role{Name: blk.Labels[0], Pos: position(blk.DefRange)}
	switch first, dup := declared[r.Name]; {
	case r.Name == rootRole:
		d.fail(blk.LabelRanges[0], "Reserved role name", `The root role always exists and cannot be declared; choose another name.`)
	case !ValidRoleName(r.Name):
		d.fail(blk.LabelRanges[0], "Invalid role name",
			fmt.Sprintf("%q must start with a letter or digit and continue with up to 63 letters, digits, '_', '.' or '-'.", r.Name))
	case dup:
		d.fail(blk.LabelRanges[0], "Duplicate role name", fmt.Sprintf("A role named %q was already declared at %s.", r.Name, position(first)))
	default:
		declared[r.Name] = blk.DefRange
	}
	content, diags := blk.Body.Content(roleSchema)
	d.add(diags)
	attr(d, content.Attributes, "description", &r.Description, asIs)
	attr(d, content.Attributes, "prompt", &r.Prompt, asIs)
	attr(d, content.Attributes, "tool_groups", &r.ToolGroups, groupIDs)
	attr(d, content.Attributes, "deferred_groups", &r.DeferredGroups, groupIDs)
	if a, ok := content.Attributes["deferred_groups"]; ok && r.ToolGroups != nil {
		for _, g := range r.DeferredGroups {
			if !slices.Contains(r.ToolGroups, g) {
				d.fail(a.Expr.Range(), "Deferred group not in tool_groups",
					fmt.Sprintf("%q is deferred but not one of the role's tool_groups; a deferred group is one of the role's groups whose tools are loaded on demand.", g))
			}
		}
	}
	blocks := content.Blocks.ByType()
	if blk := d.onlyBlock(blocks["tools"]); blk != nil {
		var attrs hcl.Attributes
		r.Tools, attrs = d.tools(blk.Body)
		attr(d, attrs, "read_only", &r.ReadOnlyTools, asIs)
	}
	if blk := d.onlyBlock(blocks["code"]); blk != nil {
		r.Code = d.code(blk.Body)
	}
	names := map[string]hcl.Range{}
	for _, blk := range blocks["rule"] {
		r.Rules = append(r.Rules, d.rule(blk, names))
		r.RulePos = append(r.RulePos, position(blk.DefRange))
	}
	for _, blk := range blocks["limit"] {
		r.Limits = append(r.Limits, d.limit(blk))
		r.LimitPos = append(r.LimitPos, position(blk.DefRange))
	}
	return r
}

// rule decodes a role's rule block; names maps the rule names seen so far
// in the role to their blocks. Its condition is compiled, so that an
// expression that does not is reported at the when attribute.
func (d *decoder) rule(blk *hcl.Block, names map[string]hcl.Range) Rule {
	r := Rule{Name: blk.Labels[0]}
	if err := rules.CheckName(r.Name); err != nil {
		d.fail(blk.LabelRanges[0], "Invalid rule name", err.Error()+".")
	} else if first, dup := names[r.Name]; dup {
		d.fail(blk.LabelRanges[0], "Duplicate rule name", fmt.Sprintf("A rule named %q was already declared in this role at %s.", r.Name, position(first)))
	} else {
		names[r.Name] = blk.DefRange
	}
	content, diags := blk.Body.Content(ruleSchema)
	d.add(diags)
	attr(d, content.Attributes, "tools", &r.Tools, func(items []string) ([]string, error) {
		for _, it := range items {
			if err := rules.CheckTool(it); err != nil {
				return nil, err
			}
		}
		return items, nil
	})
	attr(d, content.Attributes, "when", &r.When, func(expr string) (string, error) {
		if _, err := rules.Compile(expr); err != nil {
			return "", fmt.Errorf("the condition does not compile: %w", err)
		}
		return expr, nil
	})
	attr(d, content.Attributes, "action", &r.Action, func(a string) (rules.Action, error) {
		return rules.Action(a), rules.CheckAction(rules.Action(a))
	})
	attr(d, content.Attributes, "reason", &r.Reason, asIs)
	return r
}

// limit decodes a role's limit block.
func (d *decoder) limit(blk *hcl.Block) Limit {
	l := Limit{Target: blk.Labels[0]}
	if err := rules.CheckTarget(l.Target); err != nil {
		d.fail(blk.LabelRanges[0], "Invalid limit target", err.Error()+".")
	}
	content, diags := blk.Body.Content(limitSchema)
	d.add(diags)
	attr(d, content.Attributes, "calls", &l.Calls, func(n int) (int, error) {
		if n < 1 {
			return 0, fmt.Errorf("%d calls: a limit allows at least 1", n)
		}
		return n, nil
	})
	attr(d, content.Attributes, "per", &l.Per, duration)
	attr(d, content.Attributes, "by", &l.By, func(by string) (string, error) { return by, rules.CheckBy(by) })
	return l
}

// toolPolicy decodes the global tools block, which refuses read_only.
func (d *decoder) toolPolicy(body hcl.Body) ToolPolicy {
	p, attrs := d.tools(body)
	if a, ok := attrs["read_only"]; ok {
		d.fail(a.NameRange, "read_only is a role's",
			`The global tools block applies to every caller; say read_only = true in the tools block of each role that only reads.`)
	}
	return p
}

// tools decodes a tools block's allow and deny, and returns its attributes
// for the rest.
func (d *decoder) tools(body hcl.Body) (ToolPolicy, hcl.Attributes) {
	var p ToolPolicy
	content, diags := body.Content(toolsSchema)
	d.add(diags)
	attr(d, content.Attributes, "allow", &p.Allow, policyItems)
	attr(d, content.Attributes, "deny", &p.Deny, policyItems)
	return p, content.Attributes
}

// groupIDs checks a list of group ids and drops duplicates; an empty list
// stays empty, not nil, so that "configured as empty" is kept.
func groupIDs(ids []string) ([]string, error) {
	out := []string{}
	for _, id := range ids {
		if !nameRE.MatchString(id) {
			return nil, fmt.Errorf("%q is not a group id", id)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

func policyItems(items []string) ([]string, error) {
	for _, it := range items {
		if !policyItemRE.MatchString(it) {
			return nil, fmt.Errorf(`%q is neither a tool name, a group id nor "group:plugins"`, it)
		}
	}
	return items, nil
}

// ValidRoleName reports whether name may name a role.
func ValidRoleName(name string) bool { return roleNameRE.MatchString(name) }
