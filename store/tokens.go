package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// tokenPrefix starts every token toolhost makes, so that scanners and the
// redactor recognise one.
const tokenPrefix = "thk_"

// ErrExpired is wrapped by the error of looking up a token past its expiry.
var ErrExpired = errors.New("expired")

// tokenNameRE is what a token's name may be.
var tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// The scopes of tokens: what a token opens.
const (
	// ScopeRole opens one role's routes: its MCP endpoint, its tools and
	// calls as the role.
	ScopeRole = "role"
	// ScopeMetrics opens GET /metrics alone; such a token has no role.
	ScopeMetrics = "metrics"
)

// Token is a scoped credential as the store keeps it: never the secret,
// only its hash.
type Token struct {
	// Name identifies the token for listing and revoking.
	Name string `json:"name"`
	// ID tells apart tokens made under one name (one revoked, the next made
	// later): the first 12 hex digits of the SHA-256 of its secret, which
	// reveal nothing of the secret.
	ID string `json:"id"`
	// Scope is what the token opens: [ScopeRole] or [ScopeMetrics].
	Scope string `json:"scope"`
	// RoleID is the role the token opens; "" for a metrics token.
	RoleID string `json:"roleId"`
	// Role is the role's name; "" for a metrics token.
	Role string `json:"role"`
	// CreatedAt is when the token was made.
	CreatedAt time.Time `json:"createdAt"`
	// LastUsedAt is when it last opened a request (recorded at most once a
	// minute); zero if never.
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
	// ExpiresAt is when it stops working; zero for never.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// The credentials that are not tokens (see [Agent.Credential]).
const (
	// CredentialAdmin is the admin token's (and every request's, with auth
	// disabled).
	CredentialAdmin = "admin"
	// CredentialCLI is the CLI's: the user who owns the data directory.
	CredentialCLI = "cli"
)

// Credential names the token as a credential: "token/NAME/ID".
func (t *Token) Credential() string { return "token/" + t.Name + "/" + t.ID }

// OIDCCredential names the bearer of an OpenID provider's access token with
// the subject as a credential: "oidc/SUBJECT".
func OIDCCredential(subject string) string { return "oidc/" + subject }

// Expired reports whether the token has expired at t.
func (t *Token) Expired(at time.Time) bool { return !t.ExpiresAt.IsZero() && !at.Before(t.ExpiresAt) }

// NewSecret returns a fresh random token: "thk_" (tokenPrefix) and 43
// characters of base64url (256 bits).
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// hashSecret is what the store keeps of a secret.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

const tokenSelect = `SELECT t.name, substr(t.hash, 1, 12), t.scope, coalesce(t.role_id, ''), coalesce(r.name, ''), t.created_at, t.last_used_at, t.expires_at
FROM tokens t LEFT JOIN roles r ON r.id = t.role_id`

func scanToken(row scanner) (Token, error) {
	var t Token
	var created, used, expires string
	err := row.Scan(&t.Name, &t.ID, &t.Scope, &t.RoleID, &t.Role, &created, &used, &expires)
	t.CreatedAt, t.LastUsedAt, t.ExpiresAt = parseTime(created), parseTime(used), parseTime(expires)
	return t, err
}

// CreateToken makes a token for a role (its name or id), named name (empty: a
// name is made from the role's), expiring at expires (zero: never). It
// returns the secret, which the store does not keep, and the token.
func (s *Store) CreateToken(ctx context.Context, name, role string, expires time.Time) (string, Token, error) {
	r, err := s.Role(ctx, role)
	if err != nil {
		return "", Token{}, err
	}
	return s.insertToken(ctx, Token{Name: name, Scope: ScopeRole, RoleID: r.ID, Role: r.Name, ExpiresAt: expires}, r.Name)
}

// CreateMetricsToken makes a token that opens GET /metrics and nothing else
// ([ScopeMetrics]), named name (empty: "metrics-" and a random suffix),
// expiring at expires (zero: never). It returns the secret, which the store
// does not keep, and the token.
func (s *Store) CreateMetricsToken(ctx context.Context, name string, expires time.Time) (string, Token, error) {
	return s.insertToken(ctx, Token{Name: name, Scope: ScopeMetrics, ExpiresAt: expires}, ScopeMetrics)
}

// insertToken stores a new token t with a fresh secret, named prefix and a
// random suffix when t has no name.
func (s *Store) insertToken(ctx context.Context, t Token, prefix string) (string, Token, error) {
	if t.Name == "" {
		t.Name = prefix + "-" + newID("")[:8]
	}
	if !tokenNameRE.MatchString(t.Name) {
		return "", Token{}, fmt.Errorf("store: token name %q: use up to 64 letters, digits, '.', '_' or '-', starting with a letter or digit: %w", t.Name, ErrInvalid)
	}
	secret := NewSecret()
	t.ID = hashSecret(secret)[:12]
	t.CreatedAt, t.ExpiresAt = time.Now().UTC(), t.ExpiresAt.UTC()
	var roleID, exp any = nil, ""
	if t.RoleID != "" {
		roleID = t.RoleID
	}
	if !t.ExpiresAt.IsZero() {
		exp = stamp(t.ExpiresAt)
	}
	_, err := s.db.exec(ctx, `INSERT INTO tokens (name, scope, role_id, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		t.Name, t.Scope, roleID, hashSecret(secret), stamp(t.CreatedAt), exp)
	if err != nil {
		if s.eng.uniqueViolation(err) {
			return "", Token{}, fmt.Errorf("store: token %q: %w", t.Name, ErrExists)
		}
		return "", Token{}, fmt.Errorf("store: create token: %w", err)
	}
	return secret, t, nil
}

// Tokens returns every token, oldest first.
func (s *Store) Tokens(ctx context.Context) ([]Token, error) {
	out, err := queryAll(ctx, s.db, "tokens", scanToken, tokenSelect+` ORDER BY t.created_at, t.name`)
	if out == nil && err == nil {
		out = []Token{} // none: an empty list, not null
	}
	return out, err
}

// RevokeToken deletes the token named name: from then on it opens nothing.
func (s *Store) RevokeToken(ctx context.Context, name string) error {
	res, err := s.db.exec(ctx, `DELETE FROM tokens WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("store: revoke token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: token %q: %w", name, ErrNotFound)
	}
	return s.tokensDeleted()
}

// tokensDeleted invalidates every process's token cache after a commit that
// deleted tokens.
func (s *Store) tokensDeleted() error {
	if err := s.tokens.invalidate(); err != nil {
		return fmt.Errorf("store: token cache: %w", err)
	}
	return nil
}

// LookupToken returns the token whose secret is secret, as of at: [ErrNotFound]
// for a secret no token has (never made, or revoked), [ErrExpired] for one past
// its expiry. Tokens found are cached; a revocation, or the deletion of a
// role, by any process on this data directory drops the cache before it
// returns (see tokenCache), so the next lookup anywhere refuses the token.
func (s *Store) LookupToken(ctx context.Context, secret string, at time.Time) (Token, error) {
	hash := hashSecret(secret)
	t, ok := s.tokens.get(hash)
	if !ok {
		var err error
		t, err = scanToken(s.db.queryRow(ctx, tokenSelect+` WHERE t.hash = ?`, hash))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return Token{}, fmt.Errorf("store: token: %w", ErrNotFound)
		case err != nil:
			return Token{}, fmt.Errorf("store: token: %w", err)
		}
		s.tokens.put(hash, t)
	}
	if t.Expired(at) {
		return t, fmt.Errorf("store: token %q: %w on %s", t.Name, ErrExpired, t.ExpiresAt.Format(time.RFC3339))
	}
	return t, nil
}

