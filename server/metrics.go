package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
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
		c := mcpSessions{s.mcp}
		reg.Unregister(c)
		_ = reg.Register(c)
	}
	s.mux.Handle(metricsPattern, promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
}

// isPublicMetrics reports whether r reads the metrics and the config makes
// them public.
func (s *Server) isPublicMetrics(r *http.Request) bool {
	return s.h.Config().Metrics.Public && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/metrics"
}

var mcpSessionsDesc = prometheus.NewDesc("toolhost_mcp_sessions",
	"Open MCP sessions over streamable HTTP, by role.", []string{"role"}, nil)

// mcpSessions counts the sessions of each role's MCP server when scraped.
type mcpSessions struct{ f *mcpFront }

// Describe implements prometheus.Collector.
func (mcpSessions) Describe(ch chan<- *prometheus.Desc) { ch <- mcpSessionsDesc }

// Collect implements prometheus.Collector.
func (c mcpSessions) Collect(ch chan<- prometheus.Metric) {
	c.f.roles.Range(func(name, r any) bool {
		ch <- prometheus.MustNewConstMetric(mcpSessionsDesc, prometheus.GaugeValue, float64(c.f.open.sessions(r.(*mcpRole))), name.(string))
		return true
	})
}
