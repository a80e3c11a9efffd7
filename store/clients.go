package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// What a sessionless MCP client holds lives here, so that every host
// sharing the store answers any of its requests: its agents (by credential
// and key), its tasks and its held calls' rounds (migrations/*/021).

// ClientAgent returns the agent not final of a.RoleID that a.Credential's
// MCP client names by a.ClientKey (not empty), and whether this call made
// it: the first request of a key, on whichever host, makes the agent (an
// external one, with a's other fields), and every later one, on any host,
// finds it, until it ends. Of several hosts making it at once, one wins
// and the others find its agent.
func (s *Store) ClientAgent(ctx context.Context, a Agent) (Agent, bool, error) {
	if a.ClientKey == "" || a.RoleID == "" {
		return a, false, fmt.Errorf("store: client agent: %w: a role and a client key are required", ErrInvalid)
	}
	find := func() (Agent, error) {
		return scanAgent(s.db.queryRow(ctx, `SELECT `+agentColumns+` FROM agents
			WHERE role_id = ? AND credential = ? AND client_key = ? AND status NOT IN ('failed', 'terminated')`,
			a.RoleID, a.Credential, a.ClientKey))
	}
	got, err := find()
	if err == nil {
		return got, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return a, false, fmt.Errorf("store: client agent: %w", err)
	}
	a.ID, a.Kind, a.Status = newID("agent_"), AgentExternal, StatusActive
	a.CreatedAt = time.Now().UTC()
	a.UpdatedAt = a.CreatedAt
	res, err := s.db.exec(ctx, `INSERT INTO agents (`+agentColumns+`, used_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`,
		a.ID, a.RoleID, a.ParentID, a.Status, a.Kind, a.Task, a.Answer, a.ErrorCode, a.Error, a.Turns, a.Tokens, a.Owner,
		leaseStamp(a.LeaseUntil), stamp(a.CreatedAt), stamp(a.UpdatedAt), a.Credential, a.ClientKey, stamp(a.CreatedAt))
	if err != nil {
		return a, false, fmt.Errorf("store: client agent: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return a, true, nil
	}
	if got, err = find(); err != nil { // another host made it first
		return a, false, fmt.Errorf("store: client agent: %w", err)
	}
	return got, false, nil
}

// UsedAgent records that a request used the agent at, which keeps it from
// ending idle (EndIdleAgent); it tells no other host.
func (s *Store) UsedAgent(ctx context.Context, id string, at time.Time) error {
	if _, err := s.db.exec(ctx, `UPDATE agents SET used_at = ? WHERE id = ? AND used_at < ?`, stamp(at), id, stamp(at)); err != nil {
		return fmt.Errorf("store: agent used: %w", err)
	}
	return nil
}

// EndIdleAgent marks terminated, for the reason, a client's agent that no
// request has used since idleSince (UsedAgent), and reports whether it
// did: an agent another host used since stays.
func (s *Store) EndIdleAgent(ctx context.Context, id string, idleSince time.Time, reason string) (bool, error) {
	res, err := s.db.exec(ctx, `UPDATE agents SET status = ?, error = ?, updated_at = ?
		WHERE id = ? AND used_at < ? AND status NOT IN ('failed', 'terminated')`, StatusTerminated, reason, now(), id, stamp(idleSince))
	if err != nil {
		return false, fmt.Errorf("store: end idle agent: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// EndIdleClientAgents marks terminated, for the reason, every client's
// agent (ClientAgent) not final that no request has used since idleSince,
// whichever host made it, and returns their ids: the agents of clients
// that went away while the hosts that served them stopped.
func (s *Store) EndIdleClientAgents(ctx context.Context, idleSince time.Time, reason string) ([]string, error) {
	var ids []string
	err := s.tx(ctx, func(tx db) error {
		var err error
		ids, err = queryAll(ctx, tx, "idle client agents", func(row scanner) (id string, err error) { return id, row.Scan(&id) },
			`SELECT id FROM agents WHERE client_key != '' AND used_at < ? AND status NOT IN ('failed', 'terminated')`+s.eng.forUpdate(), stamp(idleSince))
		if err != nil || len(ids) == 0 {
			return err
		}
		args := []any{StatusTerminated, reason, now()}
		for _, id := range ids {
			args = append(args, id)
		}
		_, err = tx.exec(ctx, `UPDATE agents SET status = ?, error = ?, updated_at = ? WHERE id`+inIDs(len(ids)), args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: end idle client agents: %w", err)
	}
	return ids, nil
}

// RenewRun says that the run lives until until; a run whose alive_until
// has passed is taken for dead by the other hosts (RunAlive).
func (s *Store) RenewRun(ctx context.Context, runID string, until time.Time) error {
	if _, err := s.db.exec(ctx, `UPDATE host_runs SET alive_until = ? WHERE run_id = ?`, stamp(until), runID); err != nil {
		return fmt.Errorf("store: renew run: %w", err)
	}
	return nil
}

// RunAlive reports whether the run has not ended and its last renewal
// (RenewRun) has not passed, and which host it is a run of.
func (s *Store) RunAlive(ctx context.Context, runID string) (alive bool, hostID string, err error) {
	var ended, until string
	err = s.db.queryRow(ctx, `SELECT host_id, ended_at, alive_until FROM host_runs WHERE run_id = ?`, runID).Scan(&hostID, &ended, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("store: run %s: %w", runID, err)
	}
	return ended == "" && until > now(), hostID, nil
}
