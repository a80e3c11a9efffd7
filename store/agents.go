package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// Kind is [AgentExternal] (the default) or [AgentRuntime].
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
	Owner string `json:"owner,omitempty"`
	// LeaseUntil is when the owner's claim lapses unless renewed (zero:
	// no lease). Once it has passed, another process may take the agent
	// ([Store.ClaimAgent]).
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	// Credential is the credential that made the agent ("admin", "cli",
	// "token/NAME/ID", "oidc/SUBJECT"; "" for an embedding program's): only
	// it, or the admin, may call as the agent.
	Credential string `json:"credential,omitempty"`
	// ClientKey names the agent among its credential's agents of its role,
	// for an agent an MCP client names ([Store.ClientAgent]); "" for others.
	ClientKey string `json:"clientKey,omitempty"`
}

// Final reports whether the agent's status can no longer change.
func (a *Agent) Final() bool { return a.Status == StatusFailed || a.Status == StatusTerminated }

const agentColumns = `id, role_id, parent_id, status, kind, task, answer, error_code, error, turns, tokens, owner, lease_until, created_at, updated_at, credential, client_key`

func scanAgent(row scanner) (Agent, error) {
	var a Agent
	var lease, created, updated string
	err := row.Scan(&a.ID, &a.RoleID, &a.ParentID, &a.Status, &a.Kind, &a.Task, &a.Answer, &a.ErrorCode, &a.Error,
		&a.Turns, &a.Tokens, &a.Owner, &lease, &created, &updated, &a.Credential, &a.ClientKey)
	a.LeaseUntil, a.CreatedAt, a.UpdatedAt = parseLease(lease), parseTime(created), parseTime(updated)
	return a, err
}

// leaseStamp is a lease's end for the database: empty for none.
func leaseStamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return stamp(t)
}

func parseLease(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	return parseTime(s)
}

// CreateAgent adds an agent of a role and returns it with its id (unless
// set), status, kind and times filled in. An agent created with an owner
// should have a lease (LeaseUntil) too: without one, only its owner's death
// on this machine frees it (see [Store.ClaimAgent]).
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
	_, err := s.db.exec(ctx, `INSERT INTO agents (`+agentColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.RoleID, a.ParentID, a.Status, a.Kind, a.Task, a.Answer, a.ErrorCode, a.Error, a.Turns, a.Tokens, a.Owner,
		leaseStamp(a.LeaseUntil), stamp(a.CreatedAt), stamp(a.UpdatedAt), a.Credential, a.ClientKey)
	if err != nil {
		return a, fmt.Errorf("store: create agent: %w", err)
	}
	return a, nil
}

