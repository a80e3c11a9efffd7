package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The statuses of a client's task (ClientTask).
const (
	TaskWorking   = "working"
	TaskCompleted = "completed"
	TaskCancelled = "cancelled"
	TaskFailed    = "failed"
)

// ClientTask is an MCP client's call run as a task (the tasks extension),
// as the hosts share it.
type ClientTask struct {
	ID         string
	AgentID    string // the agent whose call it is: to any other it does not exist
	Credential string
	RunID      string // the host run that runs it
	Status     string // a Task* status
	Message    string // its status message
	Result     string // the call's result (JSON), once completed
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

const clientTaskColumns = `id, agent_id, credential, run_id, status, message, result, created_at, updated_at`

// scanClientTask reads a row of clientTaskColumns.
func scanClientTask(row scanner) (ClientTask, error) {
	var t ClientTask
	var created, updated string
	err := row.Scan(&t.ID, &t.AgentID, &t.Credential, &t.RunID, &t.Status, &t.Message, &t.Result, &created, &updated)
	t.CreatedAt, t.UpdatedAt = parseTime(created), parseTime(updated)
	return t, err
}

// PutTask records a task that began (working), and forgets the tasks that
// ended more than ttl ago, and the oldest ended ones of its credential past
// the keep newest.
func (s *Store) PutTask(ctx context.Context, t ClientTask, ttl time.Duration, keep int) error {
	err := s.tx(ctx, func(tx db) error {
		if _, err := tx.exec(ctx, `INSERT INTO mcp_tasks (`+clientTaskColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			t.ID, t.AgentID, t.Credential, t.RunID, t.Status, t.Message, t.Result, stamp(t.CreatedAt), stamp(t.UpdatedAt)); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `DELETE FROM mcp_tasks WHERE status != 'working' AND updated_at < ?`, stamp(time.Now().Add(-ttl))); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `DELETE FROM mcp_tasks WHERE credential = ? AND status != 'working' AND id NOT IN
			(SELECT id FROM mcp_tasks WHERE credential = ? AND status != 'working' ORDER BY created_at DESC, id DESC LIMIT ?)`, t.Credential, t.Credential, keep)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put task: %w", err)
	}
	return nil
}

