package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The statuses of an approval: pending until a decision (approved, denied,
// modified) or until its waiter gives up (expired, cancelled).
const (
	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalDenied    = "denied"
	ApprovalModified  = "modified" // approved with new arguments
	ApprovalExpired   = "expired"  // no decision before the deadline
	ApprovalCancelled = "cancelled"
)

// ErrNotPending is wrapped by the error of deciding an approval that is no
// longer pending: decided already, expired or cancelled, or past its
// deadline (its waiter is gone or about to give up).
var ErrNotPending = errors.New("not pending")

// approvalKeep is how long past its deadline an approval is kept.
const approvalKeep = 7 * 24 * time.Hour

// Approval is a call waiting for a decision, or the record of one, shared by
// the hosts of a store: the host whose call waits creates it, any host may
// decide it.
type Approval struct {
	// ID identifies the approval.
	ID string
	// CallID, Tool, Group, AgentID and Role are the waiting call's.
	CallID  string
	Tool    string
	Group   string
	AgentID string
	Role    string
	// Credential is the credential of the waiting call (see
	// [Agent.Credential]).
	Credential string
	// Arguments are what the approver sees of the call's arguments:
	// redacted, and no longer than the host's preview bound (cut to a JSON
	// string then). ArgumentsSize is the full arguments' size in bytes, and
	// ArgumentsSHA256 their SHA-256 in hex, which the call checks before it
	// runs.
	Arguments       json.RawMessage
	ArgumentsSize   int64
	ArgumentsSHA256 string
	// Rule names the role's rule that asked for the approval, and
	// RuleReason is its reason; both empty when the tool's settings did.
	Rule       string
	RuleReason string
	// RunID is the run ([Store.BeginRun]) of the host whose call waits.
	RunID string
	// Requested is when the call asked; Deadline is when its waiter gives
	// up.
	Requested time.Time
	Deadline  time.Time
	// Status is one of [ApprovalPending] … [ApprovalCancelled].
	Status string
	// Decided is when it stopped being pending; zero while pending.
	Decided time.Time
	// Reason is the decider's, for any decision.
	Reason string
	// DecidedBy names who decided: the credential of the operator who did
	// (see [Agent.Credential]) and how; "" until decided.
	DecidedBy string
	// Modified are the new arguments of [ApprovalModified].
	Modified json.RawMessage
}

// ApprovalDecision is a decision on a pending approval.
type ApprovalDecision struct {
	// Status is [ApprovalApproved], [ApprovalDenied] or [ApprovalModified].
	Status string
	// Reason explains the decision; optional.
	Reason string
	// Arguments replace the call's for [ApprovalModified]; required then.
	Arguments json.RawMessage
	// By names who decided (see [Approval.DecidedBy]).
	By string
}

const approvalColumns = `id, call_id, tool, group_id, agent_id, role, arguments, run_id, requested_at, deadline, status, decided_at, reason, modified, rule, rule_reason, credential, decided_by, arguments_size, arguments_sha256`

// CreateApproval records a pending approval. Its ID must be new
// ([ErrExists] otherwise), its Deadline set; Status is ignored. It also
// forgets approvals a week past their deadline.
func (s *Store) CreateApproval(ctx context.Context, a Approval) error {
	if a.ID == "" || a.Deadline.IsZero() {
		return fmt.Errorf("store: create approval: %w: an id and a deadline are required", ErrInvalid)
	}
	if a.Requested.IsZero() {
		a.Requested = time.Now()
	}
	// One transaction: on PostgreSQL both statements' notifications fold
	// into one.
	err := s.tx(ctx, func(tx db) error {
		if _, err := tx.exec(ctx, `DELETE FROM approvals WHERE deadline < ?`, stamp(time.Now().Add(-approvalKeep))); err != nil {
			return err
		}
		res, err := tx.exec(ctx, `INSERT INTO approvals (id, call_id, tool, group_id, agent_id, role, arguments, run_id, requested_at, deadline, status, rule, rule_reason,
			credential, arguments_size, arguments_sha256)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			a.ID, a.CallID, a.Tool, a.Group, a.AgentID, a.Role, string(a.Arguments), a.RunID, stamp(a.Requested), stamp(a.Deadline), ApprovalPending, a.Rule, a.RuleReason,
			a.Credential, a.ArgumentsSize, a.ArgumentsSHA256)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("approval %s: %w", a.ID, ErrExists)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: create approval: %w", err)
	}
	return nil
}

// PendingApprovals returns the approvals still pending and not past their
// deadline, of every host on the store, oldest first. One whose waiting
// host died stays pending in the table, but drops out of this list at its
// deadline.
func (s *Store) PendingApprovals(ctx context.Context) ([]Approval, error) {
	return queryAll(ctx, s.db, "pending approvals", scanApproval,
		`SELECT `+approvalColumns+` FROM approvals WHERE status = ? AND deadline > ? ORDER BY requested_at, id`, ApprovalPending, now())
}

// Approval returns an approval, whatever its status; [ErrNotFound] if there
// is none with id.
func (s *Store) Approval(ctx context.Context, id string) (Approval, error) {
	a, err := scanApproval(s.db.queryRow(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("store: approval %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return a, fmt.Errorf("store: approval %s: %w", id, err)
	}
	return a, nil
}

// DecideApproval decides a pending approval, on whichever host it waits,
// and returns it decided. Only one decision is taken: deciding an approval
// that is no longer pending, or is past its deadline, fails with
// [ErrNotPending] (the error says its status); an unknown id fails with
// [ErrNotFound]; a decision other than approved, denied and modified (with
// arguments) with [ErrInvalid].
func (s *Store) DecideApproval(ctx context.Context, id string, d ApprovalDecision) (Approval, error) {
	switch {
	case d.Status != ApprovalApproved && d.Status != ApprovalDenied && d.Status != ApprovalModified:
		return Approval{}, fmt.Errorf("store: decide approval %s: %w: decision %q", id, ErrInvalid, d.Status)
	case d.Status == ApprovalModified && len(d.Arguments) == 0:
		return Approval{}, fmt.Errorf("store: decide approval %s: %w: a modification needs arguments", id, ErrInvalid)
	}
	if d.Status != ApprovalModified {
		d.Arguments = nil
	}
	t := now()
	a, err := scanApproval(s.db.queryRow(ctx, `UPDATE approvals SET status = ?, decided_at = ?, reason = ?, modified = ?, decided_by = ?
		WHERE id = ? AND status = ? AND deadline > ? RETURNING `+approvalColumns,
		d.Status, t, d.Reason, string(d.Arguments), d.By, id, ApprovalPending, t))
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("store: decide approval %s: %w", id, err)
	}
	a, err = s.Approval(ctx, id)
	switch {
	case err != nil:
		return a, err
	case a.Status == ApprovalPending:
		return a, fmt.Errorf("store: decide approval %s: %w: past its deadline (%s)", id, ErrNotPending, a.Deadline.Format(time.RFC3339))
	}
	return a, fmt.Errorf("store: decide approval %s: %w: %s already", id, ErrNotPending, a.Status)
}

// EndApproval is its waiter giving up on a pending approval: status is
// [ApprovalExpired] (its deadline passed) or [ApprovalCancelled] (its call
// ended). It returns the approval as it stands after: with status, or, when
// a decision came first, with that decision. [ErrNotFound] if there is none
// with id.
func (s *Store) EndApproval(ctx context.Context, id, status string) (Approval, error) {
	if status != ApprovalExpired && status != ApprovalCancelled {
		return Approval{}, fmt.Errorf("store: end approval %s: %w: status %q", id, ErrInvalid, status)
	}
	a, err := scanApproval(s.db.queryRow(ctx, `UPDATE approvals SET status = ?, decided_at = ? WHERE id = ? AND status = ? RETURNING `+approvalColumns,
		status, now(), id, ApprovalPending))
	if errors.Is(err, sql.ErrNoRows) {
		return s.Approval(ctx, id)
	}
	if err != nil {
		return a, fmt.Errorf("store: end approval %s: %w", id, err)
	}
	return a, nil
}

// CancelRunApprovals cancels the approvals still pending that the run
// waits for: a host closing the calls of a dead run of its own. It returns
// how many it cancelled.
func (s *Store) CancelRunApprovals(ctx context.Context, runID string) (int64, error) {
	res, err := s.db.exec(ctx, `UPDATE approvals SET status = ?, decided_at = ?, reason = ? WHERE run_id = ? AND status = ?`,
		ApprovalCancelled, now(), "the host waiting for it stopped", runID, ApprovalPending)
	if err != nil {
		return 0, fmt.Errorf("store: cancel approvals of %s: %w", runID, err)
	}
	return res.RowsAffected()
}

func scanApproval(row scanner) (Approval, error) {
	var a Approval
	var args, requested, deadline, decided, modified string
	err := row.Scan(&a.ID, &a.CallID, &a.Tool, &a.Group, &a.AgentID, &a.Role, &args, &a.RunID, &requested, &deadline, &a.Status, &decided, &a.Reason, &modified, &a.Rule, &a.RuleReason,
		&a.Credential, &a.DecidedBy, &a.ArgumentsSize, &a.ArgumentsSHA256)
	if err != nil {
		return a, err
	}
	if args != "" {
		a.Arguments = json.RawMessage(args)
	}
	if modified != "" {
		a.Modified = json.RawMessage(modified)
	}
	a.Requested, a.Deadline = parseTime(requested), parseTime(deadline)
	if decided != "" {
		a.Decided = parseTime(decided)
	}
	return a, nil
}
