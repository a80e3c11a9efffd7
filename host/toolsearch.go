package host

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/toolsearch"
	"github.com/toolhost/toolhost/store"
)

// ToolSearchGroup is the id of the runtime's group that finds and loads the
// tools of a role's deferred groups (find_tools, load_tools). A role with
// deferred groups gets it; no other role does.
const ToolSearchGroup = "tool_search"

// LoadTools makes the named tools of the agent role's deferred groups part of
// what it is offered ([ToolQuery.Agent]) from now on, and records that in the store, so that
// it lasts across restarts; it returns those it newly loaded. A name that is
// no such tool of the role is refused with validation, naming it, and then
// nothing is loaded. Watchers are told, so the agent's MCP session hears of
// its new list.
func (as Agents) LoadTools(ctx context.Context, agentID string, names []string) ([]string, error) {
	h := as.h
	v, err := h.callerView(&toolhost.CallContext{AgentID: agentID})
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, n := range names {
		if !v.lazy[n] {
			bad = append(bad, n)
		}
	}
	if len(bad) > 0 {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "not a tool of a deferred group of role %s: %s (find_tools lists them)", v.role, strings.Join(bad, ", "))
	}
	h.loadMu.Lock()
	defer h.loadMu.Unlock()
	old, err := h.loadedOf(agentID)
	if err != nil {
		return nil, err
	}
	var added []string
	for _, n := range names {
		if !old[n] && !slices.Contains(added, n) {
			added = append(added, n)
		}
	}
	if len(added) == 0 {
		return nil, nil
	}
	if err := h.store.LoadTools(ctx, agentID, added); err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	next := maps.Clone(old)
	for _, n := range added {
		next[n] = true
	}
	if !h.sharedStore() {
		h.loaded.Store(agentID, next)
	}
	h.changed()
	return added, nil
}

// deferring returns the view of the agent's role and the tools the agent
// has loaded; a nil view when the role defers nothing or on error.
func (h *Host) deferring(agentID string) (*view, map[string]bool, error) {
	v, err := h.callerView(&toolhost.CallContext{AgentID: agentID})
	if err != nil || v.lazy == nil {
		return nil, nil, err
	}
	loaded, err := h.loadedOf(agentID)
	if err != nil {
		return nil, nil, err
	}
	return v, loaded, nil
}

// loadedOf returns the set of tools the agent has loaded, read from the
// store once and then kept; the map is never modified (LoadTools replaces
// it). On a store that hosts share (PostgreSQL) it is read every time: an
// MCP client's agent may load tools through any host, and the next request
// may come to this one.
func (h *Host) loadedOf(agentID string) (map[string]bool, error) {
	shared := h.sharedStore()
	if m, ok := h.loaded.Load(agentID); ok && !shared {
		return m.(map[string]bool), nil
	}
	names, err := h.store.LoadedTools(context.Background(), agentID)
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	if shared {
		return m, nil
	}
	actual, _ := h.loaded.LoadOrStore(agentID, m)
	return actual.(map[string]bool), nil
}

// sharedStore reports whether other hosts may share the host's store.
func (h *Host) sharedStore() bool { return h.store.Engine() == store.DriverPostgres }

// ToolMatch is a tool of an agent role's deferred groups that
// [Agents.FindTools] found.
type ToolMatch struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Group is the id of the tool's group.
	Group string `json:"group"`
	// Description is the first sentence of the tool's description.
	Description string `json:"description"`
	// Why says which words of the query, or their synonyms, matched which
	// parts of the tool ("picture → screenshot (synonym): name").
	Why string `json:"why"`
	// Loaded says the agent has loaded it.
	Loaded bool `json:"loaded"`
}

// FindTools ranks the tools of the agent role's deferred groups, loaded
// or not, against a need described in words, best first, at most limit of
// them (find_tools). Everything a tool states is handed to the ranking
// (internal/toolsearch), which reads its name, title, description and
// parameters. The index is built once per role view, on first use. None
// when the role defers nothing or nothing matches.
func (as Agents) FindTools(agentID, query string, limit int) ([]ToolMatch, error) {
	h := as.h
	v, loaded, err := h.deferring(agentID)
	if v == nil {
		return nil, err
	}
	v.searchOnce.Do(func() { v.search = v.searchIndex() })
	hits := v.search.Search(query, limit)
	if hits == nil {
		return nil, nil
	}
	out := make([]ToolMatch, len(hits))
	for i, hit := range hits {
		out[i] = ToolMatch{Name: hit.Name, Group: hit.Group, Description: hit.Description, Why: hit.Why, Loaded: loaded[hit.Name]}
	}
	return out, nil
}

// searchIndex indexes the tools of the view's deferred groups.
func (v *view) searchIndex() *toolsearch.Index {
	var docs []toolsearch.Doc
	for _, d := range v.defs {
		f := d.Function
		if !v.lazy[f.Name] {
			continue
		}
		g := v.tools[f.Name].group.Spec
		docs = append(docs, toolsearch.Doc{Name: f.Name, Title: f.Title, Group: g.ID, GroupDescription: g.Description,
			Description: f.Description, InputSchema: f.Parameters, Annotations: f.Annotations})
	}
	return toolsearch.New(docs)
}
