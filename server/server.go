// Package server is toolhost's HTTP front: health, the groups and plugins of
// a running host, roles and their tools, tool calls and diagnostics, the
// agents of the runtime, the events, the web page and MCP.
// Errors are JSON {"error": {"code", "message"}} with the codes of package
// toolhost ([toolhost.Code]), and retry_after_ms (with a Retry-After header)
// for rate_limited.
package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/jsondepth"
	"github.com/toolhost/toolhost/internal/mcp/mcpfront"
	"go.opentelemetry.io/otel/propagation"
)

// traceContext reads a caller's W3C trace context from its headers.
var traceContext = propagation.TraceContext{}

// Server serves a host over HTTP.
type Server struct {
	h     *host.Host
	rt    *agents.Runtime // nil: agents are listed but none can be started
	mux   *http.ServeMux
	auth  *authenticator
	hosts hosts
	// roleRoutes are the patterns a role token may reach; their handlers
	// check the role. Every other route is the admin's (but GET /metrics,
	// which a metrics token opens too).
	roleRoutes map[string]bool
	// inflight bounds the request bodies being handled.
	inflight inflight
	mcp      *mcpfront.Front // the roles' MCP servers at /mcp/{role}
	stop     func()          // stops fetching the OpenID provider's keys
}

// Options tune a [Server]; nil means the defaults.
type Options struct {
	// Runtime runs the agents POST /api/agents starts; nil: the agents in
	// the store are shown but none can be started or terminated.
	Runtime *agents.Runtime
}

// New returns a server for h. Its admin token is the configured one, or the
// one generated into the host's data directory (see [AdminToken]).
func New(h *host.Host, opts *Options) (*Server, error) {
	cfg := h.Config()
	admin, err := AdminToken(cfg, h.Store().Dir())
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{h: h, mux: http.NewServeMux(), hosts: newHosts(cfg), roleRoutes: map[string]bool{},
		auth: &authenticator{admin: admin, st: h.Store(), touched: map[string]time.Time{}, roleID: roleID(h)}}
	if opts != nil {
		s.rt = opts.Runtime
	}
	s.stop = func() {}
	if o := cfg.Auth.OIDC; o != nil && admin != "" {
		ctx, cancel := context.WithCancel(context.Background())
		s.auth.oidc, s.stop = newOIDCVerifier(o, h.Logger()), cancel
		go s.auth.oidc.run(ctx)
	}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /api/groups", s.groups)
	s.mux.HandleFunc("GET /api/plugins", s.plugins)
	s.routesAPI()
	s.routesAuth()
	s.routesAgents()
	s.routesAudit()
	s.routesOverview()
	s.routesLive()
	s.routesMCP()
	s.routesMetrics()
	s.routesUI()
	return s, nil
}

// Close ends the work the MCP front holds beyond requests: calls running
// as tasks, and calls waiting for their clients' approvals, are cancelled,
// so that the host's Close does not wait for them. Call it as the HTTP
// server shuts down ([http.Server.RegisterOnShutdown]).
func (s *Server) Close() {
	s.stop()
	s.mcp.Close()
}

// ServeHTTP implements [http.Handler]. Unknown paths and methods get JSON
// errors, 404 and 405 (with Allow), like every other error.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, release, ok := s.guard(w, r)
	if !ok {
		return
	}
	defer release()
	if isWellKnown(r) {
		s.wellKnown(w, r)
		return
	}
	if !s.started() && !isProbe(r) && !isUIAsset(r) && r.URL.Path != "/metrics" && !s.waitStarted(r) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, toolhost.Errorf(toolhost.CodeInternal, "the host is still starting: try again once GET /readyz answers 200"))
		return
	}
	if _, pattern := s.mux.Handler(r); pattern != "" {
		if s.h.TracerProvider() != nil && r.Header.Get("Traceparent") != "" {
			// A caller in a trace (W3C traceparent) has its calls' spans
			// join it.
			r = r.WithContext(traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		s.mux.ServeHTTP(w, r)
		return
	}
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, toolhost.Errorf(toolhost.CodeValidation, "no such endpoint: %s", r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, toolhost.Errorf(toolhost.CodeValidation, "%s %s: method not allowed (allowed: %s)", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// healthz answers 200 while the host runs, with the number of groups.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "groups": len(s.h.Modules().Groups())})
}

// startWait bounds how long a request that comes while the host starts
// waits for it, before a 503.
const startWait = 30 * time.Second

// waitStarted holds a request that came while the host starts (roles,
// agents and groups still loading: it would not be answered right) until
// the host has started, the client goes away or startWait passes; it
// reports whether the host started.
func (s *Server) waitStarted(r *http.Request) bool {
	ctx, cancel := context.WithTimeout(r.Context(), startWait)
	defer cancel()
	select {
	case <-s.h.Started():
		return true
	case <-ctx.Done():
		return false
	}
}

// started reports whether the host has started.
func (s *Server) started() bool {
	select {
	case <-s.h.Started():
		return true
	default:
		return false
	}
}

// readyz answers 200 once the host is ready to serve (host.Ready), with
// what it serves without, if anything (host.Degraded, and the OpenID
// provider's tokens while it cannot be used), and 503 with the
// reason while it starts, closes, its store does not answer, or in strict
// audit mode cannot write events.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.h.Ready(r.Context()); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "reason": err.Error()})
		return
	}
	d := s.h.Events().Degraded()
	if s.auth.oidc != nil {
		if why := s.auth.oidc.unavailable(); why != "" {
			if d == nil {
				d = map[string]string{}
			}
			d["oidc"] = why
		}
	}
	if d != nil {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "degraded": d})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
}

// groups lists the registered groups (see host.GroupInfo).
func (s *Server) groups(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.h.Modules().Groups())
}

// plugins lists every configured plugin, registered or not.
func (s *Server) plugins(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.h.Modules().List())
}

// writeJSON answers v as JSON; no cache keeps it (an answer may carry a
// secret) and no browser reads it as anything else.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// Its top levels indented only: the text of a deeply nested value (a
	// tool's structured content) grows as the value does.
	if b, err := jsondepth.MarshalIndent(v); err == nil {
		_, _ = w.Write(append(b, '\n'))
	}
}

// writeError writes err as {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, status int, err error) {
	info := toolhost.InfoOf(err)
	if info.RetryAfterMs > 0 {
		// Whole seconds, rounded up: a client that waits as long is not early.
		w.Header().Set("Retry-After", strconv.FormatInt((info.RetryAfterMs+999)/1000, 10))
	}
	writeJSON(w, status, map[string]any{"error": info})
}
