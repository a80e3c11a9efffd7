package host

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/tokencount"
	"github.com/toolhost/toolhost/internal/toolsearch"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// ToolDefinition is a tool as a model sees it, in the function-calling
// format of OpenAI-compatible chat APIs: {"type": "function", "function":
// {name, description, parameters}}.
type ToolDefinition struct {
	Type     string   `json:"type"` // always "function"
	Function Function `json:"function"`
}

// Function is the function part of a [ToolDefinition].
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Title, Annotations and OutputSchema are an MCP server's, for our MCP
	// front; a model's function definition has no place for them.
	Title        string          `json:"-"`
	Annotations  json.RawMessage `json:"-"`
	OutputSchema json.RawMessage `json:"-"`
}

// ToolMeta says where a tool comes from: its group, the source that provides
// it, and whether it is optional.
type ToolMeta struct {
	Group    string     `json:"group"`
	Plugin   string     `json:"plugin"` // the config block's name, or the runtime group's id
	Kind     SourceKind `json:"kind"`
	Optional bool       `json:"optional"`
	// Conversation says the tool works on a conversation the runtime holds
	// ([toolhost.ToolSpec.NeedsConversation]).
	Conversation bool `json:"conversation,omitempty"`
	// Title and Annotations (MCP's hints, a JSON object) are the tool's, when
	// it has them.
	Title       string           `json:"title,omitempty"`
	Annotations *json.RawMessage `json:"annotations,omitempty"`
}

// toolMeta is the ToolMeta of g's tool.
func toolMeta(g *Group, spec toolhost.ToolSpec) ToolMeta {
	m := ToolMeta{Group: g.Spec.ID, Plugin: g.SourceName, Kind: g.Kind, Optional: spec.Optional, Conversation: spec.NeedsConversation, Title: spec.Title}
	if len(spec.Annotations) > 0 {
		m.Annotations = &spec.Annotations
	}
	return m
}

// view is the compiled policy of one role: exactly the tools its agents may
// see and call, built once per change of groups or roles. Listing reads defs
// and calling reads tools, so the two cannot disagree.
type view struct {
	snap   *snapshot // what it was compiled from
	rev    uint64
	role   string   // "" for callers without a role
	groups []string // the groups it draws from, sorted
	defs   []ToolDefinition
	tools  map[string]viewTool
	// eager are the definitions an agent carries before loading any: defs
	// but the tools of the role's deferred groups, which lazy names (nil
	// when the role defers nothing; eager is then defs).
	eager []ToolDefinition
	lazy  map[string]bool
	// rules are the role's rules; nil when it has none.
	rules *roleRules
	// items are the prompts and resources of its groups (items.go); nil
	// when they offer none.
	items *viewItems
	// limits are the role's call limits.
	limits []rules.Limit

	// meta and deferred are filled on first use (details).
	detailOnce sync.Once
	meta       map[string]ToolMeta
	deferred   []string

	tokensOnce sync.Once
	tokens     int
	eagerOnce  sync.Once
	eagerToks  int
	// search ranks the tools of the deferred groups for find_tools, built
	// on first use (SearchTools).
	searchOnce sync.Once
	search     *toolsearch.Index
}

type viewTool struct {
	group *Group
	spec  toolhost.ToolSpec
}

