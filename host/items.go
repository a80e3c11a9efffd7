package host

// The prompts, resources and resource templates of MCP servers' groups
// (toolhost.GroupSpec), offered to a role through its groups as tools are.
// A prompt name, a resource URI and a template belong to one group, the
// first to claim it (as a tool name does: core groups first, then by
// registration); a later group's is refused, with a diagnostic. A role
// lists the items of its groups (ToolList), and uses them through calls
// named after the MCP methods (toolhost.IsItemMethod), which go through
// the pipeline as any call: the item must be one of the role's groups'
// (a URI that no group lists may be read when it matches a template of
// one; an unsubscription of a URI the role no longer offers goes to the
// group that owns it, to end the caller's own subscription there), its
// arguments are validated, the role's rules and limits apply
// (a rule may name "resources/read" and test args.uri), and so do
// approvals, redaction and events.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/toolhost/toolhost"
	"github.com/yosida95/uritemplate/v3"
)

// itemSchemas are the input schemas of the item methods' calls: their MCP
// params, bounded.
var itemSchemas = map[string]string{
	toolhost.MethodPromptsGet: `{"type":"object","required":["name"],"additionalProperties":false,"properties":{
		"name":{"type":"string","maxLength":64},
		"arguments":{"type":"object","additionalProperties":{"type":"string"}}}}`,
	toolhost.MethodResourcesRead: uriSchema,
	toolhost.MethodSubscribe:     uriSchema,
	toolhost.MethodUnsubscribe:   uriSchema,
	toolhost.MethodComplete: `{"type":"object","required":["ref","argument"],"additionalProperties":false,"properties":{
		"ref":{"type":"object","required":["type"],"properties":{"type":{"enum":["ref/prompt","ref/resource"]},
			"name":{"type":"string","maxLength":64},"uri":{"type":"string","maxLength":4096}}},
		"argument":{"type":"object","required":["name","value"],"properties":{"name":{"type":"string"},"value":{"type":"string"}}},
		"context":{"type":"object","properties":{"arguments":{"type":"object","additionalProperties":{"type":"string"}}}}}}`,
}

const uriSchema = `{"type":"object","required":["uri"],"additionalProperties":false,"properties":{"uri":{"type":"string","minLength":1,"maxLength":4096}}}`

// itemTools are the item methods as the specs their calls run under.
var itemTools = sync.OnceValue(func() map[string]toolhost.ToolSpec {
	out := map[string]toolhost.ToolSpec{}
	for method, schema := range itemSchemas {
		out[method] = toolhost.ToolSpec{Name: method, Description: "MCP " + method, InputSchema: json.RawMessage(schema)}
	}
	return out
})

// itemChecks validate the item methods' arguments.
var itemChecks = sync.OnceValue(func() map[string]*argCheck {
	checks, err := compileChecks(&toolhost.GroupSpec{Tools: slices.Collect(maps.Values(itemTools()))})
	if err != nil {
		panic(err) // the schemas above are ours
	}
	return checks
})

// hasItems reports whether a group offers prompts or resources.
func hasItems(spec *toolhost.GroupSpec) bool {
	return len(spec.Prompts)+len(spec.Resources)+len(spec.ResourceTemplates) > 0
}

// prepareItems readies a group's items for the manager: its item methods'
// checks, its templates compiled.
func (g *Group) prepareItems() error {
	if !hasItems(&g.Spec) {
		return nil
	}
	maps.Copy(g.checks, itemChecks())
	g.templates = make([]*uritemplate.Template, len(g.Spec.ResourceTemplates))
	for i, t := range g.Spec.ResourceTemplates {
		tmpl, err := uritemplate.New(t.URITemplate)
		if err != nil {
			return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "group %s: resource template %q: %v", g.Spec.ID, t.URITemplate, err)
		}
		g.templates[i] = tmpl
	}
	return nil
}

// claimItems gives g the prompt names, URIs and templates no group before
// it claimed, and reports the others as diagnostics. s is being built.
func (s *snapshot) claimItems(g *Group) {
	claim := func(owners map[string]*Group, kind, key string) {
		if winner, taken := owners[key]; taken {
			s.diags = append(s.diags, Diagnostic{Level: "error", Plugin: g.SourceName, Group: g.Spec.ID, winner: winner.Spec.ID,
				Message: fmt.Sprintf("%s conflict (%s): %s is already offered by group %s; skipped", kind, g.SourceName, key, winner.Spec.ID)})
			return
		}
		owners[key] = g
	}
	for _, p := range g.Spec.Prompts {
		claim(s.prompts, "prompt name", p.Name)
	}
	for _, r := range g.Spec.Resources {
		claim(s.resources, "resource URI", r.URI)
	}
	for _, t := range g.Spec.ResourceTemplates {
		claim(s.templates, "resource template", t.URITemplate)
	}
}

