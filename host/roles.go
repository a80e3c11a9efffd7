package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// directory caches the store's roles and agents, so that listing and calling
// never wait on SQLite. It is reloaded when the store changes underneath
// (another process, such as the CLI beside a server, committed).
type directory struct {
	// edit serialises a reload with this process's edits (a store write and
	// the cache update after it), so that a reload reading the store before
	// an edit cannot replace the cache after it and lose the edit.
	edit   sync.Mutex
	mu     sync.RWMutex
	rev    uint64                 // bumped on every change to a role
	roles  map[string]*store.Role // by name
	byID   map[string]*store.Role
	agents map[string]store.Agent
}

// load replaces the cache with the store's contents and reports whether the
// roles changed (the revision is bumped only then, so that views stay
// cached while other connections only write events or agents).
func (d *directory) load(ctx context.Context, st *store.Store) (bool, error) {
	d.edit.Lock()
	defer d.edit.Unlock()
	roles, err := st.Roles(ctx)
	if err != nil {
		return false, err
	}
	agents, err := st.Agents(ctx)
	if err != nil {
		return false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	byName := make(map[string]*store.Role, len(roles))
	byID := make(map[string]*store.Role, len(roles))
	for i := range roles {
		byName[roles[i].Name], byID[roles[i].ID] = &roles[i], &roles[i]
	}
	changed := !maps.EqualFunc(d.roles, byName, func(a, b *store.Role) bool { return reflect.DeepEqual(a, b) })
	if changed {
		d.roles, d.byID = byName, byID
		d.rev++
	}
	d.agents = make(map[string]store.Agent, len(agents))
	for _, a := range agents {
		d.agents[a.ID] = a
	}
	return changed, nil
}

// role returns the role with the name and the revision it belongs to.
func (d *directory) role(name string) (*store.Role, uint64) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.roles[name], d.rev
}

// agentRole returns an agent's role and the revision it belongs to.
func (d *directory) agentRole(agentID string) (*store.Role, uint64, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	a, ok := d.agents[agentID]
	if !ok {
		return nil, d.rev, false
	}
	return d.byID[a.RoleID], d.rev, true
}

// putRole records a created or changed role; nil removes the named one and
// its agents.
func (d *directory) putRole(name string, r *store.Role) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.roles[name]; old != nil {
		delete(d.byID, old.ID)
		if r == nil { // the store deleted the role's agents with it
			for id, a := range d.agents {
				if a.RoleID == old.ID {
					delete(d.agents, id)
				}
			}
		}
	}
	delete(d.roles, name)
	if r != nil {
		d.roles[name], d.byID[r.ID] = r, r
	}
	d.rev++
}

// dropAgents forgets the agents with the ids, which the store removed.
func (d *directory) dropAgents(ids []string) {
	if len(ids) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		delete(d.agents, id)
	}
}

func (d *directory) putAgent(a store.Agent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.agents[a.ID] = a
}

// watchStore reloads the directory whenever another process commits (on
// SQLite, checking every interval; on PostgreSQL, as soon as a host
// notifies), until ctx ends; watchers hear of it only when the roles
// changed. It prunes stored call results on the way.
func (h *Host) watchStore(ctx context.Context, every time.Duration) {
	w, err := h.store.Changes(ctx, every, "roles", "agents")
	if err != nil {
		h.log.Error("cannot watch the store for changes", "error", err)
		return
	}
	defer w.Close()
	prune := time.NewTicker(pruneEvery)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-prune.C:
			h.pruneCallResults(ctx)
			continue
		case <-w.C:
		}
		changed, err := h.dir.load(ctx, h.store)
		if err != nil {
			h.log.Error("reloading roles", "error", err)
			continue
		}
		if changed {
			h.changed()
			h.log.Debug("roles reloaded: another process changed them")
		}
	}
}

// pruneEvery is how often stored call results past the idempotency window
// are deleted (and once at Start).
const pruneEvery = time.Hour

