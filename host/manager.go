package host

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcpoffer"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/yosida95/uritemplate/v3"
)

// SourceKind says what provides a group.
type SourceKind string

// The kinds of group source.
const (
	SourcePlugin  SourceKind = "plugin"  // a third-party plugin block
	SourceBuiltin SourceKind = "builtin" // a first-party module's builtin block
	SourceRuntime SourceKind = "runtime" // registered in-process through [Modules.Register]
	SourceMCP     SourceKind = "mcp"     // an MCP server's mcp_server block
)

// core reports whether the kind provides core tools: builtin and runtime
// groups, which may use reserved ids and win tool-name conflicts over plugins.
func (k SourceKind) core() bool { return k == SourceBuiltin || k == SourceRuntime }

// Group is a registered tool group.
type Group struct {
	// Spec is the group as its provider reported it.
	Spec toolhost.GroupSpec
	// Kind says what provides the group.
	Kind SourceKind
	// SourceName is the config block's name, or the group id for runtime groups.
	SourceName string
	// Provider serves the group's calls.
	Provider toolhost.Provider

	seq     uint64               // registration order; the earliest group owning a tool name keeps it
	tools   map[string]int       // tool name → index in Spec.Tools
	checks  map[string]*argCheck // tool name → its argument validation
	conf    *config.Plugin       // the group's config block; nil for runtime groups
	refused []string             // tools its source could not offer, and why: diagnostics
	mcpOut  map[string]string    // tool name → why MCP clients cannot be offered it
	// templates are its resource templates compiled, as Spec lists them
	// (items.go).
	templates []*uritemplate.Template
}

// tool returns the spec of one of the group's tools.
func (g *Group) tool(name string) (toolhost.ToolSpec, bool) {
	i, ok := g.tools[name]
	if !ok {
		return toolhost.ToolSpec{}, false
	}
	return g.Spec.Tools[i], true
}

// manager is the set of registered groups and the index from tool name to
// group. It is safe for concurrent use; readers see an
// immutable snapshot and never wait on writers or on plugins.
type manager struct {
	mu   sync.Mutex // serialises writers
	seq  uint64
	snap atomic.Pointer[snapshot]
}

// snapshot is one immutable state of the manager.
type snapshot struct {
	groups  map[string]*Group
	ids     []string          // sorted
	owner   map[string]*Group // tool name → the group that serves it
	blocked map[string]bool   // plugin groups whose id is a core tool's name
	diags   []Diagnostic      // the conflicts found
	// prompts, resources and templates map a prompt name, a resource URI
	// and a URI template to the group that offers it (items.go).
	prompts, resources, templates map[string]*Group
}

// Diagnostic is a problem with a group that did not stop the host: a tool
// name two groups report, or a plugin blocked for taking a core tool's name.
type Diagnostic struct {
	Level   string `json:"level"`  // "error" or "warning"
	Plugin  string `json:"plugin"` // the source: a config block's name, or a runtime group's id
	Group   string `json:"group,omitempty"`
	Message string `json:"message"`

	winner string // the group that keeps a conflicting tool name, for its log line
}

// newManager returns an empty manager.
func newManager() *manager {
	m := &manager{}
	m.snap.Store(newSnapshot(map[string]*Group{}))
	return m
}

// Register adds g. The spec must pass protocol.ValidateGroup (else
// invalid_group_def), and a reserved id is refused (reserved_group_id) unless
// g comes from a builtin block or the runtime. A group already registered under
// the same id is replaced and returned, for the caller to warn about
// (duplicate_group_id is a warning, not a refusal).
//
// Conflicts are resolved so that a plugin never takes a core tool's name,
// each with a [Diagnostic]: a tool name reported by two groups is served by a
// core (builtin or runtime) group over a plugin, else by the group registered
// first; the other group's tool is shadowed until the winner goes away. A
// plugin group whose id equals a core tool's name is blocked whole.
func (m *manager) Register(g *Group) (replaced *Group, err error) {
	return m.put(g, nil)
}

// Replace puts g in old's place in one step, so that no lookup meanwhile
// finds neither (an MCP server's tools/list_changed updates its group so).
// It reports false, registering nothing, when old is no longer the group
// registered under its id. g is checked as [manager.Register] checks it.
func (m *manager) Replace(old, g *Group) (bool, error) {
	replaced, err := m.put(g, old)
	return replaced != nil, err
}

