package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost/config"
)

// The bounds of what the provider sends: a discovery document or key set
// larger than maxProviderBody is refused, as is a key set of more than
// maxKeys keys; each fetch gives up after providerTimeout.
const (
	maxProviderBody = 1 << 20
	maxKeys         = 100
	providerTimeout = 10 * time.Second
)

// The pace of the provider's key fetches: at most one in minRefresh on an
// unknown kid, and while the provider cannot be used, attempts from
// retryFirst, doubling to retryMax.
const (
	minRefresh = 10 * time.Second
	retryFirst = 500 * time.Millisecond
	retryMax   = 10 * time.Second
)

// oidcVerifier checks the JWT access tokens of the configured OpenID
// provider (RFC 9068): signature by a key of the issuer's JWKS, iss, aud,
// exp and nbf with the configured skew. The keys are fetched at start (and
// retried while the provider is down) and again when a token names a kid
// the set lacks, at most once in minRefresh, so that a flood of made-up kids
// cannot hammer the provider.
type oidcVerifier struct {
	cfg        *config.OIDC
	algs       []jose.SignatureAlgorithm
	client     *http.Client
	log        hclog.Logger
	minRefresh time.Duration // minRefresh; tests shorten it

	fetch sync.Mutex // held while fetching: one fetch at a time
	mu    sync.Mutex
	keys  []jose.JSONWebKey // the issuer's signing keys
	jwks  string            // the key set's URL, from discovery
	last  time.Time         // the last fetch's start
	down  error             // why the provider cannot be used, nil once keys are in hand
}

// newOIDCVerifier returns the verifier of cfg, its provider not yet asked.
func newOIDCVerifier(cfg *config.OIDC, log hclog.Logger) *oidcVerifier {
	v := &oidcVerifier{cfg: cfg, log: log.Named("oidc"), minRefresh: minRefresh,
		client: &http.Client{Timeout: providerTimeout},
		down:   fmt.Errorf("the OpenID provider %s has not been asked yet", cfg.Issuer)}
	for _, a := range cfg.Algorithms {
		v.algs = append(v.algs, jose.SignatureAlgorithm(a))
	}
	return v
}

// run fetches the provider's keys until it has them or ctx ends, from
// retryFirst apart doubling to retryMax, logging each new reason it fails.
func (v *oidcVerifier) run(ctx context.Context) {
	wait, said := retryFirst, ""
	for {
		err := v.refresh(ctx, true)
		if err == nil {
			if said != "" {
				v.log.Info("the OpenID provider answers: its access tokens are accepted", "issuer", v.cfg.Issuer)
			}
			return
		}
		if err.Error() != said {
			said = err.Error()
			v.log.Warn("the OpenID provider cannot be used: its access tokens are refused until it can", "issuer", v.cfg.Issuer, "error", err, "retry", wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMax)
	}
}

// unavailable says why the provider's tokens are refused, or "" when they
// are checked.
func (v *oidcVerifier) unavailable() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.down == nil {
		return ""
	}
	return v.down.Error() + ": its access tokens are refused until it answers"
}

