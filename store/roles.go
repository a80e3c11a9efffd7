package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolhost/toolhost/rules"
)

// Source says where a role is defined.
type Source string

// The role sources.
const (
	SourceConfig Source = "config" // a role block in config.hcl: read-only at run time
	SourceStore  Source = "store"  // created at run time: editable
)

// The root role and agent, which always exist.
const (
	RootRoleID  = "root"
	RootRole    = "root"
	RootAgentID = "root"
)

// Role is a role: what its agents are for and which tool groups
// they may use.
type Role struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Prompt      string `json:"prompt"`
	// ToolGroups are the role's tool groups; nil means none configured (every
	// group is available), and JSON shows it as null.
	ToolGroups []string `json:"toolGroups"`
	// Allow lists optional tools, groups or "group:plugins" made visible.
	Allow []string `json:"allow,omitempty"`
	// Deny lists tools, groups or "group:plugins" hidden from the role.
	Deny []string `json:"deny,omitempty"`
	// ReadOnlyTools keeps only the read-only tools of the role's groups (a
	// role block's tools { read_only = true }): those whose MCP annotations
	// say readOnlyHint. Not to be confused with [Role.ReadOnly], whether the
	// role itself may be edited.
	ReadOnlyTools bool `json:"readOnlyTools"`
	// Deferred are groups whose tools the role's agents may call but whose
	// definitions they get only when they load them (tool_search's
	// load_tools): the role's context stays small.
	Deferred []string `json:"deferredGroups,omitempty"`
	// Rules decide the role's calls by their arguments: the first whose
	// tools and condition match a call decides it (deny, approve, allow).
	Rules []rules.Rule `json:"rules,omitempty"`
	// Limits bound the calls of the role's agents, per agent.
	Limits []rules.Limit `json:"limits,omitempty"`
	// Code bounds the scripts of the role's agents (code mode's
	// run_script), over the config's code block.
	Code         rules.CodeBounds `json:"code,omitzero"`
	CreatedBy    string           `json:"createdBy"`
	CreatedAt    time.Time        `json:"createdAt"`
	Status       string           `json:"status"`
	LLMServiceID string           `json:"llmServiceId"`
	Source       Source           `json:"source"`
}

// ReadOnly says whether the role may be edited at run time, and if not, why.
func (r *Role) ReadOnly() (bool, string) {
	switch {
	case r.Name == RootRole:
		return true, "the root role is built in: its one tool group, org_management (create roles, spawn agents of any role), is fixed, so that no edit widens what root's agents and tokens can do; make another role for other tools"
	case r.Source == SourceConfig:
		return true, fmt.Sprintf("role %q is declared in the config file; edit its role block there and restart", r.Name)
	}
	return false, ""
}

const roleColumns = `id, name, description, prompt, tool_groups, tools_allow, tools_deny, created_by, created_at, status, llm_service_id, source, deferred_groups, tools_read_only, rules, limits, code`

// ensureRoot creates the root role and the root agent when missing.
func (s *Store) ensureRoot(ctx context.Context) error {
	_, err := s.db.exec(ctx, `INSERT INTO roles (`+roleColumns+`) VALUES (?, ?, ?, ?, '["org_management"]', '[]', '[]', 'system', ?, 'active', '', 'store', '[]', FALSE, '[]', '[]', '{}') ON CONFLICT DO NOTHING`,
		RootRoleID, RootRole, "The root of the organisation: creates roles and agents and hands out work.",
		"You are the root agent. You do not do tasks yourself: you find or create roles, spawn agents for them and send them work.", now())
	if err == nil {
		_, err = s.db.exec(ctx, `INSERT INTO agents (id, role_id, parent_id, status, created_at) VALUES (?, ?, '', 'active', ?) ON CONFLICT DO NOTHING`,
			RootAgentID, RootRoleID, now())
	}
	if err != nil {
		return fmt.Errorf("store: root role: %w", err)
	}
	return nil
}

type scanner interface{ Scan(dest ...any) error }