// pruneCallResults deletes the call results older than the idempotency window.
func (h *Host) pruneCallResults(ctx context.Context) {
	n, err := h.store.PruneCallResults(ctx, time.Now().Add(-h.cfg.Executor.IdempotencyWindow))
	if err != nil {
		h.log.Error("pruning call results", "error", err)
	} else if n > 0 {
		h.log.Debug("call results pruned", "count", n)
	}
}

// List returns every role, the root first, then by name.
func (rs Roles) List() []store.Role {
	h := rs.h
	h.dir.mu.RLock()
	out := make([]store.Role, 0, len(h.dir.roles))
	for _, r := range h.dir.roles {
		out = append(out, *r)
	}
	h.dir.mu.RUnlock()
	slices.SortFunc(out, func(a, b store.Role) int {
		if (a.Name == store.RootRole) != (b.Name == store.RootRole) {
			if a.Name == store.RootRole {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Get returns the role with the name.
func (rs Roles) Get(name string) (store.Role, error) {
	h := rs.h
	r, _ := h.dir.role(name)
	if r == nil {
		return store.Role{}, noRole(name)
	}
	return *r, nil
}

func noRole(name string) error {
	return &toolhost.Error{Code: toolhost.CodeValidation, Message: fmt.Sprintf("no role named %q", name), Err: store.ErrNotFound}
}

// RoleSpec is what a new role is made of.
type RoleSpec struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Prompt      string   `json:"prompt"`
	ToolGroups  []string `json:"toolGroups"` // nil: none configured, every group is available
	// DeferredGroups are groups of the role whose tools its agents load on
	// demand (see [store.Role.Deferred]).
	DeferredGroups []string `json:"deferredGroups,omitempty"`
	Allow          []string `json:"allow,omitempty"`
	Deny           []string `json:"deny,omitempty"`
	// ReadOnlyTools keeps only the read-only tools of the role's groups
	// (see [store.Role.ReadOnlyTools]).
	ReadOnlyTools bool `json:"readOnlyTools,omitempty"`
	// Rules and Limits are the role's (see [store.Role.Rules]); each rule's
	// condition must compile.
	Rules  []rules.Rule  `json:"rules,omitempty"`
	Limits []rules.Limit `json:"limits,omitempty"`
	// Code bounds the role's scripts (see [store.Role.Code]).
	Code      rules.CodeBounds `json:"code,omitzero"`
	CreatedBy string           `json:"createdBy,omitempty"`
}

// Create stores a new, editable role. Its name must be free and valid,
// and its tool groups known, its rules and limits valid (validation
// otherwise, the message starting with the field at fault as [RoleSpec]'s
// JSON names it: "name: …", "toolGroups: …", "deferredGroups: …",
// "rules[1] \"no_sudo\": when: …", "limits[0]: per: …").
func (rs Roles) Create(ctx context.Context, spec RoleSpec) (store.Role, error) {
	h := rs.h
	if !config.ValidRoleName(spec.Name) {
		return store.Role{}, toolhost.Errorf(toolhost.CodeValidation,
			"name: role name %q: must start with a letter or digit and continue with up to 63 letters, digits, '_', '.' or '-'", spec.Name)
	}
	if err := h.checkGroups("toolGroups", spec.ToolGroups); err != nil {
		return store.Role{}, err
	}
	if err := h.checkDeferred(spec.ToolGroups, spec.DeferredGroups); err != nil {
		return store.Role{}, err
	}
	if err := checkRoleRules(spec.Rules, spec.Limits, spec.Code); err != nil {
		return store.Role{}, err
	}
	h.dir.edit.Lock()
	defer h.dir.edit.Unlock()
	r, err := h.store.CreateRole(ctx, store.Role{
		Name: spec.Name, Description: spec.Description, Prompt: spec.Prompt, ToolGroups: dedupe(spec.ToolGroups),
		Deferred: dedupe(spec.DeferredGroups), Allow: spec.Allow, Deny: spec.Deny, ReadOnlyTools: spec.ReadOnlyTools, CreatedBy: spec.CreatedBy,
		Rules: spec.Rules, Limits: spec.Limits, Code: spec.Code,
	})
	if errors.Is(err, store.ErrExists) {
		return r, &toolhost.Error{Code: toolhost.CodeValidation, Message: fmt.Sprintf("name: a role named %q already exists", spec.Name), Err: err}
	}
	if err != nil {
		return r, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	h.dir.putRole(r.Name, &r)
	h.changed()
	h.log.Info("role created", "role", r.Name, "tool_groups", r.ToolGroups, "read_only_tools", r.ReadOnlyTools)
	return r, nil
}

// RoleUpdate changes some fields of a role; nil fields are left as they are.
// A ToolGroups pointing at a nil slice clears the role's groups (every group
// is then available).
type RoleUpdate struct {
	Description *string
	Prompt      *string
	ToolGroups  *[]string
	// DeferredGroups replaces the groups whose tools are loaded on demand;
	// each must be one of the role's groups.
	DeferredGroups *[]string
	Allow          *[]string
	Deny           *[]string
	// ReadOnlyTools sets whether the role keeps only its read-only tools.
	ReadOnlyTools *bool
	// Rules and Limits replace the role's, in order.
	Rules  *[]rules.Rule
	Limits *[]rules.Limit
	// Code replaces the role's code bounds.
	Code *rules.CodeBounds
}

// Update edits a role created at run time; the root role and config
// roles are read-only (policy, with the reason).
func (rs Roles) Update(ctx context.Context, name string, u RoleUpdate) (store.Role, error) {
	h := rs.h
	r, err := h.editable(name)
	if err != nil {
		return store.Role{}, err
	}
	if u.ToolGroups != nil {
		if err := h.checkGroups("toolGroups", *u.ToolGroups); err != nil {
			return store.Role{}, err
		}
		r.ToolGroups = dedupe(*u.ToolGroups)
	}
	if u.DeferredGroups != nil {
		r.Deferred = dedupe(*u.DeferredGroups)
	}
	if err := h.checkDeferred(r.ToolGroups, r.Deferred); err != nil {
		return store.Role{}, err
	}
	set(&r.Description, u.Description)
	set(&r.Prompt, u.Prompt)
	set(&r.Allow, u.Allow)
	set(&r.Deny, u.Deny)
	set(&r.ReadOnlyTools, u.ReadOnlyTools)
	set(&r.Rules, u.Rules)
	set(&r.Limits, u.Limits)
	set(&r.Code, u.Code)
	if err := checkRoleRules(r.Rules, r.Limits, r.Code); err != nil {
		return store.Role{}, err
	}
	h.dir.edit.Lock()
	defer h.dir.edit.Unlock()
	if err := h.store.UpdateRole(ctx, r); err != nil {
		return store.Role{}, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	h.dir.putRole(r.Name, &r)
	h.changed()
	h.log.Info("role updated", "role", r.Name, "tool_groups", r.ToolGroups, "read_only_tools", r.ReadOnlyTools)
	return r, nil
}

// Delete removes a role created at run time, and its agents.
func (rs Roles) Delete(ctx context.Context, name string) error {
	h := rs.h
	if _, err := h.editable(name); err != nil {
		return err
	}
	h.dir.edit.Lock()
	defer h.dir.edit.Unlock()
	if err := h.store.DeleteRole(ctx, name); err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	h.dir.putRole(name, nil)
	h.changed()
	h.log.Info("role deleted", "role", name)
	return nil
}

// editable returns a copy of the role, or why it may not be edited.
func (h *Host) editable(name string) (store.Role, error) {
	r, err := h.Roles().Get(name)
	if err != nil {
		return r, err
	}
	if ro, why := h.Roles().ReadOnly(r); ro {
		return r, toolhost.Errorf(toolhost.CodePolicy, "role %q is read-only: %s", name, why)
	}
	return r, nil
}

// ReadOnly says whether the role may be edited at run time and, if
// not, why and how to change it, as [store.Role.ReadOnly] does; for a role
// this host's config file declares, it names the file and the line of the
// role block.
func (rs Roles) ReadOnly(r store.Role) (bool, string) {
	h := rs.h
	ro, why := r.ReadOnly()
	if d, ok := h.Roles().Declared(r.Name); ok && r.Source == store.SourceConfig {
		why = fmt.Sprintf("role %q is declared in the config file, at %s: edit its role block there and restart toolhost serve, which reads the file at start only", r.Name, d)
	}
	return ro, why
}

// RoleDeclaration is where a config file declares a role.
type RoleDeclaration struct {
	// File is the config file's path.
	File string `json:"file"`
	// Line is the line of the role block; 0 when unknown.
	Line int `json:"line,omitempty"`
	// Rules and Limits are the lines of the role's rule and limit blocks,
	// in the order of the role's rules and limits.
	Rules  []int `json:"rules,omitempty"`
	Limits []int `json:"limits,omitempty"`
}

// String returns "FILE:LINE", or FILE when the line is unknown.
func (d RoleDeclaration) String() string {
	if d.Line == 0 {
		return d.File
	}
	return d.File + ":" + strconv.Itoa(d.Line)
}

// Declared returns where this host's config file declares the role
// named name, and its rule and limit blocks; ok is false for a role it does
// not declare (the root role, a role made at run time, a role of another
// host's config sharing the store) or when it does not know the file.
func (rs Roles) Declared(name string) (d RoleDeclaration, ok bool) {
	h := rs.h
	for _, r := range h.cfg.Roles {
		if r.Name != name {
			continue
		}
		d.File, d.Line = splitPos(r.Pos)
		for _, p := range r.RulePos {
			_, line := splitPos(p)
			d.Rules = append(d.Rules, line)
		}
		for _, p := range r.LimitPos {
			_, line := splitPos(p)
			d.Limits = append(d.Limits, line)
		}
		if h.cfg.File != "" {
			d.File = h.cfg.File
		}
		return d, d.File != ""
	}
	return d, false
}

// splitPos splits a config position, "file:line,col" (the file as the
// config was loaded), into its file and line (0 when there is none).
func splitPos(pos string) (file string, line int) {
	file = pos
	if i := strings.LastIndexByte(pos, ':'); i >= 0 {
		file = pos[:i]
		line, _ = strconv.Atoi(strings.SplitN(pos[i+1:], ",", 2)[0])
	}
	return file, line
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// dedupe drops repeated ids, keeping the first of each and nil as nil.
func dedupe(ids []string) []string {
	if ids == nil {
		return nil
	}
	out := []string{}
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// knownGroups returns the group ids a role may name: the registered groups
// and those of every configured module, running or not.
func (h *Host) knownGroups() []string {
	known := h.mgr.IDs()
	for _, p := range h.Modules().List() {
		if p.Group != "" {
			known = append(known, p.Group)
		}
		if p.Kind == SourceBuiltin {
			known = append(known, p.Name)
		}
	}
	slices.Sort(known)
	return slices.Compact(known)
}

// checkGroups refuses unknown group ids with validation, naming field.
func (h *Host) checkGroups(field string, ids []string) error {
	known := h.knownGroups()
	var unknown []string
	for _, id := range ids {
		if !slices.Contains(known, id) {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return toolhost.Errorf(toolhost.CodeValidation, "%s: unknown tool group(s) %s; the groups are: %s",
			field, strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return nil
}

// checkDeferred refuses, with validation, deferred groups that are unknown
// or not among the role's groups (nil groups: every group).
func (h *Host) checkDeferred(groups, deferred []string) error {
	if err := h.checkGroups("deferredGroups", deferred); err != nil {
		return err
	}
	for _, id := range deferred {
		if groups != nil && !slices.Contains(groups, id) {
			return toolhost.Errorf(toolhost.CodeValidation, "deferredGroups: deferred group %q is not one of the role's tool groups (%s)", id, strings.Join(groups, ", "))
		}
		if id == ToolSearchGroup {
			return toolhost.Errorf(toolhost.CodeValidation, "deferredGroups: %s cannot be deferred: it is how deferred tools are found", id)
		}
	}
	return nil
}

// Create stores a new agent of the named role; a gives its parent,
// kind and task (the zero value: an external agent without a parent).
func (as Agents) Create(ctx context.Context, role string, a store.Agent) (store.Agent, error) {
	h := as.h
	r, err := h.Roles().Get(role)
	if err != nil {
		return store.Agent{}, err
	}
	a.RoleID = r.ID
	h.dir.edit.Lock()
	defer h.dir.edit.Unlock()
	a, err = h.store.CreateAgent(ctx, a)
	if err != nil {
		return a, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	h.dir.putAgent(a)
	return a, nil
}

// Client returns the agent of role that the MCP client of the credential
// names by key (store.Store.ClientAgent): made by the first request of
// the key, on whichever host sharing the store, and found by every later
// one until it ends.
func (as Agents) Client(ctx context.Context, role, credential, key string) (store.Agent, error) {
	h := as.h
	r, err := h.Roles().Get(role)
	if err != nil {
		return store.Agent{}, err
	}
	h.dir.edit.Lock() // as Create
	defer h.dir.edit.Unlock()
	a, _, err := h.store.ClientAgent(ctx, store.Agent{RoleID: r.ID, Credential: credential, ClientKey: key})
	if err != nil {
		return a, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	h.dir.putAgent(a)
	return a, nil
}

// Run is the id of the host's run on the store (the process that serves
// now): the work of an MCP client that this host holds (a task, a call
// waiting for its client) names it, so that the other hosts know where it
// runs and whether its host still lives (store.Store.RunAlive).
func (as Agents) Run() string { return as.h.runID }

// Get returns the agent with the id.
func (as Agents) Get(id string) (store.Agent, bool) {
	h := as.h
	h.dir.mu.RLock()
	defer h.dir.mu.RUnlock()
	a, ok := h.dir.agents[id]
	return a, ok
}

// reconcileRoles makes the store's config roles those the config declares.
func (h *Host) reconcileRoles(ctx context.Context) error {
	declared := make([]store.Role, len(h.cfg.Roles))
	for i, r := range h.cfg.Roles {
		declared[i] = store.Role{Name: r.Name, Description: r.Description, Prompt: r.Prompt, ToolGroups: r.ToolGroups,
			Deferred: r.DeferredGroups, Allow: r.Tools.Allow, Deny: r.Tools.Deny, ReadOnlyTools: r.ReadOnlyTools, Rules: r.Rules, Limits: r.Limits, Code: r.Code}
	}
	changed, err := h.store.ReconcileConfigRoles(ctx, declared)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		h.log.Info("config roles reconciled", "changed", changed)
	}
	return nil
}

// configRoleDiagnostics warns about config roles naming groups no module
// provides (it may be that a plugin failed to start).
func (h *Host) configRoleDiagnostics() []Diagnostic {
	known := h.knownGroups()
	var out []Diagnostic
	for _, r := range h.cfg.Roles {
		for _, g := range r.ToolGroups {
			if !slices.Contains(known, g) {
				out = append(out, Diagnostic{Level: "warning", Plugin: "config", Group: g,
					Message: fmt.Sprintf("role %q (%s) names tool group %q, which no module provides", r.Name, r.Pos, g)})
			}
		}
	}
	return out
}
