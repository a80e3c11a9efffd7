package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// AgentMessage is one message of an agent's conversation with its model.
type AgentMessage struct {
	// Seq numbers the agent's messages from 1, in order.
	Seq  int    `json:"seq"`
	Role string `json:"role"`
	// Content is the message's text.
	Content string `json:"content,omitempty"`
	// ToolCalls is an assistant's tool calls as a JSON array.
	ToolCalls  json.RawMessage `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Name       string          `json:"name,omitempty"`
	Time       time.Time       `json:"time"`
}

// AppendMessages adds messages to the end of an agent's conversation,
// numbering them after the last.
func (s *Store) AppendMessages(ctx context.Context, agentID string, msgs []AgentMessage) error {
	if err := s.tx(ctx, func(tx db) error { return appendMessages(ctx, tx, agentID, msgs) }); err != nil {
		return fmt.Errorf("store: append messages: %w", err)
	}
	return nil
}

// appendMessages is AppendMessages in the transaction tx.
func appendMessages(ctx context.Context, tx db, agentID string, msgs []AgentMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	var last int
	if err := tx.queryRow(ctx, `SELECT coalesce(max(seq), 0) FROM agent_messages WHERE agent_id = ?`, agentID).Scan(&last); err != nil {
		return err
	}
	return insertMessages(ctx, tx, agentID, last, msgs)
}

// ReplaceMessages makes msgs the agent's whole conversation (after a
// compression), numbered from 1.
func (s *Store) ReplaceMessages(ctx context.Context, agentID string, msgs []AgentMessage) error {
	err := s.tx(ctx, func(tx db) error {
		if _, err := tx.exec(ctx, `DELETE FROM agent_messages WHERE agent_id = ?`, agentID); err != nil {
			return err
		}
		return insertMessages(ctx, tx, agentID, 0, msgs)
	})
	if err != nil {
		return fmt.Errorf("store: replace messages: %w", err)
	}
	return nil
}

func insertMessages(ctx context.Context, tx db, agentID string, last int, msgs []AgentMessage) error {
	stmt, err := tx.prepare(ctx, `INSERT INTO agent_messages (agent_id, seq, role, content, tool_calls, tool_call_id, name, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i, m := range msgs {
		if m.Time.IsZero() {
			m.Time = time.Now()
		}
		if _, err := stmt.ExecContext(ctx, agentID, last+i+1, m.Role, m.Content, string(m.ToolCalls), m.ToolCallID, m.Name, stamp(m.Time)); err != nil {
			return err
		}
	}
	return nil
}

// Messages returns an agent's conversation, oldest first.
func (s *Store) Messages(ctx context.Context, agentID string) ([]AgentMessage, error) {
	rows, err := s.db.query(ctx, `SELECT seq, role, content, tool_calls, tool_call_id, name, ts FROM agent_messages WHERE agent_id = ? ORDER BY seq`, agentID)
	if err != nil {
		return nil, fmt.Errorf("store: messages: %w", err)
	}
	defer rows.Close()
	var out []AgentMessage
	for rows.Next() {
		var m AgentMessage
		var calls, ts string
		if err := rows.Scan(&m.Seq, &m.Role, &m.Content, &calls, &m.ToolCallID, &m.Name, &ts); err != nil {
			return nil, fmt.Errorf("store: messages: %w", err)
		}
		if calls != "" {
			m.ToolCalls = json.RawMessage(calls)
		}
		m.Time = parseTime(ts)
		out = append(out, m)
	}
	return out, rows.Err()
}

// Mail is a message from one agent (or an operator: From empty) to another.
type Mail struct {
	ID   int64     `json:"id"`
	To   string    `json:"to"`
	From string    `json:"from,omitempty"`
	Body string    `json:"body"`
	Sent time.Time `json:"sent"`
	// Read is when the recipient took the message; zero while unread.
	Read time.Time `json:"read,omitzero"`
}

// Send puts a message in an agent's mailbox and returns it with its id.
func (s *Store) Send(ctx context.Context, m Mail) (Mail, error) {
	return send(ctx, s.db, m)
}

// send is Send on q.
func send(ctx context.Context, q db, m Mail) (Mail, error) {
	m.Sent = time.Now().UTC()
	err := q.queryRow(ctx, `INSERT INTO mailbox (to_agent, from_agent, body, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
		m.To, m.From, m.Body, stamp(m.Sent)).Scan(&m.ID)
	if err != nil {
		return m, fmt.Errorf("store: send: %w", err)
	}
	return m, nil
}

// TakeUnread marks an agent's unread messages read and returns them, oldest
// first: each message is taken once. In the same transaction it appends
// what into makes of each to the agent's conversation, so that a message is
// never taken without reaching the conversation.
func (s *Store) TakeUnread(ctx context.Context, agentID string, into func(Mail) AgentMessage) ([]Mail, error) {
	var out []Mail
	err := s.tx(ctx, func(tx db) error {
		var err error
		// The rows stay locked until the commit: a concurrent taker (another
		// host's) waits, then finds them read.
		if out, err = mails(ctx, tx, `WHERE to_agent = ? AND read_at = '' ORDER BY id`+s.eng.forUpdate(), agentID); err != nil || len(out) == 0 {
			return err
		}
		read := time.Now().UTC()
		for i := range out {
			out[i].Read = read
		}
		if _, err = tx.exec(ctx, `UPDATE mailbox SET read_at = ? WHERE to_agent = ? AND read_at = '' AND id <= ?`, stamp(read), agentID, out[len(out)-1].ID); err != nil {
			return err
		}
		msgs := make([]AgentMessage, len(out))
		for i, m := range out {
			msgs[i] = into(m)
		}
		return appendMessages(ctx, tx, agentID, msgs)
	})
	if err != nil {
		return nil, fmt.Errorf("store: take unread: %w", err)
	}
	return out, nil
}

// Unread returns the ids of the agents that have unread mail.
func (s *Store) Unread(ctx context.Context) (map[string]bool, error) {
	rows, err := s.db.query(ctx, `SELECT DISTINCT to_agent FROM mailbox WHERE read_at = ''`)
	if err != nil {
		return nil, fmt.Errorf("store: unread: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: unread: %w", err)
		}
		out[id] = true
	}
	return out, rows.Err()
}

// Mailbox returns every message sent to an agent, oldest first.
func (s *Store) Mailbox(ctx context.Context, agentID string) ([]Mail, error) {
	out, err := mails(ctx, s.db, `WHERE to_agent = ? ORDER BY id`, agentID)
	if err != nil {
		return nil, fmt.Errorf("store: mailbox: %w", err)
	}
	return out, nil
}

func mails(ctx context.Context, q db, where string, args ...any) ([]Mail, error) {
	rows, err := q.query(ctx, `SELECT id, to_agent, from_agent, body, created_at, read_at FROM mailbox `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Mail
	for rows.Next() {
		var m Mail
		var sent, read string
		if err := rows.Scan(&m.ID, &m.To, &m.From, &m.Body, &sent, &read); err != nil {
			return nil, err
		}
		m.Sent, m.Read = parseTime(sent), parseTime(read)
		out = append(out, m)
	}
	return out, rows.Err()
}

// Artifact is the index entry of a stored artifact. An artifact belongs to
// the role that stored it: that role reads it, and the roles it shares it
// with ([Store.ShareArtifacts]); to any other, its id names nothing.
type Artifact struct {
	// ID names it: random, 64 hex digits, saying nothing of its bytes (one
	// stored before artifacts belonged to roles keeps the SHA-256 of its
	// bytes as its id).
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	MIME      string    `json:"mime,omitempty"`
	Size      int64     `json:"size"`
	CreatedBy string    `json:"createdBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Role is the name of the role of the agent that stored it, whose
	// quota counts it.
	Role string `json:"role,omitempty"`
	// RoleID is the id of that role, which owns it; "" for the operator's
	// (a call without a role).
	RoleID string `json:"-"`
}

// readable is the condition on an artifact a that the role with the id
// given (its two parameters) may read it.
const readable = `(a.role_id = ? OR EXISTS (SELECT 1 FROM artifact_shares s WHERE s.id = a.id AND s.role_id = ?))`

// Artifact returns the index entry of the artifact id if the role with the
// id roleID may read it (its own, or one shared with it); otherwise the
// error wraps [ErrNotFound], as for an id that names nothing.
func (s *Store) Artifact(ctx context.Context, id, roleID string) (Artifact, error) {
	a := Artifact{ID: id}
	var created string
	err := s.db.queryRow(ctx, `SELECT name, mime, size, created_by, role, role_id, created_at FROM artifacts a WHERE a.id = ? AND `+readable, id, roleID, roleID).
		Scan(&a.Name, &a.MIME, &a.Size, &a.CreatedBy, &a.Role, &a.RoleID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("store: artifact %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return a, fmt.Errorf("store: artifact %s: %w", id, err)
	}
	a.CreatedAt = parseTime(created)
	return a, nil
}

// ArtifactData returns the bytes kept in the database of the artifact id,
// if the role with the id roleID may read it, as [Store.Artifact].
func (s *Store) ArtifactData(ctx context.Context, id, roleID string) ([]byte, error) {
	var data []byte
	err := s.db.queryRow(ctx, `SELECT d.data FROM artifact_data d JOIN artifacts a ON a.id = d.id WHERE d.id = ? AND `+readable, id, roleID, roleID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: artifact %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: artifact %s: %w", id, err)
	}
	return data, nil
}

// maxShares bounds the artifacts and the roles of one [Store.ShareArtifacts].
const maxShares = 64

// ShareArtifacts lets the roles with the ids roles read the artifacts ids,
// each of which the role with the id owner must own: an artifact shared
// with it is not its to share on. It shares all or none: an id that names
// no artifact of owner makes an error that wraps [ErrNotFound], whether it
// names another role's artifact or nothing. Sharing with owner itself, or
// again, changes nothing.
func (s *Store) ShareArtifacts(ctx context.Context, owner string, ids, roles []string) error {
	if len(ids) > maxShares || len(roles) > maxShares {
		return fmt.Errorf("store: share artifacts: %d artifacts with %d roles, more than %d", len(ids), len(roles), maxShares)
	}
	err := s.tx(ctx, func(tx db) error {
		if err := s.eng.lock(ctx, tx, "storage"); err != nil { // as evictions take it
			return err
		}
		for _, id := range ids {
			var n int
			if err := tx.queryRow(ctx, `SELECT count(*) FROM artifacts WHERE id = ? AND role_id = ?`, id, owner).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("artifact %q: %w", id, ErrNotFound)
			}
			for _, r := range roles {
				if r == owner {
					continue
				}
				if _, err := tx.exec(ctx, `INSERT INTO artifact_shares (id, role_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, id, r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: share artifacts: %w", err)
	}
	return nil
}