// refresh fetches the key set (discovering its URL first if need be),
// unless one was fetched less than minRefresh ago and force is false.
func (v *oidcVerifier) refresh(ctx context.Context, force bool) error {
	v.fetch.Lock()
	defer v.fetch.Unlock()
	v.mu.Lock()
	jwks, recent := v.jwks, time.Since(v.last) < v.minRefresh
	if recent && !force {
		err := v.down
		v.mu.Unlock()
		return cmpErr(err, errors.New("its keys were fetched moments ago"))
	}
	v.last = time.Now()
	v.mu.Unlock()
	var err error
	if jwks == "" {
		jwks, err = v.discover(ctx)
	}
	var keys []jose.JSONWebKey
	if err == nil {
		keys, err = v.fetchKeys(ctx, jwks)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil {
		if v.keys == nil {
			v.down = err
		}
		return err
	}
	v.jwks, v.keys, v.down = jwks, keys, nil
	return nil
}

// cmpErr is err, or else alt.
func cmpErr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// get fetches url's JSON into out, bounded in time and size.
func (v *oidcVerifier) get(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderBody+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if len(body) > maxProviderBody {
		return fmt.Errorf("GET %s: the answer is larger than %d bytes", url, maxProviderBody)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// discover reads the issuer's discovery document for its jwks_uri.
func (v *oidcVerifier) discover(ctx context.Context) (string, error) {
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	at := strings.TrimSuffix(v.cfg.Issuer, "/") + "/.well-known/openid-configuration"
	if err := v.get(ctx, at, &doc); err != nil {
		return "", fmt.Errorf("the OpenID provider's discovery: %w", err)
	}
	if doc.Issuer != v.cfg.Issuer {
		return "", fmt.Errorf("the OpenID provider's discovery (%s) names issuer %q, not the configured %q", at, doc.Issuer, v.cfg.Issuer)
	}
	u, err := url.Parse(doc.JWKSURI)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && hosts(nil).allows(u.Host))) {
		return "", fmt.Errorf("the OpenID provider's discovery (%s): jwks_uri %q is not an https URL", at, doc.JWKSURI)
	}
	return doc.JWKSURI, nil
}

// fetchKeys reads the key set at url: its public signing keys.
func (v *oidcVerifier) fetchKeys(ctx context.Context, url string) ([]jose.JSONWebKey, error) {
	var set jose.JSONWebKeySet
	if err := v.get(ctx, url, &set); err != nil {
		return nil, fmt.Errorf("the OpenID provider's keys: %w", err)
	}
	if len(set.Keys) > maxKeys {
		return nil, fmt.Errorf("the OpenID provider's keys (%s): %d keys, more than %d", url, len(set.Keys), maxKeys)
	}
	var keys []jose.JSONWebKey
	for _, k := range set.Keys {
		if k.Use == "" || k.Use == "sig" {
			keys = append(keys, k.Public())
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the OpenID provider's keys (%s): no signing key", url)
	}
	return keys, nil
}

// key returns the key with the id (any key for ""), and whether there is
// one.
func (v *oidcVerifier) key(kid string) ([]jose.JSONWebKey, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if kid == "" {
		return v.keys, len(v.keys) > 0
	}
	for _, k := range v.keys {
		if k.KeyID == kid {
			return []jose.JSONWebKey{k}, true
		}
	}
	return nil, false
}

// oidcClaims is what an accepted access token says of its bearer.
type oidcClaims struct {
	subject string
	roles   []string // the roles claim's values
	scopes  []string // the scopes claim's values
}

// errScope is a valid token without a required scope.
type errScope struct{ missing []string }

func (e errScope) Error() string {
	return fmt.Sprintf("the access token lacks the scope %s that this server requires (auth { oidc { required_scopes } })", strings.Join(e.missing, " "))
}

// verify checks an access token and returns its claims. Its length is
// bounded by the caller (maxAuthorization).
func (v *oidcVerifier) verify(ctx context.Context, raw string, now time.Time) (oidcClaims, error) {
	if why := v.unavailable(); why != "" {
		return oidcClaims{}, errors.New(why)
	}
	tok, err := jwt.ParseSigned(raw, v.algs)
	if err != nil {
		return oidcClaims{}, fmt.Errorf("not a JWT signed with %s: %w", strings.Join(v.cfg.Algorithms, ", "), err)
	}
	kid := tok.Headers[0].KeyID
	keys, ok := v.key(kid)
	if !ok {
		if err := v.refresh(ctx, false); err != nil {
			v.log.Debug("keys not fetched for an unknown kid", "kid", kid, "error", err)
		}
		if keys, ok = v.key(kid); !ok {
			return oidcClaims{}, fmt.Errorf("signed with key %q, which the OpenID provider does not publish", kid)
		}
	}
	var std jwt.Claims
	var all map[string]any
	err = errors.New("no key")
	for _, k := range keys {
		if err = tok.Claims(k.Key, &std, &all); err == nil {
			break
		}
	}
	switch {
	case err != nil:
		return oidcClaims{}, fmt.Errorf("the signature does not verify with the OpenID provider's key: %w", err)
	case std.Expiry == nil:
		return oidcClaims{}, errors.New("the access token has no exp")
	case std.Subject == "":
		return oidcClaims{}, errors.New("the access token has no sub")
	}
	err = std.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience{v.cfg.Audience}, Time: now}, v.cfg.ClockSkew)
	switch {
	case errors.Is(err, jwt.ErrInvalidAudience):
		return oidcClaims{}, fmt.Errorf("the access token is for %q, not for this server (%s)", []string(std.Audience), v.cfg.Audience)
	case errors.Is(err, jwt.ErrExpired):
		return oidcClaims{}, fmt.Errorf("the access token expired at %s", std.Expiry.Time().UTC().Format(time.RFC3339))
	case err != nil:
		return oidcClaims{}, fmt.Errorf("the access token is refused: %w", err)
	}
	c := oidcClaims{subject: std.Subject, roles: claimStrings(all, v.cfg.RolesClaim), scopes: claimStrings(all, v.cfg.ScopesClaim)}
	var missing []string
	for _, s := range v.cfg.RequiredScopes {
		if !slices.Contains(c.scopes, s) {
			missing = append(missing, s)
		}
	}
	if missing != nil {
		return c, errScope{missing}
	}
	return c, nil
}

// admin reports whether the claims make their bearer the admin.
func (v *oidcVerifier) admin(c oidcClaims) bool {
	return v.cfg.AdminRole != "" && slices.Contains(c.roles, v.cfg.AdminRole) ||
		v.cfg.AdminScope != "" && slices.Contains(c.scopes, v.cfg.AdminScope)
}

// claimStrings reads the claim at a dotted path: a list of strings, or
// one space-separated string; nil when it is neither.
func claimStrings(claims map[string]any, path string) []string {
	var v any = claims
	for name := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[name]
	}
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, s := range v {
			if s, ok := s.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