// compile builds the view of a role (nil: a caller without a role, such as
// an operator's CLI call) over a snapshot of the groups. The root role gets
// org_management only; a role without groups gets every group. Optional tools
// need an allow entry; a deny entry hides any tool; deny wins. A read-only
// role (store.Role.ReadOnlyTools) keeps only the tools whose readOnlyHint
// says so. A role with deferred groups gets tool_search too, and only
// such a role does; a read-only one gets all of it, since tool_search is not
// one of its groups but how it reaches them (load_tools changes only which
// definitions the agent's own requests carry). A tool the role's rules deny
// whatever its arguments is left out; one they refuse or send for approval
// for some arguments says so in its description. The code group
// ([CodeGroup]) is only a role's that names it (not every group's, nor
// root's), read-only or not, since a script calls only the role's other
// tools; its run_script's description lists those tools (describeCode).
func compile(s *snapshot, rev uint64, role *store.Role, global config.ToolPolicy) *view {
	v := &view{snap: s, rev: rev, tools: map[string]viewTool{}}
	ids, allow, deny := s.ids, global.Allow, global.Deny
	var deferred []string
	readOnly := false
	if role != nil {
		v.role = role.Name
		allow = append(slices.Clip(allow), role.Allow...)
		deny = append(slices.Clip(deny), role.Deny...)
		readOnly = role.ReadOnlyTools
		switch {
		case role.Name == store.RootRole:
			ids = []string{"org_management"}
		case len(role.ToolGroups) > 0:
			ids = slices.Sorted(slices.Values(role.ToolGroups))
		}
		if role.Name != store.RootRole {
			deferred = role.Deferred
		}
		v.rules, v.limits = compileRules(role.Rules), role.Limits
	}
	namesCode := role != nil && slices.Contains(role.ToolGroups, CodeGroup)
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == ToolSearchGroup || id == CodeGroup && !namesCode })
	if len(deferred) > 0 {
		ids = append(ids, ToolSearchGroup)
		slices.Sort(ids)
	}
	for _, id := range ids {
		g, ok := s.groups[id]
		if !ok || s.blocked[id] {
			continue
		}
		for _, t := range g.Spec.Tools {
			if s.owner[t.Name] != g || mentions(deny, t.Name, g) || (t.Optional && !mentions(allow, t.Name, g)) ||
				(readOnly && id != ToolSearchGroup && id != CodeGroup && !readOnlyHint(t)) {
				continue
			}
			listed, notes := v.rules.listing(t.Name, id)
			if !listed {
				continue
			}
			v.add(g, t)
			if len(notes) > 0 {
				f := &v.defs[len(v.defs)-1].Function
				f.Description = describeRules(f.Description, notes)
			}
		}
		v.addItems(g, deny)
	}
	v.eager = v.defs
	if len(deferred) > 0 {
		v.eager, v.lazy = nil, map[string]bool{}
		for _, d := range v.defs {
			if slices.Contains(deferred, v.tools[d.Function.Name].group.Spec.ID) {
				v.lazy[d.Function.Name] = true
			} else {
				v.eager = append(v.eager, d)
			}
		}
		v.describeCode(v.eager)
	}
	v.describeCode(v.defs)
	return v
}

// everyTool builds the view of every served tool, whatever the policy: what
// a model would see without roles, to compare token costs against.
// tool_search, which only roles deferring groups get, and code, which only
// roles naming it get, are not among them.
func everyTool(s *snapshot) *view {
	v := &view{snap: s, role: "*", tools: map[string]viewTool{}}
	for _, id := range s.ids {
		if id == ToolSearchGroup || id == CodeGroup {
			continue
		}
		g := s.groups[id]
		for _, t := range g.Spec.Tools {
			if s.owner[t.Name] == g {
				v.add(g, t)
			}
		}
	}
	return v
}

func (v *view) add(g *Group, t toolhost.ToolSpec) {
	if len(v.groups) == 0 || v.groups[len(v.groups)-1] != g.Spec.ID {
		v.groups = append(v.groups, g.Spec.ID)
	}
	v.tools[t.Name] = viewTool{group: g, spec: t}
	v.defs = append(v.defs, ToolDefinition{Type: "function", Function: Function{Name: t.Name, Description: t.Description, Parameters: t.InputSchema,
		Title: t.Title, Annotations: t.Annotations, OutputSchema: t.OutputSchema}})
}

// readOnlyHint reports whether the tool's annotations say readOnlyHint:
// true: the module's own word, or the operator's, whose tool block
// (read_only) replaced it at registration (withSettings). No annotations, a
// false or absent hint, or annotations that are not an object with a boolean
// readOnlyHint, are not read-only. A module's word is taken here, unlike for
// approvals (trustedReadOnly): a role that names a group already trusts the
// module's code with its calls, and a lying hint can be corrected by a tool
// block; an agent, whom a read-only role bounds, can change neither.
func readOnlyHint(t toolhost.ToolSpec) bool {
	var h struct {
		ReadOnly bool `json:"readOnlyHint"`
	}
	return json.Unmarshal(t.Annotations, &h) == nil && h.ReadOnly
}

// mentions reports whether a policy list names the tool, its group, its plugin,
// or (for a plugin's tool) "group:plugins".
func mentions(list []string, tool string, g *Group) bool {
	for _, it := range list {
		if it == tool || it == g.Spec.ID || it == g.SourceName || (it == "group:plugins" && !g.Kind.core()) {
			return true
		}
	}
	return false
}

