package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

// AdminTokenFile is the name of the generated admin token's file in the data
// directory.
const AdminTokenFile = "admin.token"

// touchEvery is how often a token's last use is written to the store at most.
const touchEvery = time.Minute

// AdminToken returns the admin token of a deployment whose data directory is
// dataDir: the configured one (auth { token } or TOOLHOST_TOKEN), or else
// the one in dataDir/admin.token, which it generates (mode 0600, the
// directory 0700) when missing. It returns "" when auth is disabled.
func AdminToken(cfg *config.Config, dataDir string) (string, error) {
	switch {
	case cfg.Auth.Disabled:
		return "", nil
	case cfg.Auth.Token != "":
		return cfg.Auth.Token, nil
	}
	path := filepath.Join(dataDir, AdminTokenFile)
	if err := os.MkdirAll(dataDir, store.DirMode); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		b, err = createAdminToken(path)
	}
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < config.MinTokenLength {
		return "", fmt.Errorf("admin token: %s holds %d characters, fewer than %d: delete it, and a new one is made at the next start", path, len(token), config.MinTokenLength)
	}
	return token, nil
}

// createAdminToken writes a new token to path, unless another process did
// first: the token is written whole to a private temporary file, then linked
// to path, which never replaces an existing file. It returns what path holds.
func createAdminToken(path string) ([]byte, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".admin-token-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(store.NewSecret() + "\n")
	if err = errors.Join(err, tmp.Sync(), tmp.Close()); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	return os.ReadFile(path)
}

// principal is who a request is from: the admin, a scoped token, or the
// bearer of an OpenID provider's access token.
type principal struct {
	admin bool
	token store.Token // a role or metrics token's record, when not admin
	oidc  *oidcPrincipal
}

// oidcPrincipal is the bearer of an OpenID provider's access token.
type oidcPrincipal struct {
	subject string
	roles   []string // the roles claim's values
	roleIDs []string // the ids of the roles they name that exist
}

// opens reports whether the principal may use the role with the id.
func (p principal) opens(roleID string) bool {
	return p.admin || p.token.Scope == store.ScopeRole && p.token.RoleID == roleID ||
		p.oidc != nil && slices.Contains(p.oidc.roleIDs, roleID)
}

// subject is the principal that the events of its calls name: an access
// token's subject; "" for the admin and role tokens, whose calls' events
// name their agent and role alone.
func (p principal) subject() string {
	if p.oidc == nil {
		return ""
	}
	return p.oidc.subject
}

// credential names the credential the principal came with (see
// [toolhost.CallContext.Credential]): what the MCP front holds per
// credential (sessions, agents, their tasks and held calls), what a call's
// limits count, whose an agent is, and what the events name. "admin" for
// the admin token (every request's, with auth disabled), "oidc/SUBJECT"
// for an OpenID provider's access token, else "token/NAME/ID": a token
// made later under a revoked one's name is another credential.
func (p principal) credential() string {
	switch {
	case p.oidc != nil:
		return store.OIDCCredential(p.oidc.subject)
	case p.admin:
		return store.CredentialAdmin
	}
	return p.token.Credential()
}

// permits reports whether the principal may reach the route with the
// pattern: the admin every route, a metrics token GET /metrics alone, a role
// token the role routes (whose handlers check its role).
func (s *Server) permits(p principal, pattern string) bool {
	switch {
	case p.admin:
		return true
	case p.token.Scope == store.ScopeMetrics:
		return pattern == metricsPattern
	}
	return s.roleRoutes[pattern]
}

// refusal is the error for a token used outside its scope.
func (p principal) refusal(what string) error {
	if p.token.Scope == store.ScopeMetrics {
		return toolhost.Errorf(toolhost.CodePolicy, "%s: refused: token %q is a metrics token; it opens GET /metrics and nothing else", what, p.token.Name)
	}
	if p.oidc != nil {
		return toolhost.Errorf(toolhost.CodePolicy,
			"%s: refused: the access token of %q opens the roles its claim names (%s), their /mcp/ROLE, GET /api/roles/ROLE, GET /api/roles/ROLE/tools and POST /api/call as them, and nothing else",
			what, p.oidc.subject, strings.Join(p.oidc.roles, ", "))
	}
	return toolhost.Errorf(toolhost.CodePolicy,
		"%s: refused: token %q is for role %s; it opens /mcp/%[3]s, GET /api/roles/%[3]s, GET /api/roles/%[3]s/tools and POST /api/call as role %[3]s, and nothing else",
		what, p.token.Name, p.token.Role)
}

