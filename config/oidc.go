package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// OIDC is the auth block's `oidc` block: the server is an OAuth 2.1
// resource server, and JWT access tokens (RFC 9068) that the organisation's
// OpenID provider issues for this server open the roles their roles claim
// names. The admin and role tokens keep working beside them.
type OIDC struct {
	// Issuer is the provider's issuer URL: its discovery document is
	// Issuer/.well-known/openid-configuration, and a token's iss must equal
	// it. https, or http on a loopback address.
	Issuer string
	// Audience is this server's resource identifier (RFC 8707), an absolute
	// http or https URL: a token's aud must contain it, and the resource
	// metadata (RFC 9728) is served at its origin.
	Audience string
	// RolesClaim is the claim naming the roles a token opens, by name or
	// id: a list of strings or one space-separated string. A dotted name
	// (realm_access.roles) reaches into nested objects. Default "roles".
	RolesClaim string
	// ScopesClaim is the claim holding the token's scopes, as RolesClaim.
	// Default "scope" (RFC 9068's space-separated string).
	ScopesClaim string
	// RequiredScopes must all be in a token's scopes, or it opens nothing
	// (403 insufficient_scope).
	RequiredScopes []string
	// AdminRole is a value of the roles claim that makes a token the
	// admin's, opening every route; "" (the default): none does.
	AdminRole string
	// AdminScope is a scope that makes a token the admin's; "" (the
	// default): none does.
	AdminScope string
	// ClockSkew is how far exp and nbf may be off this machine's clock.
	// Default [DefaultOIDCClockSkew], at most 5 minutes.
	ClockSkew time.Duration
	// Algorithms are the signature algorithms accepted; default all of
	// [OIDCAlgorithms], which are asymmetric: a token signed with a shared
	// secret or none is never accepted.
	Algorithms []string
}

// The oidc block's defaults and bounds.
const (
	DefaultOIDCClockSkew = time.Minute
	maxOIDCClockSkew     = 5 * time.Minute
)

// OIDCAlgorithms returns the signature algorithms an oidc block may accept:
// a new slice on each call, the caller's to change.
func OIDCAlgorithms() []string { return slices.Clone(oidcAlgorithms) }

// oidcAlgorithms are the signature algorithms an oidc block may accept.
var oidcAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

var oidcSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "issuer", Required: true}, {Name: "audience", Required: true}, {Name: "roles_claim"}, {Name: "scopes_claim"},
	{Name: "required_scopes"}, {Name: "admin_role"}, {Name: "admin_scope"}, {Name: "clock_skew"}, {Name: "algorithms"},
}}

// oidc decodes an auth block's oidc block.
func (d *decoder) oidc(body hcl.Body) *OIDC {
	content, diags := body.Content(oidcSchema)
	d.add(diags)
	o := &OIDC{RolesClaim: "roles", ScopesClaim: "scope", ClockSkew: DefaultOIDCClockSkew, Algorithms: OIDCAlgorithms()}
	attr(d, content.Attributes, "issuer", &o.Issuer, issuerURL)
	attr(d, content.Attributes, "audience", &o.Audience, resourceURL)
	attr(d, content.Attributes, "roles_claim", &o.RolesClaim, claimName)
	attr(d, content.Attributes, "scopes_claim", &o.ScopesClaim, claimName)
	attr(d, content.Attributes, "required_scopes", &o.RequiredScopes, scopes)
	attr(d, content.Attributes, "admin_role", &o.AdminRole, nonEmptyValue)
	attr(d, content.Attributes, "admin_scope", &o.AdminScope, scope)
	attr(d, content.Attributes, "clock_skew", &o.ClockSkew, clockSkew)
	attr(d, content.Attributes, "algorithms", &o.Algorithms, algorithms)
	return o
}

// issuerURL accepts an issuer: https, or http on a loopback address (a
// provider on the same machine), without query or fragment.
func issuerURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		return "", fmt.Errorf("%q is not an absolute https URL", s)
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		return "", fmt.Errorf("%q: an issuer is https, unless it is on a loopback address (tokens and keys would travel in clear)", s)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", fmt.Errorf("%q: an issuer has no query, fragment or user", s)
	}
	return s, nil
}

// loopbackHost reports whether a URL's host is localhost or a loopback IP.
func loopbackHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || ip != nil && ip.IsLoopback()
}

// resourceURL accepts a resource identifier: an absolute http or https URL
// without query or fragment (RFC 8707).
func resourceURL(s string) (string, error) {
	if _, err := httpURL(s); err != nil {
		return "", err
	}
	if u, _ := url.Parse(s); u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: a resource identifier has no query, fragment or user", s)
	}
	return s, nil
}

// claimName accepts a claim's name, dotted for a nested one.
func claimName(s string) (string, error) {
	if s == "" || slices.Contains(strings.Split(s, "."), "") {
		return "", fmt.Errorf("%q is not a claim name (dotted for a nested one: realm_access.roles)", s)
	}
	return s, nil
}

// nonEmptyValue accepts any string but "".
func nonEmptyValue(s string) (string, error) {
	if s == "" {
		return "", errors.New("must not be empty")
	}
	return s, nil
}

// scope accepts one OAuth scope: printable ASCII, no space, quote or
// backslash (RFC 6749 3.3).
func scope(s string) (string, error) {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' || r == '"' || r == '\\' }) {
		return "", fmt.Errorf("%q is not a scope (printable ASCII without space, quote or backslash)", s)
	}
	return s, nil
}

func scopes(ss []string) ([]string, error) {
	for _, s := range ss {
		if _, err := scope(s); err != nil {
			return nil, err
		}
	}
	return ss, nil
}

// clockSkew accepts a duration from 0 to maxOIDCClockSkew.
func clockSkew(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxOIDCClockSkew {
		return 0, fmt.Errorf("%q is not a duration from \"0s\" to %q", s, maxOIDCClockSkew.String())
	}
	return d, nil
}

func algorithms(as []string) ([]string, error) {
	if len(as) == 0 {
		return nil, errors.New("at least one algorithm is needed")
	}
	for _, a := range as {
		if !slices.Contains(oidcAlgorithms, a) {
			return nil, fmt.Errorf("%q is not one of %s (asymmetric signatures only)", a, strings.Join(oidcAlgorithms, ", "))
		}
	}
	return as, nil
}
