package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// The agents as the page lists them, and how the ended ones leave: an
// agent not final (active, running, waiting) is listed before every final
// one, the newest first; the final ones follow, the most recently ended
// first, until [Store.RemoveEndedAgents] removes them (migrations/*/020).

// agentPhase is one part of the list: its agents' condition, and the
// column that orders them (newest first, then by id) and that a cursor
// holds.
type agentPhase struct {
	name, where, at string
}

// agentPhases are the parts of the list, in order.
var agentPhases = []agentPhase{
	{"live", `status NOT IN ('failed', 'terminated')`, "created_at"},
	{"ended", `status IN ('failed', 'terminated')`, "updated_at"},
}

// agentCursor is where a page of the list ends: the phase of its last
// agent, that agent's time in the phase's column, and its id.
type agentCursor struct {
	phase  int
	at, id string
}

// String encodes the cursor as ListAgents hands it out.
func (c agentCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(agentPhases[c.phase].name + "|" + c.at + "|" + c.id))
}

// parseAgentCursor decodes a cursor ListAgents handed out; "" is the list's
// start.
func parseAgentCursor(s string) (agentCursor, error) {
	if s == "" {
		return agentCursor{}, nil
	}
	bad := fmt.Errorf("store: agent list cursor %q: %w", s, ErrInvalid)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return agentCursor{}, bad
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 || parts[2] == "" {
		return agentCursor{}, bad
	}
	for i, p := range agentPhases {
		if p.name == parts[0] {
			return agentCursor{phase: i, at: parts[1], id: parts[2]}, nil
		}
	}
	return agentCursor{}, bad
}

// ListAgents returns up to limit agents (at least 1) after the cursor a
// previous page returned ("" for the first page): the agents not final,
// newest first, then the final ones, the most recently ended first. next
// is the cursor of the following page, "" after the last. An agent that
// ends while a client pages may be listed twice or not at all; the others
// are listed once.
func (s *Store) ListAgents(ctx context.Context, cursor string, limit int) (agents []Agent, next string, err error) {
	c, err := parseAgentCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	limit = max(limit, 1)
	for i := c.phase; i < len(agentPhases); i++ {
		p := agentPhases[i]
		q := `SELECT ` + agentColumns + ` FROM agents WHERE ` + p.where
		args := []any{}
		if i == c.phase && c.id != "" {
			q += ` AND (` + p.at + `, id) < (?, ?)`
			args = append(args, c.at, c.id)
		}
		q += ` ORDER BY ` + p.at + ` DESC, id DESC LIMIT ?`
		rows, err := queryAll(ctx, s.db, "list agents", scanAgent, q, append(args, limit-len(agents)+1)...)
		if err != nil {
			return nil, "", err
		}
		if len(agents)+len(rows) > limit {
			agents = append(agents, rows[:limit-len(agents)]...)
			return agents, cursorAfter(agents[len(agents)-1]).String(), nil
		}
		agents = append(agents, rows...)
	}
	return agents, "", nil
}

// cursorAfter is the cursor of a page whose last agent is a.
func cursorAfter(a Agent) agentCursor {
	if a.Final() {
		return agentCursor{phase: 1, at: stamp(a.UpdatedAt), id: a.ID}
	}
	return agentCursor{phase: 0, at: stamp(a.CreatedAt), id: a.ID}
}

// RemoveEndedAgents deletes the agents that have been final (failed or
// terminated) since before before, with their conversations, mailboxes
// and loaded tools, and returns their ids; an agent not final is never
// removed, whatever its age. It deletes idsBatch agents a statement, each
// its own transaction. Their events stay, under the events' own
// retention.
func (s *Store) RemoveEndedAgents(ctx context.Context, before time.Time) ([]string, error) {
	var removed []string
	for {
		ids, err := queryAll(ctx, s.db, "remove ended agents", func(row scanner) (id string, err error) { return id, row.Scan(&id) },
			`DELETE FROM agents WHERE id IN (SELECT id FROM agents WHERE `+agentPhases[1].where+` AND updated_at < ? ORDER BY updated_at LIMIT ?) RETURNING id`,
			stamp(before), idsBatch)
		removed = append(removed, ids...)
		if err != nil || len(ids) < idsBatch {
			return removed, err
		}
	}
}
