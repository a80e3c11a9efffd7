// Package server is toolhost's HTTP front: health, the groups and plugins of
// a running host, and (in later issues) the role editor, the API and MCP.
// Errors are JSON {"error": {"code", "message"}} with the codes of package
// toolhost.
package server

import (
	"encoding/json"
	"net/http"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
)

// Server serves a host over HTTP.
type Server struct {
	h   *host.Host
	mux *http.ServeMux
}

// New returns a server for h.
func New(h *host.Host) *Server {
	s := &Server{h: h, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /api/groups", s.groups)
	s.mux.HandleFunc("GET /api/plugins", s.plugins)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, toolhost.Errorf(toolhost.CodeValidation, "no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// healthz answers 200 while the host runs, with the number of groups.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "groups": len(s.h.Manager().IDs())})
}

// groups lists the registered groups (see host.GroupInfo).
func (s *Server) groups(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.h.Groups())
}

// plugins lists every configured plugin, registered or not.
func (s *Server) plugins(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.h.Plugins())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError writes err as {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]any{"error": toolhost.ErrorInfo{Code: toolhost.CodeOf(err), Message: err.Error()}})
}