// viewItems are the items of a role's groups, as its view holds them.
type viewItems struct {
	// The lists, of the groups whose item methods the role's rules do not
	// deny whatever the arguments.
	prompts     []toolhost.PromptSpec
	resources   []toolhost.ResourceSpec
	templates   []toolhost.ResourceTemplateSpec
	completions bool // a listed group answers completion/complete
	subscribe   bool // a listed group takes resources/subscribe

	// What the role's groups own, whatever the rules (a call of an item a
	// rule hides names the rule).
	promptOf   map[string]*Group
	resourceOf map[string]*Group
	templateOf map[string]*Group
	matchers   []templateMatch // in the order the groups come
}

// templateMatch is one of a view's templates.
type templateMatch struct {
	group *Group
	tmpl  *uritemplate.Template
}

// addItems adds the items g owns in the snapshot to the view, but for the
// methods its deny list names (by method, group or plugin): what the
// role's rules hide whatever the arguments is kept for calls but not
// listed.
func (v *view) addItems(g *Group, deny []string) {
	if !hasItems(&g.Spec) {
		return
	}
	it := v.items
	if it == nil {
		it = &viewItems{promptOf: map[string]*Group{}, resourceOf: map[string]*Group{}, templateOf: map[string]*Group{}}
		v.items = it
	}
	id := g.Spec.ID
	allowed := func(method string) bool {
		if mentions(deny, method, g) {
			return false
		}
		listed, _ := v.rules.listing(method, id)
		return listed
	}
	if allowed(toolhost.MethodComplete) && g.Spec.Completions {
		it.completions = true
	}
	if allowed(toolhost.MethodSubscribe) && g.Spec.Subscribe {
		it.subscribe = true
	}
	allowed(toolhost.MethodUnsubscribe)
	prompts, reads := !mentions(deny, toolhost.MethodPromptsGet, g), !mentions(deny, toolhost.MethodResourcesRead, g)
	listPrompts, listReads := allowed(toolhost.MethodPromptsGet), allowed(toolhost.MethodResourcesRead)
	for _, p := range g.Spec.Prompts {
		if prompts && v.snap.prompts[p.Name] == g {
			it.promptOf[p.Name] = g
			if listPrompts {
				it.prompts = append(it.prompts, p)
			}
		}
	}
	if !reads {
		return
	}
	for _, r := range g.Spec.Resources {
		if v.snap.resources[r.URI] == g {
			it.resourceOf[r.URI] = g
			if listReads {
				it.resources = append(it.resources, r)
			}
		}
	}
	for i, t := range g.Spec.ResourceTemplates {
		if v.snap.templates[t.URITemplate] == g {
			it.templateOf[t.URITemplate] = g
			it.matchers = append(it.matchers, templateMatch{g, g.templates[i]})
			if listReads {
				it.templates = append(it.templates, t)
			}
		}
	}
}

// itemArgs are what an item call's arguments name.
type itemArgs struct {
	Name string `json:"name"`
	URI  string `json:"uri"`
	Ref  *struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	} `json:"ref"`
}

// item finds the group of an item call in the caller's view: the group
// that owns the prompt or the resource its arguments name (for a URI no
// group lists, the first of the role's groups with a template it
// matches), which must offer what the method needs. The call then runs
// under the method's spec.
func (c *call) item(v *view) (viewTool, error) {
	method := c.req.Tool
	var a itemArgs
	_ = json.Unmarshal(c.req.Arguments, &a) // validation, later, says what is wrong with them
	var g *Group
	var what string
	it := v.items
	if it == nil {
		it = &viewItems{}
	}
	switch method {
	case toolhost.MethodPromptsGet:
		g, what = it.promptOf[a.Name], fmt.Sprintf("prompt %q", a.Name)
	case toolhost.MethodComplete:
		switch {
		case a.Ref == nil:
			return viewTool{}, toolhost.Errorf(toolhost.CodeValidation, "%s: ref is required", method)
		case a.Ref.Type == "ref/prompt":
			g, what = it.promptOf[a.Ref.Name], fmt.Sprintf("prompt %q", a.Ref.Name)
		default:
			g, what = cmp.Or(it.templateOf[a.Ref.URI], it.resourceOf[a.Ref.URI]), fmt.Sprintf("resource %q", a.Ref.URI)
		}
	default:
		g, what = it.resourceOf[a.URI], fmt.Sprintf("resource %q", a.URI)
		if g == nil && v.snap.resources[a.URI] == nil {
			g = it.match(a.URI)
		}
		if g == nil && method == toolhost.MethodUnsubscribe {
			// A subscription made while the role offered the resource
			// ends where it was made: a module ends the caller's own.
			g = v.snap.uriOwner(a.URI)
		}
	}
	if g == nil {
		return viewTool{}, c.itemUnavailable(v, &a, what)
	}
	if i, ok := v.rules.hiddenBy(ruleKey(method, g.Spec.ID)); ok {
		return viewTool{}, c.hiddenByRule(v.rules, i)
	}
	switch {
	case method == toolhost.MethodComplete && !g.Spec.Completions,
		(method == toolhost.MethodSubscribe || method == toolhost.MethodUnsubscribe) && !g.Spec.Subscribe:
		return viewTool{}, toolhost.Errorf(toolhost.CodeToolNotAvailable, "group %s does not offer %s", g.Spec.ID, method)
	}
	return viewTool{group: g, spec: itemTools()[method]}, nil
}

