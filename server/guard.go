package server

import (
	"context"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
)

// maxBody caps every request body; endpoints cap theirs lower still.
const maxBody = 32 << 20

// hosts are the names a request may address the server by: loopback names
// and addresses, the auth block's allowed_hosts and the listen address's own
// host. Anything else is a name someone else controls (DNS rebinding).
type hosts map[string]bool

func newHosts(cfg *config.Config) hosts {
	hs := hosts{}
	for _, h := range cfg.Auth.AllowedHosts {
		hs[canonicalHost(h)] = true
	}
	if h, _, err := net.SplitHostPort(cfg.Listen); err == nil && h != "" {
		if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
			hs[canonicalHost(h)] = true
		}
	}
	return hs
}

// canonicalHost lower-cases a host (no port), drops brackets and a trailing
// dot, and writes an IP address in its standard form.
func canonicalHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return h
}

// allows reports whether hostport (a Host header or an origin's host, port
// optional) names this server.
func (hs hosts) allows(hostport string) bool {
	h := hostport
	if name, _, err := net.SplitHostPort(hostport); err == nil {
		h = name
	}
	h = canonicalHost(h)
	if h == "" {
		return false
	}
	if ip, err := netip.ParseAddr(h); err == nil && ip.IsLoopback() {
		return true
	}
	return h == "localhost" || hs[h]
}

// guard applies the server's security to every request before routing. It
// answers the request itself and returns false when it refuses it:
//   - 403 policy: a Host that is not loopback or allowed; a state-changing
//     request a browser sends from another origin or site;
//   - 401: no valid credential, on every route but GET /healthz, the
//     page's static files and /.well-known/ paths (and GET /metrics with
//     metrics { public = true }), with a WWW-Authenticate challenge that
//     names the resource metadata with auth { oidc } (resource.go);
//   - 403 insufficient_scope: an access token without a required scope;
//   - 403 policy: a role token on a route that does not serve its role, a
//     metrics token on any route but GET /metrics;
//   - 415: a state-changing request with a body not declared application/json
//     (which a browser cannot send cross-origin without a preflight);
//   - 429 rate_limited: a request whose body would take its credential, or
//     the server, past the bytes of request bodies it may hold at once
//     (inflight.go).
//
// It caps the body and puts the principal in the request's context; the
// function it returns counts the request's body out once it is answered.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) (*http.Request, func(), bool) {
	if !s.hosts.allows(r.Host) {
		writeError(w, http.StatusForbidden, toolhost.Errorf(toolhost.CodePolicy,
			"Host %q is not a loopback name or address, nor in auth { allowed_hosts }: refused (DNS rebinding)", r.Host))
		return nil, nil, false
	}
	if changesState(r.Method) {
		if why := s.crossOrigin(r); why != "" {
			writeError(w, http.StatusForbidden, toolhost.Errorf(toolhost.CodePolicy, "%s %s from %s: refused", r.Method, r.URL.Path, why))
			return nil, nil, false
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if isPublic(r) || s.isPublicMetrics(r) {
		return r, func() {}, true
	}
	p, err := s.auth.authenticate(r)
	if err != nil {
		status, why := http.StatusUnauthorized, ""
		if r.Header.Get("Authorization") != "" {
			why = "invalid_token"
		}
		if errors.As(err, new(errScope)) {
			status, why = http.StatusForbidden, "insufficient_scope"
		}
		w.Header().Set("WWW-Authenticate", s.challenge(r, why))
		writeError(w, status, err)
		return nil, nil, false
	}
	if !p.admin {
		if _, pattern := s.mux.Handler(r); !s.permits(p, pattern) {
			writeError(w, http.StatusForbidden, p.refusal(r.Method+" "+r.URL.Path))
			return nil, nil, false
		}
	}
	if changesState(r.Method) && r.ContentLength != 0 && !isJSON(r.Header.Get("Content-Type")) {
		writeError(w, http.StatusUnsupportedMediaType, toolhost.Errorf(toolhost.CodeValidation,
			"Content-Type %q: the body must be application/json", r.Header.Get("Content-Type")))
		return nil, nil, false
	}
	release, err := s.inflight.take(p.credential(), bodySize(r))
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, err)
		return nil, nil, false
	}
	return r.WithContext(context.WithValue(r.Context(), principalKey{}, p)), release, true
}

// isPublic reports whether r may be served without a credential: the health
// check and the page's static files, which hold no data (the page must load
// to ask for the token), and /.well-known/ paths (the resource metadata,
// else 404).
func isPublic(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && (isProbe(r) || isUIAsset(r)) || isWellKnown(r)
}

// isProbe reports whether r asks for liveness (/healthz) or readiness
// (/readyz), which probes ask without a credential and which answer while
// the host starts.
func isProbe(r *http.Request) bool { return r.URL.Path == "/healthz" || r.URL.Path == "/readyz" }

func changesState(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// isJSON reports whether a Content-Type is application/json (parameters such
// as charset allowed).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// crossOrigin says why a browser's request comes from elsewhere than this
// server's own page, or "" when it does not: Sec-Fetch-Site other than
// same-origin or none, or an Origin that is not this server (its host must be
// allowed, and equal the request's Host). Requests without either (curl,
// SDKs) are not a browser's.
func (s *Server) crossOrigin(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return "another site (Sec-Fetch-Site: " + site + ")"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		!s.hosts.allows(u.Host) || !strings.EqualFold(stripDefaultPort(u.Host, u.Scheme), stripDefaultPort(r.Host, "")) {
		return "another origin (" + origin + ")"
	}
	return ""
}

// stripDefaultPort drops a port that is the default of scheme (any scheme's
// when scheme is "").
func stripDefaultPort(hostport, scheme string) string {
	h, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport
	}
	if (port == "80" && scheme != "https") || (port == "443" && scheme != "http") {
		if strings.Contains(h, ":") {
			return "[" + h + "]"
		}
		return h
	}
	return hostport
}
