package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Agent is an agent bound to a role.
type Agent struct {
	ID        string    `json:"id"`
	RoleID    string    `json:"roleId"`
	ParentID  string    `json:"parentId,omitempty"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"createdAt"`
}

const agentColumns = `id, role_id, parent_id, status, created_at`

func scanAgent(row scanner) (Agent, error) {
	var a Agent
	var created string
	err := row.Scan(&a.ID, &a.RoleID, &a.ParentID, &a.Status, &created)
	a.CreatedAt = parseTime(created)
	return a, err
}

// CreateAgent adds an agent of a role and returns it with its id (unless
// set), status and creation time filled in.
func (s *Store) CreateAgent(ctx context.Context, a Agent) (Agent, error) {
	if a.ID == "" {
		a.ID = newID("agent_")
	}
	if a.Status == "" {
		a.Status = "active"
	}
	a.CreatedAt = time.Now().UTC()
	_, err := s.db.ExecContext(ctx, `INSERT INTO agents (`+agentColumns+`) VALUES (?, ?, ?, ?, ?)`,
		a.ID, a.RoleID, a.ParentID, a.Status, stamp(a.CreatedAt))
	if err != nil {
		return a, fmt.Errorf("store: create agent: %w", err)
	}
	return a, nil
}

// Agent returns the agent with the id.
func (s *Store) Agent(ctx context.Context, id string) (Agent, error) {
	a, err := scanAgent(s.db.QueryRowContext(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("store: agent %q: %w", id, ErrNotFound)
	}
	return a, err
}

// Agents returns every agent, oldest first.
func (s *Store) Agents(ctx context.Context) ([]Agent, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+agentColumns+` FROM agents ORDER BY created_at, id`)
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