type principalKey struct{}

// principalOf returns the principal the guard found for r.
func principalOf(r *http.Request) principal {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p
}

// authenticator checks credentials: the admin token, compared in constant
// time, a role token, looked up by store.LookupToken (whose cache a
// revocation by any process drops at once), or with auth { oidc }, a JWT
// access token of the OpenID provider.
type authenticator struct {
	admin  string // "": auth disabled
	st     *store.Store
	oidc   *oidcVerifier                    // nil without auth { oidc }
	roleID func(name string) (string, bool) // the id of the role with the name or id

	mu      sync.Mutex
	touched map[string]time.Time // token name → last use written
}

// authenticate returns the principal of r, or an error to answer with 401.
func (a *authenticator) authenticate(r *http.Request) (principal, error) {
	if a.admin == "" {
		return principal{admin: true}, nil
	}
	header := r.Header.Get("Authorization")
	if len(header) > maxAuthorization {
		return principal{}, toolhost.Errorf(toolhost.CodePolicy, "the Authorization header is %d bytes, more than %d: refused unread", len(header), maxAuthorization)
	}
	scheme, secret, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") || secret == "" { // a scheme is case-insensitive (RFC 9110)
		return principal{}, toolhost.Errorf(toolhost.CodePolicy, "a bearer token is required: send Authorization: Bearer TOKEN (toolhost token prints the admin token; toolhost tokens create -role R makes one for a role)")
	}
	if subtle.ConstantTimeCompare([]byte(secret), []byte(a.admin)) == 1 {
		return principal{admin: true}, nil
	}
	now := time.Now()
	if a.oidc != nil && strings.Count(secret, ".") == 2 { // a JWT; our tokens have no dot
		return a.fromOIDC(r.Context(), secret, now)
	}
	t, err := a.st.LookupToken(r.Context(), secret, now)
	switch {
	case errors.Is(err, store.ErrExpired):
		return principal{}, toolhost.Errorf(toolhost.CodePolicy, "token %q expired on %s", t.Name, t.ExpiresAt.Format(time.RFC3339))
	case errors.Is(err, store.ErrNotFound):
		return principal{}, toolhost.Errorf(toolhost.CodePolicy, "the bearer token is not valid (never issued, or revoked)")
	case err != nil:
		return principal{}, err
	}
	a.touch(r.Context(), t.Name, now)
	return principal{token: t}, nil
}

// fromOIDC returns the principal of an OpenID provider's access token: the
// admin when it carries the admin role or scope, else the roles its claim
// names (those that exist).
func (a *authenticator) fromOIDC(ctx context.Context, raw string, now time.Time) (principal, error) {
	c, err := a.oidc.verify(ctx, raw, now)
	var scope errScope
	switch {
	case errors.As(err, &scope):
		return principal{}, toolhost.Errorf(toolhost.CodePolicy, "%w", err)
	case err != nil:
		return principal{}, toolhost.Errorf(toolhost.CodePolicy, "the access token is not valid: %v", err)
	}
	p := principal{admin: a.oidc.admin(c), oidc: &oidcPrincipal{subject: c.subject, roles: c.roles}}
	for _, name := range c.roles {
		if id, ok := a.roleID(name); ok {
			p.oidc.roleIDs = append(p.oidc.roleIDs, id)
		}
	}
	return p, nil
}

// maxAuthorization bounds the Authorization header: a longer one is
// refused before any work that grows with it (hashing, parsing, a
// signature's check).
const maxAuthorization = 16 << 10

// touch records a token's use, at most once per touchEvery.
func (a *authenticator) touch(ctx context.Context, name string, now time.Time) {
	a.mu.Lock()
	due := now.Sub(a.touched[name]) >= touchEvery
	if due {
		a.touched[name] = now
	}
	a.mu.Unlock()
	if due {
		_ = a.st.TouchToken(ctx, name, now)
	}
}