// view returns the compiled view of a role, from the cache when neither the
// groups nor the roles have changed since it was built.
func (h *Host) view(role *store.Role, rev uint64) *view {
	key := ""
	if role != nil {
		key = role.Name
	}
	s := h.mgr.snap.Load()
	if x, ok := h.views.Load(key); ok {
		if v := x.(*view); v.snap == s && v.rev == rev {
			return v
		}
	}
	v := compile(s, rev, role, h.cfg.Tools)
	h.views.Store(key, v)
	return v
}

// callerView returns the view that governs a call context: its agent's role,
// else its role, else the view of a caller without a role.
func (h *Host) callerView(cc *toolhost.CallContext) (*view, error) {
	switch {
	case cc.AgentID != "":
		r, rev, ok := h.dir.agentRole(cc.AgentID)
		if !ok || r == nil {
			return nil, toolhost.Errorf(toolhost.CodeValidation, "unknown agent %q", cc.AgentID)
		}
		return h.view(r, rev), nil
	case cc.Role != "":
		r, rev := h.dir.role(cc.Role)
		if r == nil {
			return nil, noRole(cc.Role)
		}
		return h.view(r, rev), nil
	}
	_, rev := h.dir.role("")
	return h.view(nil, rev), nil
}

// ToolQuery says whose tools [Host.Tools] lists, and how much it tells.
type ToolQuery struct {
	// Agent lists what an agent is offered, what to put in its model
	// requests or list to its MCP session: its role's tools, but for those
	// of the role's deferred groups that it has not loaded (it may call them
	// all the same; find_tools and load_tools bring them in).
	Agent string
	// Unloaded keeps an agent's deferred tools that it has not loaded in
	// the list: every tool its role may call.
	Unloaded bool
	// Role lists what a role's agents may call. With neither Agent nor
	// Role, the list is that of callers without a role.
	Role string
	// Preview lists what a role with exactly Groups (none: every group)
	// would see under the global policy, without storing any role: what a
	// role editor shows before saving. Unknown group ids are refused.
	Preview bool
	Groups  []string
	// Tokens counts the tokens of the role's list, and of every registered
	// tool for comparison (o200k_base), which loads the tokenizer's tables
	// on first use.
	Tokens bool
}

// ToolList is what [Host.Tools] lists, as GET /api/roles/{name}/tools and
// `toolhost tools` show it. Its slices and maps are shared between callers:
// do not modify them.
type ToolList struct {
	// Role is the role whose list it is; "" for callers without one and
	// for a preview.
	Role string `json:"role"`
	// Groups are the tool groups the list draws from, sorted.
	Groups []string `json:"groups"`
	// Tools are the definitions, in a stable order.
	Tools []ToolDefinition `json:"tools"`
	// Meta says where each tool of the role comes from, by name.
	Meta map[string]ToolMeta `json:"meta"`
	// Deferred names the tools of the role's deferred groups, which an
	// agent loads on demand; Loaded, for an agent, those it has loaded.
	Deferred []string        `json:"deferred,omitempty"`
	Loaded   map[string]bool `json:"loaded,omitempty"`
	// Prompts, Resources and ResourceTemplates are the role's groups' (MCP
	// servers'), but for those its rules deny whatever the arguments: an
	// agent of the role gets and reads them through [Host.Call], calling
	// the MCP method ([toolhost.MethodPromptsGet] and the others).
	// Completions and Subscribe say whether one of those groups answers
	// [toolhost.MethodComplete] and takes [toolhost.MethodSubscribe].
	Prompts           []toolhost.PromptSpec           `json:"prompts,omitempty"`
	Resources         []toolhost.ResourceSpec         `json:"resources,omitempty"`
	ResourceTemplates []toolhost.ResourceTemplateSpec `json:"resourceTemplates,omitempty"`
	Completions       bool                            `json:"completions,omitempty"`
	Subscribe         bool                            `json:"subscribe,omitempty"`
	// With [ToolQuery.Tokens]: Tokens counts the tokens of the role's tools
	// encoded as JSON, EagerTokens those an agent's requests carry before it
	// loads any deferred tool (Tokens when the role defers nothing), and
	// AllTokens those of every registered tool, AllTools of them.
	Tokens      int `json:"tokens"`
	EagerTokens int `json:"eagerTokens"`
	AllTokens   int `json:"allTokens"`
	AllTools    int `json:"allTools"`
}