// put registers g, in place of only when only is not nil (and only if
// only is still registered), returning the group it replaced.
func (m *manager) put(g *Group, only *Group) (replaced *Group, err error) {
	if err := protocol.ValidateGroup(&g.Spec); err != nil {
		return nil, err
	}
	if protocol.IsReserved(g.Spec.ID) && !g.Kind.core() {
		return nil, toolhost.Errorf(toolhost.CodeReservedGroupID, "group id %q is reserved for first-party modules and the runtime", g.Spec.ID)
	}
	checks, err := compileChecks(&g.Spec)
	if err != nil {
		return nil, err
	}
	g.checks = checks
	if err := g.prepareItems(); err != nil {
		return nil, err
	}
	g.mcpOut = mcpoffer.Refusals(&g.Spec)
	g.tools = make(map[string]int, len(g.Spec.Tools))
	for i, t := range g.Spec.Tools {
		g.tools[t.Name] = i
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	g.seq = m.seq
	old := m.snap.Load()
	if only != nil && old.groups[only.Spec.ID] != only {
		return nil, nil
	}
	groups := make(map[string]*Group, len(old.groups)+1)
	for id, x := range old.groups {
		groups[id] = x
	}
	if only != nil {
		delete(groups, only.Spec.ID)
	}
	replaced = cmp.Or(only, groups[g.Spec.ID])
	groups[g.Spec.ID] = g
	m.snap.Store(newSnapshot(groups))
	return replaced, nil
}

// Unregister removes the group with the id and reports whether there was one.
func (m *manager) Unregister(id string) bool {
	return m.remove(id, nil)
}

// UnregisterGroup removes g if it is still the group registered under its id,
// so a plugin that exits does not remove a group that has replaced its own.
func (m *manager) UnregisterGroup(g *Group) bool {
	return m.remove(g.Spec.ID, g)
}

func (m *manager) remove(id string, only *Group) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.snap.Load()
	cur, ok := old.groups[id]
	if !ok || (only != nil && cur != only) {
		return false
	}
	groups := make(map[string]*Group, len(old.groups))
	for gid, x := range old.groups {
		if gid != id {
			groups[gid] = x
		}
	}
	m.snap.Store(newSnapshot(groups))
	return true
}