// TokenBody is the body of POST /api/auth/tokens.
type TokenBody struct {
	// Scope is what the token opens: "role" (the default) its role's routes,
	// "metrics" GET /metrics alone.
	Scope string `json:"scope,omitempty"`
	// Role is the role the token opens (its name or id); none for a metrics
	// token.
	Role string `json:"role,omitempty"`
	// Name names the token; empty: one is made from the role's name.
	Name string `json:"name,omitempty"`
	// Expires is how long the token works, a duration such as "720h";
	// empty: until revoked.
	Expires string `json:"expires,omitempty"`
}

// NewToken is the answer to POST /api/auth/tokens: the token's record and,
// this once, its secret.
type NewToken struct {
	store.Token
	// Secret is the bearer token itself; only its hash is kept.
	Secret string `json:"token"`
}

func (s *Server) routesAuth() {
	s.mux.HandleFunc("GET /api/auth/tokens", s.listTokens)
	s.mux.HandleFunc("POST /api/auth/tokens", s.createToken)
	s.mux.HandleFunc("DELETE /api/auth/tokens/{name}", s.revokeToken)
}

// listTokens lists the tokens: name, scope, role, created, last used and
// expiry, never a secret.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	tokens, err := s.h.Store().Tokens(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, tokens)
}

// createToken makes a role or metrics token and answers its secret, once.
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var body TokenBody
	if !decode(w, r, maxRoleBody, &body) {
		return
	}
	expires, err := ExpiryOf(body.Expires, time.Now())
	metrics := body.Scope == store.ScopeMetrics
	switch {
	case err != nil:
	case !metrics && body.Scope != "" && body.Scope != store.ScopeRole:
		err = fmt.Errorf("scope %q: want %s or %s", body.Scope, store.ScopeRole, store.ScopeMetrics)
	case metrics && body.Role != "":
		err = errors.New("role: a metrics token has none")
	case !metrics && body.Role == "":
		err = errors.New("role: required")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, toolhost.Errorf(toolhost.CodeValidation, "%v", err))
		return
	}
	var secret string
	var t store.Token
	if metrics {
		secret, t, err = s.h.Tokens().CreateMetrics(r.Context(), body.Name, expires, "api")
	} else {
		secret, t, err = s.h.Tokens().Create(r.Context(), body.Name, body.Role, expires, "api")
	}
	if err != nil {
		status, err := tokenError(err)
		if status == http.StatusNotFound { // the role named in the body: the request is wrong, not its path
			status = http.StatusBadRequest
		}
		writeError(w, status, err)
		return
	}
	writeJSON(w, http.StatusCreated, NewToken{Token: t, Secret: secret})
}

// revokeToken deletes a token; it opens nothing from then on.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	if err := s.h.Tokens().Revoke(r.Context(), r.PathValue("name"), "api"); err != nil {
		status, err := tokenError(err)
		writeError(w, status, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// tokenError maps a store error about tokens to an HTTP status and the error
// to answer: validation for what the request got wrong, internal otherwise.
func tokenError(err error) (int, error) {
	var status int
	switch {
	case errors.Is(err, store.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, store.ErrExists):
		status = http.StatusConflict
	case errors.Is(err, store.ErrInvalid):
		status = http.StatusBadRequest
	default:
		return http.StatusInternalServerError, toolhost.Errorf(toolhost.CodeInternal, "%w", err)
	}
	return status, toolhost.Errorf(toolhost.CodeValidation, "%w", err)
}

// ExpiryOf reads a token's lifetime ("720h"; "" for none) into its expiry
// time after now (zero for none).
func ExpiryOf(lifetime string, now time.Time) (time.Time, error) {
	if lifetime == "" {
		return time.Time{}, nil
	}
	d, err := time.ParseDuration(lifetime)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("expires %q: want a positive duration such as 720h", lifetime)
	}
	return now.Add(d), nil
}

// roleID returns the function that finds the id of h's role with a name
// or else with an id, as [store.Store.Role] does.
func roleID(h *host.Host) func(string) (string, bool) {
	return func(nameOrID string) (string, bool) {
		if r, err := h.Roles().Get(nameOrID); err == nil {
			return r.ID, true
		}
		i := slices.IndexFunc(h.Roles().List(), func(r store.Role) bool { return r.ID == nameOrID })
		return nameOrID, i >= 0
	}
}
