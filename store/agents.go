package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The agent kinds.
const (
	// AgentExternal is an identity only: its model loop runs elsewhere (an
	// MCP client, an embedder) or nowhere (the root agent).
	AgentExternal = "external"
	// AgentRuntime is an agent the runtime runs with a model loop.
	AgentRuntime = "runtime"
)

// The statuses of an agent. Active is an external agent's; the runtime's
// agents are running, waiting (for messages), failed or terminated, the last
// two final.
const (
	StatusActive     = "active"
	StatusRunning    = "running"
	StatusWaiting    = "waiting"
	StatusFailed     = "failed"
	StatusTerminated = "terminated"
)

// Agent is an agent bound to a role.
type Agent struct {
	ID       string `json:"id"`
	RoleID   string `json:"roleId"`
	ParentID string `json:"parentId,omitempty"`
	Status   string `json:"status"`
	// Kind is AgentExternal (the default) or AgentRuntime.
	Kind string `json:"kind"`
	// Task is the work the agent was spawned with.
	Task string `json:"task,omitempty"`
	// Answer is the agent's latest final answer.
	Answer string `json:"answer,omitempty"`
	// ErrorCode and Error say why a failed agent failed.
	ErrorCode string `json:"errorCode,omitempty"`
	Error     string `json:"error,omitempty"`
	// Turns and Tokens count the agent's model calls and their tokens over
	// its life.
	Turns  int `json:"turns"`
	Tokens int `json:"tokens"`
	// Owner names the process running a runtime agent; empty while none does.
	Owner     string    `json:"owner,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Final reports whether the agent's status can no longer change.
func (a *Agent) Final() bool { return a.Status == StatusFailed || a.Status == StatusTerminated }

const agentColumns = `id, role_id, parent_id, status, kind, task, answer, error_code, error, turns, tokens, owner, created_at, updated_at`

func scanAgent(row scanner) (Agent, error) {
	var a Agent
	var created, updated string
	err := row.Scan(&a.ID, &a.RoleID, &a.ParentID, &a.Status, &a.Kind, &a.Task, &a.Answer, &a.ErrorCode, &a.Error,
		&a.Turns, &a.Tokens, &a.Owner, &created, &updated)
	a.CreatedAt, a.UpdatedAt = parseTime(created), parseTime(updated)
	return a, err
}

// CreateAgent adds an agent of a role and returns it with its id (unless
// set), status, kind and times filled in.
func (s *Store) CreateAgent(ctx context.Context, a Agent) (Agent, error) {
	if a.ID == "" {
		a.ID = newID("agent_")
	}
	if a.Kind == "" {
		a.Kind = AgentExternal
	}
	if a.Status == "" {
		a.Status = StatusActive
	}
	a.CreatedAt = time.Now().UTC()
	a.UpdatedAt = a.CreatedAt
	_, err := s.db.exec(ctx, `INSERT INTO agents (`+agentColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.RoleID, a.ParentID, a.Status, a.Kind, a.Task, a.Answer, a.ErrorCode, a.Error, a.Turns, a.Tokens, a.Owner,
		stamp(a.CreatedAt), stamp(a.UpdatedAt))
	if err != nil {
		return a, fmt.Errorf("store: create agent: %w", err)
	}
	return a, nil
}

// UpdateAgent saves an agent's status, answer, error and counts, unless it is
// already final in the store (another process terminated it): then it
// returns the stored agent with ErrFinal.
func (s *Store) UpdateAgent(ctx context.Context, a Agent) (Agent, error) {
	a.UpdatedAt = time.Now().UTC()
	res, err := s.db.exec(ctx, `UPDATE agents SET status = ?, answer = ?, error_code = ?, error = ?, turns = ?, tokens = ?, updated_at = ?
		WHERE id = ? AND status NOT IN ('failed', 'terminated')`,
		a.Status, a.Answer, a.ErrorCode, a.Error, a.Turns, a.Tokens, stamp(a.UpdatedAt), a.ID)
	if err != nil {
		return a, fmt.Errorf("store: update agent: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		stored, err := s.Agent(ctx, a.ID)
		if err != nil {
			return a, err
		}
		return stored, fmt.Errorf("store: agent %s is %s: %w", a.ID, stored.Status, ErrFinal)
	}
	return a, nil
}

// ErrFinal is wrapped by the error of changing an agent that is already
// failed or terminated.
var ErrFinal = errors.New("agent is final")

// TerminateAgent marks an agent terminated, with the reason, unless it is
// already final (ErrFinal).
func (s *Store) TerminateAgent(ctx context.Context, id, reason string) (Agent, error) {
	a, err := s.Agent(ctx, id)
	if err != nil {
		return a, err
	}
	a.Status, a.Error = StatusTerminated, reason
	return s.UpdateAgent(ctx, a)
}

// ClaimAgent makes owner the agent's owner if it has none, is owner
// already, or is stale (the previous owner, gone); it reports whether owner
// now owns the agent.
func (s *Store) ClaimAgent(ctx context.Context, id, owner, stale string) (bool, error) {
	res, err := s.db.exec(ctx, `UPDATE agents SET owner = ? WHERE id = ? AND owner IN ('', ?, ?)`, owner, id, owner, stale)
	if err != nil {
		return false, fmt.Errorf("store: claim agent: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Agent returns the agent with the id.
func (s *Store) Agent(ctx context.Context, id string) (Agent, error) {
	a, err := scanAgent(s.db.queryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("store: agent %q: %w", id, ErrNotFound)
	}
	return a, err
}

// Agents returns every agent, oldest first.
func (s *Store) Agents(ctx context.Context) ([]Agent, error) {
	rows, err := s.db.query(ctx, `SELECT `+agentColumns+` FROM agents ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: agents: %w", err)
	}
	defer rows.Close()
	var out []Agent
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("store: agents: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
