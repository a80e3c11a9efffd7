package host

import (
	"context"
	"time"

	"github.com/toolhost/toolhost/store"
)

// Create makes a role token (see [store.Store.CreateToken]) and records a
// token.created event naming who made it (by: "api", "cli" …). It returns
// the secret, which is kept nowhere.
func (ts Tokens) Create(ctx context.Context, name, role string, expires time.Time, by string) (string, store.Token, error) {
	h := ts.h
	secret, t, err := h.store.CreateToken(ctx, name, role, expires)
	return secret, t, h.tokenCreated(t, by, err)
}

// CreateMetrics makes a token that opens GET /metrics alone (see
// [store.Store.CreateMetricsToken]) and records a token.created event naming who
// made it. It returns the secret, which is kept nowhere.
func (ts Tokens) CreateMetrics(ctx context.Context, name string, expires time.Time, by string) (string, store.Token, error) {
	h := ts.h
	secret, t, err := h.store.CreateMetricsToken(ctx, name, expires)
	return secret, t, h.tokenCreated(t, by, err)
}

// tokenCreated records the token.created event of t unless its creation
// failed with err, which it returns.
func (h *Host) tokenCreated(t store.Token, by string, err error) error {
	if err != nil {
		return err
	}
	payload := map[string]any{"name": t.Name, "scope": t.Scope, "by": by}
	if !t.ExpiresAt.IsZero() {
		payload["expiresAt"] = t.ExpiresAt
	}
	h.events.Emit(store.Event{Type: store.EventTokenCreated, Role: t.Role, Payload: payload})
	return nil
}

// Revoke revokes a role token (see [store.Store.RevokeToken]) and records a
// token.revoked event naming who revoked it.
func (ts Tokens) Revoke(ctx context.Context, name, by string) error {
	h := ts.h
	err := h.store.RevokeToken(ctx, name)
	if err == nil {
		h.events.Emit(store.Event{Type: store.EventTokenRevoked, Payload: map[string]any{"name": name, "by": by}})
	}
	return err
}