func newSnapshot(groups map[string]*Group) *snapshot {
	s := &snapshot{groups: groups, owner: map[string]*Group{}, blocked: map[string]bool{},
		prompts: map[string]*Group{}, resources: map[string]*Group{}, templates: map[string]*Group{}}
	ordered := make([]*Group, 0, len(groups))
	coreTools := map[string]bool{}
	for id, g := range groups {
		s.ids = append(s.ids, id)
		ordered = append(ordered, g)
		if g.Kind.core() {
			for _, t := range g.Spec.Tools {
				coreTools[t.Name] = true
			}
		}
	}
	slices.Sort(s.ids)
	// Core groups first, then by registration: the first to claim a name keeps it.
	slices.SortFunc(ordered, func(a, b *Group) int {
		if a.Kind.core() != b.Kind.core() {
			if a.Kind.core() {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, g := range ordered {
		for _, why := range g.refused {
			s.diags = append(s.diags, Diagnostic{Level: "error", Plugin: g.SourceName, Group: g.Spec.ID, Message: why})
		}
		if !g.Kind.core() && coreTools[g.Spec.ID] {
			s.blocked[g.Spec.ID] = true
			s.diags = append(s.diags, Diagnostic{Level: "error", Plugin: g.SourceName, Group: g.Spec.ID,
				Message: fmt.Sprintf("plugin %s blocked: its id %q is the name of a core tool", g.SourceName, g.Spec.ID)})
			continue
		}
		s.claimItems(g)
		for _, t := range g.Spec.Tools {
			if winner, taken := s.owner[t.Name]; taken {
				s.diags = append(s.diags, Diagnostic{Level: "error", Plugin: g.SourceName, Group: g.Spec.ID, winner: winner.Spec.ID,
					Message: fmt.Sprintf("plugin tool name conflict (%s): %s is already provided by group %s; skipped", g.SourceName, t.Name, winner.Spec.ID)})
				continue
			}
			s.owner[t.Name] = g
			if why, ok := g.mcpOut[t.Name]; ok {
				s.diags = append(s.diags, Diagnostic{Level: "error", Plugin: g.SourceName, Group: g.Spec.ID,
					Message: fmt.Sprintf("tool %s of group %s cannot be offered to MCP clients: %s", t.Name, g.Spec.ID, why)})
			}
		}
	}
	return s
}

// Get returns the group with the id.
func (m *manager) Get(id string) (*Group, bool) {
	g, ok := m.snap.Load().groups[id]
	return g, ok
}

// ToolDefinitions returns the tools the listed groups serve, merged without
// duplicates, in a stable order: by group id, then in each group's declared
// order. Unknown ids are ignored; shadowed tools are left out, so what is
// listed is exactly what [manager.IsToolInGroups] allows.
func (m *manager) ToolDefinitions(groupIDs []string) []toolhost.ToolSpec {
	s := m.snap.Load()
	ids := slices.Clone(groupIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var out []toolhost.ToolSpec
	for _, id := range ids {
		g, ok := s.groups[id]
		if !ok {
			continue
		}
		for _, t := range g.Spec.Tools {
			if s.owner[t.Name] == g {
				out = append(out, t)
			}
		}
	}
	return out
}

// GroupInfo summarises a group for listings: its id, its description and
// what it offers.
type GroupInfo struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Version     string `json:"version,omitempty"`
	// ToolCount is the number of tools the group offers: len(Tools).
	ToolCount int `json:"toolCount"`
	// Tools are the tools the group offers, in its declared order: what a
	// role with the group may list and call.
	Tools []string `json:"tools"`
	// Skipped are the group's other tools, which it does not offer, and why.
	Skipped  []SkippedTool `json:"skipped,omitempty"`
	Blocked  bool          `json:"blocked,omitempty"` // a plugin whose id is a core tool's name: none of its tools is served
	Reserved bool          `json:"reserved"`
	Source   SourceInfo    `json:"source"`
}

// SkippedTool is a tool a group declares but does not offer.
type SkippedTool struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	// ServedBy is the group that serves a tool of the same name instead,
	// when that is the reason.
	ServedBy string `json:"servedBy,omitempty"`
}

// SourceInfo says what provides a group and how its process is doing.
type SourceInfo struct {
	Kind     SourceKind `json:"kind"`
	Name     string     `json:"name"`
	Pid      int        `json:"pid,omitempty"`
	State    State      `json:"state"`
	Restarts int        `json:"restarts"`
}

// List returns every group, sorted by id. Source state is "running" for every
// registered group; [Modules.Groups] adds pids and restart counts.
func (m *manager) List() []GroupInfo {
	s := m.snap.Load()
	out := make([]GroupInfo, 0, len(s.ids))
	for _, id := range s.ids {
		g := s.groups[id]
		info := GroupInfo{
			ID: id, Description: g.Spec.Description, Version: g.Spec.Version,
			Tools: []string{}, Reserved: protocol.IsReserved(id), Blocked: s.blocked[id],
			Source: SourceInfo{Kind: g.Kind, Name: g.SourceName, State: StateRunning},
		}
		for _, t := range g.Spec.Tools {
			switch winner := s.owner[t.Name]; {
			case winner == g:
				info.Tools = append(info.Tools, t.Name)
			case info.Blocked:
				info.Skipped = append(info.Skipped, SkippedTool{Name: t.Name, Reason: fmt.Sprintf("the group is blocked: its id %q is the name of a core tool", id)})
			default:
				info.Skipped = append(info.Skipped, SkippedTool{Name: t.Name, ServedBy: winner.Spec.ID,
					Reason: fmt.Sprintf("group %s serves a tool of the same name", winner.Spec.ID)})
			}
		}
		info.ToolCount = len(info.Tools)
		out = append(out, info)
	}
	return out
}

// Diagnostics returns the conflicts between the registered groups and the
// served tools MCP clients cannot be offered.
func (m *manager) Diagnostics() []Diagnostic {
	return slices.Clone(m.snap.Load().diags)
}

// GroupOf returns the id of the group that serves the tool.
func (m *manager) GroupOf(tool string) (string, bool) {
	g, ok := m.snap.Load().owner[tool]
	if !ok {
		return "", false
	}
	return g.Spec.ID, true
}

// lookup returns the group serving the tool and the tool's spec.
func (m *manager) lookup(tool string) (*Group, toolhost.ToolSpec, bool) {
	g, ok := m.snap.Load().owner[tool]
	if !ok {
		return nil, toolhost.ToolSpec{}, false
	}
	spec, _ := g.tool(tool)
	return g, spec, true
}

// IsToolInGroups reports whether the tool is served by one of the groups.
func (m *manager) IsToolInGroups(tool string, groupIDs []string) bool {
	id, ok := m.GroupOf(tool)
	return ok && slices.Contains(groupIDs, id)
}

// IDs returns every group id, sorted.
func (m *manager) IDs() []string {
	return slices.Clone(m.snap.Load().ids)
}