// maxCachedTokens bounds the token cache; past it, the cache starts afresh.
const maxCachedTokens = 4096

// tokenCache keeps the tokens found by hash, so that a request with a role
// token costs a stat, not a query. On SQLite, whatever deletes tokens (a
// revocation, a role deleted) rewrites the stamp file in the data directory
// after its commit; a lookup that finds the stamp's modification time
// changed drops the cache first. A revocation by another process therefore
// holds from the moment it returns. On PostgreSQL, where hosts share no
// directory, the deletion's notification drops every host's cache (the
// listener's invalidateLocal): a revocation holds everywhere once the
// notification arrives, milliseconds later.
type tokenCache struct {
	stamp string       // the stamp file's path; "" on PostgreSQL
	gen   atomic.Int64 // PostgreSQL: bumped by each notification

	mu     sync.Mutex
	seen   time.Time // the stamp's modification time (or gen) the entries are valid for
	byHash map[string]Token
}

func (c *tokenCache) get(hash string) (Token, bool) {
	mod := c.modTime()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !mod.Equal(c.seen) {
		c.seen, c.byHash = mod, nil
	}
	t, ok := c.byHash[hash]
	return t, ok
}

func (c *tokenCache) put(hash string, t Token) {
	mod := c.modTime()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !mod.Equal(c.seen) || len(c.byHash) >= maxCachedTokens {
		c.seen, c.byHash = mod, nil
	}
	if c.byHash == nil {
		c.byHash = map[string]Token{}
	}
	c.byHash[hash] = t
}

// modTime is the stamp's modification time, zero when there is none yet;
// on PostgreSQL, the generation.
func (c *tokenCache) modTime() time.Time {
	if c.stamp == "" {
		return time.Unix(0, c.gen.Load())
	}
	fi, err := os.Stat(c.stamp)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// invalidate tells every process's cache that tokens were deleted: it
// rewrites the stamp (a fresh modification time; on PostgreSQL the
// deletion's trigger notifies the others) and drops this process's entries.
func (c *tokenCache) invalidate() error {
	var err error
	if c.stamp != "" {
		err = os.WriteFile(c.stamp, []byte(newID("")), FileMode)
	}
	c.invalidateLocal()
	return err
}

// invalidateLocal drops this process's entries.
func (c *tokenCache) invalidateLocal() {
	c.gen.Add(1)
	c.mu.Lock()
	c.seen, c.byHash = time.Time{}, nil
	c.mu.Unlock()
}

// TouchToken records that the token named name was used at t.
func (s *Store) TouchToken(ctx context.Context, name string, at time.Time) error {
	if _, err := s.db.exec(ctx, `UPDATE tokens SET last_used_at = ? WHERE name = ?`, stamp(at), name); err != nil {
		return fmt.Errorf("store: token: %w", err)
	}
	return nil
}
