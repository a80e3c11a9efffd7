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

// SaveCallResult stores a call's result; a call id already saved keeps its
// first result.
func (s *Store) SaveCallResult(ctx context.Context, r CallResult) error {
	_, err := s.db.exec(ctx, `INSERT INTO call_results (call_id, args_hash, result, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		r.CallID, r.ArgsHash, string(r.Result), stamp(r.Created))
	if err != nil {
		return fmt.Errorf("store: save call result: %w", err)
	}
	return nil
}

// CallResult returns the stored result of a call id, if it was saved after
// notBefore.
func (s *Store) CallResult(ctx context.Context, callID string, notBefore time.Time) (CallResult, error) {
	r := CallResult{CallID: callID}
	var result, created string
	err := s.db.queryRow(ctx, `SELECT args_hash, result, created_at FROM call_results WHERE call_id = ? AND created_at >= ?`,
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
