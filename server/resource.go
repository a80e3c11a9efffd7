package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// protectedResourcePath is where the protected resource metadata (RFC 9728)
// is served with auth { oidc }: for the whole server, and with /mcp/ROLE
// after it for a role's MCP endpoint.
const protectedResourcePath = "/.well-known/oauth-protected-resource"

// isWellKnown reports whether r asks for a /.well-known/ path: answered
// without a credential, with the resource metadata or a plain 404.
func isWellKnown(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/.well-known/") }

// wellKnown answers a /.well-known/ request: the protected resource
// metadata with auth { oidc }, and a plain 404 for anything else, which
// OAuth clients read as "not there" (a JSON error body they would misread
// as an OAuth error).
func (s *Server) wellKnown(w http.ResponseWriter, r *http.Request) {
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	if s.auth.oidc == nil || !get || !isResourcePath(r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	// Public metadata that browser-based clients fetch from their own
	// origin.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, s.resourceMetadata())
}

// isResourcePath reports whether path is the resource metadata's: the
// server's, or a role endpoint's (/mcp/ROLE after it). Any role name is
// served alike, so that the metadata tells nobody which roles exist.
func isResourcePath(path string) bool {
	rest, ok := strings.CutPrefix(path, protectedResourcePath)
	if !ok {
		return false
	}
	role, ok := strings.CutPrefix(rest, "/mcp/")
	return rest == "" || ok && role != "" && !strings.Contains(role, "/")
}

// protectedResource is the protected resource metadata (RFC 9728) served at
// /.well-known/oauth-protected-resource with auth { oidc }: the server is
// one resource, the configured audience, whichever path asked.
type protectedResource struct {
	// Resource is the resource identifier: a token's aud must contain it.
	Resource string `json:"resource"`
	// AuthorizationServers are the issuers whose tokens are accepted.
	AuthorizationServers []string `json:"authorization_servers"`
	// BearerMethodsSupported is how a token is sent: the Authorization
	// header alone.
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	// ScopesSupported are the scopes every token needs
	// (auth { oidc { required_scopes } }).
	ScopesSupported []string `json:"scopes_supported,omitempty"`
	// ResourceName names the server to people.
	ResourceName string `json:"resource_name"`
}

func (s *Server) resourceMetadata() protectedResource {
	c := s.auth.oidc.cfg
	return protectedResource{Resource: c.Audience, AuthorizationServers: []string{c.Issuer},
		BearerMethodsSupported: []string{"header"}, ScopesSupported: c.RequiredScopes, ResourceName: "toolhost"}
}

// challenge is the WWW-Authenticate header of a 401 (error "" or
// invalid_token) or of a 403 for want of a scope (insufficient_scope): with
// auth { oidc }, it names the resource metadata of the endpoint asked
// (RFC 9728 5.1) and the scopes required.
func (s *Server) challenge(r *http.Request, error string) string {
	h := `Bearer realm="toolhost"`
	if s.auth.oidc == nil {
		return h
	}
	c := s.auth.oidc.cfg
	u, _ := url.Parse(c.Audience) // checked by config
	at := protectedResourcePath
	if role, ok := strings.CutPrefix(r.URL.Path, "/mcp/"); ok && role != "" && !strings.Contains(role, "/") {
		at += "/mcp/" + url.PathEscape(role)
	}
	h += fmt.Sprintf(`, resource_metadata="%s://%s%s"`, u.Scheme, u.Host, at)
	if error != "" {
		h += fmt.Sprintf(`, error=%q`, error)
	}
	if len(c.RequiredScopes) > 0 {
		h += fmt.Sprintf(`, scope="%s"`, strings.Join(c.RequiredScopes, " "))
	}
	return h
}