// SaveAgent appends msgs to an agent's conversation, saves its status,
// answer, error and counts, and sends mail (such as its report to its
// parent), in one transaction, so that no crash or outage leaves the
// conversation ahead of the agent's answer and counts, or the answer
// recorded and its report unsent. When the agent is already final in the
// store (another process terminated it), it returns the stored agent with
// [ErrFinal]: the messages are kept and no mail is sent.
func (s *Store) SaveAgent(ctx context.Context, a Agent, msgs []AgentMessage, mail ...Mail) (Agent, error) {
	var final error
	err := s.tx(ctx, func(tx db) error {
		if err := appendMessages(ctx, tx, a.ID, msgs); err != nil {
			return fmt.Errorf("store: append messages: %w", err)
		}
		a, final = updateAgent(ctx, tx, a)
		if errors.Is(final, ErrFinal) {
			return nil // the messages stay
		}
		if final != nil {
			return final
		}
		for _, m := range mail {
			if _, err := send(ctx, tx, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return a, err
	}
	return a, final
}

// updateAgent saves an agent's status, answer, error and counts on q, as
// SaveAgent does.
func updateAgent(ctx context.Context, q db, a Agent) (Agent, error) {
	a.UpdatedAt = time.Now().UTC()
	res, err := q.exec(ctx, `UPDATE agents SET status = ?, answer = ?, error_code = ?, error = ?, turns = ?, tokens = ?, updated_at = ?
		WHERE id = ? AND status NOT IN ('failed', 'terminated')`,
		a.Status, a.Answer, a.ErrorCode, a.Error, a.Turns, a.Tokens, stamp(a.UpdatedAt), a.ID)
	if err != nil {
		return a, fmt.Errorf("store: update agent: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		stored, err := agent(ctx, q, a.ID)
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
// already final ([ErrFinal]), and returns it as stored. It changes the status
// and error only: what the agent's own saves stored (its answer, counts)
// stands, however they interleave.
func (s *Store) TerminateAgent(ctx context.Context, id, reason string) (Agent, error) {
	var a Agent
	var final error
	err := s.tx(ctx, func(tx db) error {
		res, err := tx.exec(ctx, `UPDATE agents SET status = ?, error = ?, updated_at = ?
			WHERE id = ? AND status NOT IN ('failed', 'terminated')`, StatusTerminated, reason, now(), id)
		if err != nil {
			return fmt.Errorf("store: terminate agent: %w", err)
		}
		if a, err = agent(ctx, tx, id); err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			final = fmt.Errorf("store: agent %s is %s: %w", id, a.Status, ErrFinal)
		}
		return nil
	})
	if err != nil {
		return a, err
	}
	return a, final
}

// ClaimAgent makes owner the owner of an agent that is not final, with a
// lease until ttl from now, if the agent has no owner, is owner's already,
// has a lease that has passed, or is owned by stale (a claim the caller
// knows to be dead, such as a process that no longer runs on this
// machine; "" for none). It reports whether owner now holds the agent. The
// test and the claim are one statement, so of several processes claiming
// one agent at once, one wins.
//
// Leases compare the clocks of the processes that write and read them:
// hosts sharing a database need clocks that agree to well within a lease.
func (s *Store) ClaimAgent(ctx context.Context, id, owner, stale string, ttl time.Duration) (bool, error) {
	now := time.Now()
	res, err := s.db.exec(ctx, `UPDATE agents SET owner = ?, lease_until = ?
		WHERE id = ? AND status NOT IN ('failed', 'terminated')
		AND (owner IN ('', ?, ?) OR (lease_until <> '' AND lease_until < ?))`,
		owner, stamp(now.Add(ttl)), id, owner, stale, stamp(now))
	if err != nil {
		return false, fmt.Errorf("store: claim agent: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// idsBatch bounds the ids of one statement of RenewLeases, well below
// either engine's limit on parameters.
const idsBatch = 500

// inIDs returns " IN (?, …)" for n ids.
func inIDs(n int) string { return " IN (?" + strings.Repeat(", ?", n-1) + ")" }

// RenewLeases extends to ttl from now the leases owner holds on the agents
// ids, and returns those of ids it still holds, in no particular order: an
// id missing from them was taken by another process once its lease had
// passed (or deleted), and must no longer run here.
func (s *Store) RenewLeases(ctx context.Context, owner string, ttl time.Duration, ids []string) ([]string, error) {
	until := stamp(time.Now().Add(ttl))
	held := make([]string, 0, len(ids))
	for batch := range slices.Chunk(ids, idsBatch) {
		args := []any{until, owner}
		for _, id := range batch {
			args = append(args, id)
		}
		rows, err := s.db.query(ctx, `UPDATE agents SET lease_until = ? WHERE owner = ? AND id`+inIDs(len(batch))+` RETURNING id`, args...)
		if err != nil {
			return held, fmt.Errorf("store: renew leases: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return held, fmt.Errorf("store: renew leases: %w", err)
			}
			held = append(held, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return held, fmt.Errorf("store: renew leases: %w", err)
		}
	}
	return held, nil
}

// ReleaseAgents gives up every agent owner holds, final or not, so that
// another process may take them at once rather than when their leases
// pass; it returns how many it released. A process stopping cleanly calls
// it once it no longer runs them.
func (s *Store) ReleaseAgents(ctx context.Context, owner string) (int, error) {
	res, err := s.db.exec(ctx, `UPDATE agents SET owner = '', lease_until = '' WHERE owner = ?`, owner)
	if err != nil {
		return 0, fmt.Errorf("store: release agents: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// ReleaseAgent gives up one agent owner holds, as [Store.ReleaseAgents] does,
// and reports whether owner held it.
func (s *Store) ReleaseAgent(ctx context.Context, id, owner string) (bool, error) {
	res, err := s.db.exec(ctx, `UPDATE agents SET owner = '', lease_until = '' WHERE id = ? AND owner = ?`, id, owner)
	if err != nil {
		return false, fmt.Errorf("store: release agent: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Agent returns the agent with the id.
func (s *Store) Agent(ctx context.Context, id string) (Agent, error) {
	return agent(ctx, s.db, id)
}

// agent is Agent on q.
func agent(ctx context.Context, q db, id string) (Agent, error) {
	a, err := scanAgent(q.queryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("store: agent %q: %w", id, ErrNotFound)
	}
	return a, err
}

// Agents returns every agent, oldest first.
func (s *Store) Agents(ctx context.Context) ([]Agent, error) {
	return queryAll(ctx, s.db, "agents", scanAgent, `SELECT `+agentColumns+` FROM agents ORDER BY created_at, id`)
}