// Tools lists the tools an agent or a role is offered, or would be (see
// [ToolQuery]). An unknown agent or role is refused with validation.
func (h *Host) Tools(q ToolQuery) (ToolList, error) {
	var v *view
	if q.Preview {
		if err := h.checkGroups("groups", q.Groups); err != nil {
			return ToolList{}, err
		}
		v = compile(h.mgr.snap.Load(), 0, &store.Role{ToolGroups: q.Groups}, h.cfg.Tools)
	} else {
		var err error
		if v, err = h.callerView(&toolhost.CallContext{AgentID: q.Agent, Role: q.Role}); err != nil {
			return ToolList{}, err
		}
	}
	v.detailOnce.Do(v.details)
	out := ToolList{Role: v.role, Groups: v.groups, Tools: v.defs, Meta: v.meta, Deferred: v.deferred}
	v.fillItems(&out)
	if q.Agent != "" && v.lazy != nil {
		loaded, err := h.loadedOf(q.Agent)
		if err != nil {
			return ToolList{}, err
		}
		out.Loaded = loaded
		if !q.Unloaded {
			out.Tools = v.offered(loaded)
		}
	}
	if q.Tokens {
		out.Tokens, out.EagerTokens = v.tokenCount(), v.eagerTokenCount()
		all, ok := h.views.Load(allToolsKey)
		if !ok || all.(*view).snap != v.snap {
			all = everyTool(v.snap)
			h.views.Store(allToolsKey, all)
		}
		out.AllTokens, out.AllTools = all.(*view).tokenCount(), len(all.(*view).defs)
	}
	return out, nil
}

// allToolsKey caches everyTool's view beside the roles' views; no role name
// can contain a NUL.
const allToolsKey = "\x00all"

// details fills the view's meta and deferred, once.
func (v *view) details() {
	v.meta = make(map[string]ToolMeta, len(v.tools))
	for name, t := range v.tools {
		v.meta[name] = toolMeta(t.group, t.spec)
	}
	for _, d := range v.defs {
		if v.lazy[d.Function.Name] {
			v.deferred = append(v.deferred, d.Function.Name)
		}
	}
}

// offered is what an agent that loaded these of the view's deferred tools
// is offered: the eager definitions and those, run_script's description
// naming those it may call.
func (v *view) offered(loaded map[string]bool) []ToolDefinition {
	if len(loaded) == 0 {
		return v.eager
	}
	out := make([]ToolDefinition, 0, len(v.eager)+len(loaded))
	for _, d := range v.defs {
		if !v.lazy[d.Function.Name] || loaded[d.Function.Name] {
			out = append(out, d)
		}
	}
	v.describeCode(out)
	return out
}

// tokenCount is the token count of the view's definitions as JSON, counted
// once per view.
func (v *view) tokenCount() int {
	v.tokensOnce.Do(func() { v.tokens = tokencount.JSON(v.defs) })
	return v.tokens
}

// eagerTokenCount counts the tokens of the definitions an agent of the role
// starts with, before loading any deferred tool.
func (v *view) eagerTokenCount() int {
	v.eagerOnce.Do(func() { v.eagerToks = tokencount.JSON(v.eager) })
	return v.eagerToks
}

// Prompt builds the system prompt for a role: its own prompt, then the
// tool groups it works with. A role without configured
// groups is told every group is available, with no hint of restriction; a
// read-only role is told it only reads.
func (rs Roles) Prompt(role string) (string, error) {
	h := rs.h
	r, rev := h.dir.role(role)
	if r == nil {
		return "", noRole(role)
	}
	v := h.view(r, rev)
	var b strings.Builder
	if r.Prompt != "" {
		b.WriteString(strings.TrimSpace(r.Prompt))
		b.WriteString("\n\n")
	}
	if r.Name == store.RootRole || len(r.ToolGroups) > 0 {
		b.WriteString("Your role works with these tool groups; their tools are the ones you can call:\n")
	} else {
		b.WriteString("Every tool group is available to you:\n")
	}
	for _, id := range v.groups {
		fmt.Fprintf(&b, "- %s: %s", id, v.snap.groups[id].Spec.Description)
		if slices.Contains(r.Deferred, id) {
			b.WriteString(" (loaded on demand)")
		}
		b.WriteString("\n")
	}
	if len(v.groups) == 0 {
		b.WriteString("- (none is running at the moment)\n")
	}
	if r.ReadOnlyTools {
		b.WriteString("\nYour role only reads: of these groups' tools you have those that change nothing.\n")
	}
	if v.lazy != nil {
		b.WriteString("\nThe tools of the groups loaded on demand are not among your tools until you load them: find them with find_tools, then load_tools.\n")
	}
	return b.String(), nil
}