func scanRole(row scanner) (Role, error) {
	var r Role
	var groups sql.NullString
	var allow, deny, deferred, created, rs, ls, code string
	err := row.Scan(&r.ID, &r.Name, &r.Description, &r.Prompt, &groups, &allow, &deny, &r.CreatedBy, &created, &r.Status, &r.LLMServiceID, &r.Source, &deferred, &r.ReadOnlyTools, &rs, &ls, &code)
	if err != nil {
		return r, err
	}
	r.CreatedAt = parseTime(created)
	if groups.Valid {
		r.ToolGroups = []string{}
		err = json.Unmarshal([]byte(groups.String), &r.ToolGroups)
	}
	if err == nil {
		err = json.Unmarshal([]byte(allow), &r.Allow)
	}
	if err == nil {
		err = json.Unmarshal([]byte(deny), &r.Deny)
	}
	if err == nil {
		err = json.Unmarshal([]byte(deferred), &r.Deferred)
	}
	if err == nil {
		err = json.Unmarshal([]byte(rs), &r.Rules)
	}
	if err == nil {
		err = json.Unmarshal([]byte(ls), &r.Limits)
	}
	if err == nil {
		err = json.Unmarshal([]byte(code), &r.Code)
	}
	return r, err
}

// Roles returns every role, the root first, then by name.
func (s *Store) Roles(ctx context.Context) ([]Role, error) {
	return queryAll(ctx, s.db, "roles", scanRole, `SELECT `+roleColumns+` FROM roles ORDER BY id != 'root', name`)
}

// Role returns the role with the name, or with the id.
func (s *Store) Role(ctx context.Context, nameOrID string) (Role, error) {
	r, err := scanRole(s.db.queryRow(ctx, `SELECT `+roleColumns+` FROM roles WHERE name = ? OR id = ? ORDER BY name = ? DESC LIMIT 1`, nameOrID, nameOrID, nameOrID))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("store: role %q: %w", nameOrID, ErrNotFound)
	}
	return r, err
}

// CreateRole adds a role and returns it with its id, creation time, status
// and source ([SourceStore] unless set) filled in.
func (s *Store) CreateRole(ctx context.Context, r Role) (Role, error) {
	if r.ID == "" {
		r.ID = newID("role_")
	}
	if r.Status == "" {
		r.Status = "active"
	}
	if r.Source == "" {
		r.Source = SourceStore
	}
	r.CreatedAt = time.Now().UTC()
	err := s.tx(ctx, func(tx db) error { return insertRole(ctx, tx, r) })
	if s.eng.uniqueViolation(err) {
		return r, fmt.Errorf("store: role %q: %w", r.Name, ErrExists)
	}
	return r, err
}

func insertRole(ctx context.Context, tx db, r Role) error {
	_, err := tx.exec(ctx, `INSERT INTO roles (`+roleColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Name, r.Description, r.Prompt, groupsJSON(r.ToolGroups), listJSON(r.Allow), listJSON(r.Deny),
		r.CreatedBy, stamp(r.CreatedAt), r.Status, r.LLMServiceID, r.Source, listJSON(r.Deferred), r.ReadOnlyTools, listJSON(r.Rules), listJSON(r.Limits), codeJSON(r.Code))
	return err
}

// UpdateRole stores every editable field of r (description, prompt, tool
// groups, allow, deny, read-only tools, deferred groups, rules, limits,
// code bounds, status, LLM service), found by its id.
func (s *Store) UpdateRole(ctx context.Context, r Role) error {
	return s.tx(ctx, func(tx db) error { return updateRole(ctx, tx, r) })
}

