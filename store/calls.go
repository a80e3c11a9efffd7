package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// CallResult is the stored outcome of a call, replayed when its call id
// repeats.
type CallResult struct {
	CallID   string
	ArgsHash string // identifies the call's tool and arguments
	Result   []byte // the result envelope as JSON
	Created  time.Time
}

// SaveCallResult stores a call's result, filling in its claim
// ([Store.ClaimCall]) when there is one; a call id already saved keeps its
// first result.
func (s *Store) SaveCallResult(ctx context.Context, r CallResult) error {
	_, err := s.db.exec(ctx, `INSERT INTO call_results (call_id, args_hash, result, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (call_id) DO UPDATE SET result = excluded.result, created_at = excluded.created_at WHERE call_results.result = ''`,
		r.CallID, r.ArgsHash, string(r.Result), stamp(r.Created))
	if err != nil {
		return fmt.Errorf("store: save call result: %w", err)
	}
	return nil
}

// ClaimCall claims a call id for a run of its call, on any host sharing the
// store: claimed when the caller is to run it — no call had the id, the one
// that had it left its result before notBefore (past the idempotency
// window), or its claim dates from before stale (its host died or stalled
// mid-call). Otherwise it returns the id's row: its result, or a nil Result
// while another caller runs it. A claim is a row without a result, filled in
// by [Store.SaveCallResult] or removed by [Store.ReleaseCall].
func (s *Store) ClaimCall(ctx context.Context, callID, argsHash string, notBefore, stale time.Time) (bool, CallResult, error) {
	r := CallResult{CallID: callID}
	for {
		now := stamp(time.Now())
		res, err := s.db.exec(ctx, `INSERT INTO call_results (call_id, args_hash, result, created_at) VALUES (?, ?, '', ?) ON CONFLICT DO NOTHING`,
			callID, argsHash, now)
		if err != nil {
			return false, r, fmt.Errorf("store: claim call: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return true, r, nil
		}
		var result, created string
		err = s.db.queryRow(ctx, `SELECT args_hash, result, created_at FROM call_results WHERE call_id = ?`, callID).Scan(&r.ArgsHash, &result, &created)
		if errors.Is(err, sql.ErrNoRows) {
			continue // released in between: claim again
		}
		if err != nil {
			return false, r, fmt.Errorf("store: claim call: %w", err)
		}
		r.Created = parseTime(created)
		if result != "" {
			r.Result = []byte(result)
		}
		expired := result != "" && r.Created.Before(notBefore)
		stalled := result == "" && r.Created.Before(stale) && r.ArgsHash == argsHash
		if !expired && !stalled {
			return false, r, nil
		}
		// Take the row over, unless another caller did first.
		res, err = s.db.exec(ctx, `UPDATE call_results SET args_hash = ?, result = '', created_at = ? WHERE call_id = ? AND created_at = ?`,
			argsHash, now, callID, created)
		if err != nil {
			return false, r, fmt.Errorf("store: claim call: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return true, CallResult{CallID: callID}, nil
		}
	}
}

// ReleaseCall gives up a claim that left no result (the call failed to
// run), so that the id may run again.
func (s *Store) ReleaseCall(ctx context.Context, callID string) error {
	if _, err := s.db.exec(ctx, `DELETE FROM call_results WHERE call_id = ? AND result = ''`, callID); err != nil {
		return fmt.Errorf("store: release call: %w", err)
	}
	return nil
}

// CallResult returns the stored result of a call id, if it was saved after
// notBefore.
func (s *Store) CallResult(ctx context.Context, callID string, notBefore time.Time) (CallResult, error) {
	r := CallResult{CallID: callID}
	var result, created string
	err := s.db.queryRow(ctx, `SELECT args_hash, result, created_at FROM call_results WHERE call_id = ? AND created_at >= ? AND result != ''`,
		callID, stamp(notBefore)).Scan(&r.ArgsHash, &result, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("store: call %q: %w", callID, ErrNotFound)
	}
	r.Result, r.Created = []byte(result), parseTime(created)
	return r, err
}

// PruneCallResults deletes the results saved before cutoff.
func (s *Store) PruneCallResults(ctx context.Context, cutoff time.Time) (int64, error) {
	res, err := s.db.exec(ctx, `DELETE FROM call_results WHERE created_at < ?`, stamp(cutoff))
	if err != nil {
		return 0, fmt.Errorf("store: prune call results: %w", err)
	}
	return res.RowsAffected()
}
