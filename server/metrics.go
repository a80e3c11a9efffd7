package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsPattern is the route of the host's Prometheus metrics: the admin's,
// a metrics token's (the only route it opens), and anyone's with metrics {
// public = true }.
const metricsPattern = "GET /metrics"

// routesMetrics serves the host's metrics (host.Metrics) in the Prometheus
// exposition format, when the host has them, with the MCP sessions of this
// server's front among them.
func (s *Server) routesMetrics() {
	m := s.h.Metrics()
	if m == nil {
		return
	}
	reg := m.Registry()
	if s.mcp != nil {
		// A later server of the same host replaces an earlier one's sessions.
		reg.Unregister(s.mcp)
		_ = reg.Register(s.mcp)
	}
	s.mux.Handle(metricsPattern, promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
}

// isPublicMetrics reports whether r reads the metrics and the config makes
// them public.
func (s *Server) isPublicMetrics(r *http.Request) bool {
	return s.h.Config().Metrics.Public && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/metrics"
}