// match is the group of the first of the view's templates that uri
// matches; nil when none does.
func (it *viewItems) match(uri string) *Group {
	for _, m := range it.matchers {
		if m.tmpl.Regexp().MatchString(uri) {
			return m.group
		}
	}
	return nil
}

// uriOwner is the group a read of uri goes to whatever the role: the one
// that lists it, else the first (by id) with a template it matches; nil
// for none.
func (s *snapshot) uriOwner(uri string) *Group {
	if g := s.resources[uri]; g != nil {
		return g
	}
	for _, id := range s.ids {
		g := s.groups[id]
		for i, t := range g.Spec.ResourceTemplates {
			if s.templates[t.URITemplate] == g && g.templates[i].Regexp().MatchString(uri) {
				return g
			}
		}
	}
	return nil
}

// itemUnavailable is the error of an item call whose item the caller's
// role does not have: tool_not_available when another group offers it,
// unknown_tool when none does.
func (c *call) itemUnavailable(v *view, a *itemArgs, what string) error {
	s := v.snap
	if s.prompts[a.Name] != nil && c.req.Tool == toolhost.MethodPromptsGet || s.resources[a.URI] != nil && a.URI != "" {
		if v.role == "" {
			return toolhost.Errorf(toolhost.CodeToolNotAvailable, "%s: %s is not available: the tools policy hides it", c.req.Tool, what)
		}
		return toolhost.Errorf(toolhost.CodeToolNotAvailable, "%s: %s is not available to role %q", c.req.Tool, what, v.role)
	}
	return toolhost.Errorf(toolhost.CodeUnknownTool, "%s: no group of role %q offers %s", c.req.Tool, v.role, what)
}

// ruleKey is what a role's rules are found under for a call of tool to
// group: the tool's name, or for an item method the method and the group,
// since one method reaches every group.
func ruleKey(tool, group string) string {
	if toolhost.IsItemMethod(tool) {
		return tool + "\x00" + group
	}
	return tool
}

// fillItems puts the view's items in a list.
func (v *view) fillItems(out *ToolList) {
	if it := v.items; it != nil {
		out.Prompts, out.Resources, out.ResourceTemplates = it.prompts, it.resources, it.templates
		out.Completions, out.Subscribe = it.completions, it.subscribe
	}
}

// offeredWatcher passes a subscribed resource's updates on while the role
// still offers the resource through the group it was subscribed through:
// the role's view, as it is when the update comes, must send a read of
// the URI to that group (a role edited since, a rule that hides reads, or
// a group gone stops them). It is comparable, one per role and group, so
// that a module tells each role's watcher once.
type offeredWatcher struct {
	h     *Host
	role  string
	group string
	w     toolhost.ResourceWatcher
}

// ResourceUpdated passes the update on when the role offers the resource.
func (o offeredWatcher) ResourceUpdated(uri string) {
	r, rev := o.h.dir.role(o.role)
	if r == nil && o.role != "" {
		return
	}
	args, err := json.Marshal(map[string]string{"uri": uri})
	if err != nil {
		return
	}
	c := &call{h: o.h, req: toolhost.CallRequest{Tool: toolhost.MethodResourcesRead, Arguments: args}}
	if t, err := c.item(o.h.view(r, rev)); err != nil || t.group.Spec.ID != o.group {
		return
	}
	o.w.ResourceUpdated(uri)
}