// Task returns the task with the id; [ErrNotFound] when there is none (it
// ended longer ago than its TTL, or never was).
func (s *Store) Task(ctx context.Context, id string) (ClientTask, error) {
	t, err := scanClientTask(s.db.queryRow(ctx, `SELECT `+clientTaskColumns+` FROM mcp_tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("store: task %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("store: task %q: %w", id, err)
	}
	return t, nil
}

// NoteTask sets a working task's status message; it tells no other host.
func (s *Store) NoteTask(ctx context.Context, id, message string) error {
	if _, err := s.db.exec(ctx, `UPDATE mcp_tasks SET message = ?, updated_at = ? WHERE id = ? AND status = 'working'`, message, now(), id); err != nil {
		return fmt.Errorf("store: note task: %w", err)
	}
	return nil
}

// EndTask ends a working task with the status, message and result, and
// returns it as it stands after: a task ended already (cancelled through
// another host, failed for a host taken for dead) stays as it is.
func (s *Store) EndTask(ctx context.Context, id, status, message, result string) (ClientTask, error) {
	if status == TaskWorking {
		return ClientTask{}, fmt.Errorf("store: end task %s: %w: status %q", id, ErrInvalid, status)
	}
	if _, err := s.db.exec(ctx, `UPDATE mcp_tasks SET status = ?, message = ?, result = ?, updated_at = ? WHERE id = ? AND status = 'working'`,
		status, message, result, now(), id); err != nil {
		return ClientTask{}, fmt.Errorf("store: end task: %w", err)
	}
	return s.Task(ctx, id)
}

// EndedTasks returns, of the tasks with the ids, those that are no longer
// working, by id: the running host's tasks that another host cancelled.
func (s *Store) EndedTasks(ctx context.Context, ids []string) (map[string]ClientTask, error) {
	out := map[string]ClientTask{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	tasks, err := queryAll(ctx, s.db, "ended tasks", scanClientTask,
		`SELECT `+clientTaskColumns+` FROM mcp_tasks WHERE status != 'working' AND id`+inIDs(len(ids)), args...)
	for _, t := range tasks {
		out[t.ID] = t
	}
	return out, err
}

// The statuses of a held call's round (ClientRound).
const (
	RoundAsking    = "asking"    // its client was sent it
	RoundAnswered  = "answered"  // a retry on another host left the client's answers
	RoundResuming  = "resuming"  // the holding host took the answers
	RoundDone      = "done"      // the holding host left its reply
	RoundCancelled = "cancelled" // its host was taken for dead, or the retry waiting went away
)

// ClientRound is a round of a held call, named by its request state, as
// the hosts share it.
type ClientRound struct {
	State   string
	AgentID string // the agent whose call it is
	Method  string // the request held: tools/call, prompts/get, resources/read
	RunID   string // the host run holding the call
	Status  string // a Round* status
	Answers string // the client's answers (JSON), once answered
	Reply   string // the holding host's reply (JSON), once done
	Expires time.Time
}

const clientRoundColumns = `state, agent_id, method, run_id, status, answers, reply, expires_at`

// scanClientRound reads a row of clientRoundColumns.
func scanClientRound(row scanner) (ClientRound, error) {
	var r ClientRound
	var expires string
	err := row.Scan(&r.State, &r.AgentID, &r.Method, &r.RunID, &r.Status, &r.Answers, &r.Reply, &expires)
	r.Expires = parseTime(expires)
	return r, err
}

// PutRound records a round its client was sent (asking), and forgets the
// rounds past their expiry.
func (s *Store) PutRound(ctx context.Context, r ClientRound) error {
	err := s.tx(ctx, func(tx db) error {
		if _, err := tx.exec(ctx, `INSERT INTO mcp_rounds (`+clientRoundColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			r.State, r.AgentID, r.Method, r.RunID, RoundAsking, "", "", stamp(r.Expires)); err != nil {
			return err
		}
		_, err := tx.exec(ctx, `DELETE FROM mcp_rounds WHERE expires_at < ?`, now())
		return err
	})
	if err != nil {
		return fmt.Errorf("store: put round: %w", err)
	}
	return nil
}

// Round returns the round the state names; [ErrNotFound] when none does.
func (s *Store) Round(ctx context.Context, state string) (ClientRound, error) {
	r, err := scanClientRound(s.db.queryRow(ctx, `SELECT `+clientRoundColumns+` FROM mcp_rounds WHERE state = ?`, state))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("store: round: %w", ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("store: round: %w", err)
	}
	return r, nil
}

// MoveRound changes a round's status from one of from to to, with the
// answers or reply given (those not empty), and reports whether it did: of
// two hosts moving one round at once, one does.
func (s *Store) MoveRound(ctx context.Context, state, to, answers, reply string, from ...string) (bool, error) {
	q := `UPDATE mcp_rounds SET status = ?, answers = CASE WHEN ? = '' THEN answers ELSE ? END, reply = CASE WHEN ? = '' THEN reply ELSE ? END WHERE state = ? AND status`
	args := []any{to, answers, answers, reply, reply, state}
	q += inIDs(len(from))
	for _, f := range from {
		args = append(args, f)
	}
	res, err := s.db.exec(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("store: move round: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// RunRounds returns the rounds of the run's held calls in one of the
// statuses.
func (s *Store) RunRounds(ctx context.Context, runID string, status ...string) ([]ClientRound, error) {
	args := []any{runID}
	for _, st := range status {
		args = append(args, st)
	}
	return queryAll(ctx, s.db, "rounds of "+runID, scanClientRound,
		`SELECT `+clientRoundColumns+` FROM mcp_rounds WHERE run_id = ? AND status`+inIDs(len(status)), args...)
}
