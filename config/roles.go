package config

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/hashicorp/hcl/v2"
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
	// Pos is where the block is declared, "file:line,col".
	Pos string
}

// ToolPolicy is a `tools {}` block: which optional tools are visible and which
// tools are hidden. Each entry names a tool, a group (a plugin's id) or
// "group:plugins" (every tool from a plugin block).
type ToolPolicy struct {
	// Allow makes optional tools visible.
	Allow []string
	// Deny hides tools, whatever allows them.
	Deny []string
}

// RootRole is the name of the role that always exists and no block may declare.
const RootRole = "root"

var (
	roleNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	policyItemRE = regexp.MustCompile(`^(group:plugins|[a-z][a-z0-9_-]{0,63})$`)
)

var roleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "description"}, {Name: "prompt"}, {Name: "tool_groups"}, {Name: "deferred_groups"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "tools"}},
}

var toolsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "allow"}, {Name: "deny"}, {Name: "read_only"}},
}

// role decodes a role block; declared maps the role names seen so far to their blocks.
func (d *decoder) role(blk *hcl.Block, declared map[string]hcl.Range) Role {
	r := Role{Name: blk.Labels[0], Pos: position(blk.DefRange)}
	switch first, dup := declared[r.Name]; {
	case r.Name == RootRole:
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
	if blk := d.onlyBlock(content.Blocks); blk != nil {
		var attrs hcl.Attributes
		r.Tools, attrs = d.tools(blk.Body)
		attr(d, attrs, "read_only", &r.ReadOnlyTools, asIs)
	}
	return r
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