func updateRole(ctx context.Context, tx db, r Role) error {
	res, err := tx.exec(ctx, `UPDATE roles SET description = ?, prompt = ?, tool_groups = ?, tools_allow = ?, tools_deny = ?, tools_read_only = ?, deferred_groups = ?, rules = ?, limits = ?, code = ?, status = ?, llm_service_id = ?, source = ? WHERE id = ?`,
		r.Description, r.Prompt, groupsJSON(r.ToolGroups), listJSON(r.Allow), listJSON(r.Deny), r.ReadOnlyTools, listJSON(r.Deferred),
		listJSON(r.Rules), listJSON(r.Limits), codeJSON(r.Code), r.Status, r.LLMServiceID, r.Source, r.ID)
	if err != nil {
		return fmt.Errorf("store: update role %q: %w", r.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: role %q: %w", r.Name, ErrNotFound)
	}
	return nil
}

// DeleteRole removes the role with the name, and its agents.
func (s *Store) DeleteRole(ctx context.Context, name string) error {
	res, err := s.db.exec(ctx, `DELETE FROM roles WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("store: delete role %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: role %q: %w", name, ErrNotFound)
	}
	return s.tokensDeleted() // its tokens went with it
}

// ReconcileConfigRoles makes the config-sourced roles those given, in one
// transaction: new ones are created, changed ones updated (keeping their ids
// and agents), and config roles no longer declared deleted. A stored role
// whose name is now declared in the config becomes a config role. It returns
// the names it created, updated and deleted.
func (s *Store) ReconcileConfigRoles(ctx context.Context, declared []Role) (changed []string, err error) {
	deleted := false
	err = s.tx(ctx, func(tx db) error {
		rows, err := tx.query(ctx, `SELECT `+roleColumns+` FROM roles`)
		if err != nil {
			return err
		}
		existing := map[string]Role{}
		for rows.Next() {
			r, err := scanRole(rows)
			if err != nil {
				rows.Close()
				return err
			}
			existing[r.Name] = r
		}
		rows.Close()
		keep := map[string]bool{}
		for _, d := range declared {
			keep[d.Name] = true
			d.Source = SourceConfig
			if d.Status == "" {
				d.Status = "active"
			}
			old, ok := existing[d.Name]
			switch {
			case !ok:
				d.ID, d.CreatedAt, d.CreatedBy = newID("role_"), time.Now().UTC(), "config"
				err = insertRole(ctx, tx, d)
			case !sameDeclaration(old, d):
				d.ID = old.ID
				err = updateRole(ctx, tx, d)
			default:
				continue
			}
			if err != nil {
				return err
			}
			changed = append(changed, d.Name)
		}
		for name, r := range existing {
			if r.Source == SourceConfig && !keep[name] {
				if _, err := tx.exec(ctx, `DELETE FROM roles WHERE id = ?`, r.ID); err != nil {
					return err
				}
				changed = append(changed, name)
				deleted = true
			}
		}
		return nil
	})
	if err == nil && deleted {
		err = s.tokensDeleted() // the deleted roles' tokens went with them
	}
	if err != nil {
		return nil, fmt.Errorf("store: reconcile config roles: %w", err)
	}
	return changed, nil
}

// sameDeclaration reports whether a stored role already matches a declaration.
func sameDeclaration(old, d Role) bool {
	return old.Source == SourceConfig && old.Description == d.Description && old.Prompt == d.Prompt &&
		groupsJSON(old.ToolGroups) == groupsJSON(d.ToolGroups) && listJSON(old.Allow) == listJSON(d.Allow) && listJSON(old.Deny) == listJSON(d.Deny) &&
		old.ReadOnlyTools == d.ReadOnlyTools && listJSON(old.Deferred) == listJSON(d.Deferred) &&
		listJSON(old.Rules) == listJSON(d.Rules) && listJSON(old.Limits) == listJSON(d.Limits) && old.Code == d.Code
}

// codeJSON encodes a role's code bounds.
func codeJSON(b rules.CodeBounds) string {
	out, _ := json.Marshal(b)
	return string(out)
}

// groupsJSON encodes tool groups, nil (not configured) as SQL NULL.
func groupsJSON(groups []string) any {
	if groups == nil {
		return nil
	}
	return listJSON(groups)
}

// listJSON encodes a list, nil as [].
func listJSON[T any](list []T) string {
	if list == nil {
		list = []T{}
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// LoadTools records that an agent loaded the tools (tool_search's
// load_tools): their definitions are part of its context from then on,
// across restarts. Tools loaded before stay loaded.
func (s *Store) LoadTools(ctx context.Context, agentID string, tools []string) error {
	return s.tx(ctx, func(tx db) error {
		at := now()
		for _, t := range tools {
			if _, err := tx.exec(ctx, `INSERT INTO loaded_tools (agent_id, tool, loaded_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, agentID, t, at); err != nil {
				return fmt.Errorf("store: load tools of %s: %w", agentID, err)
			}
		}
		return nil
	})
}

// LoadedTools returns the tools an agent has loaded, by name.
func (s *Store) LoadedTools(ctx context.Context, agentID string) ([]string, error) {
	rows, err := s.db.query(ctx, `SELECT tool FROM loaded_tools WHERE agent_id = ? ORDER BY tool`, agentID)
	if err != nil {
		return nil, fmt.Errorf("store: loaded tools of %s: %w", agentID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("store: loaded tools of %s: %w", agentID, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
