package server

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

func (s *Server) routesAudit() {
	s.mux.HandleFunc("GET /api/events", s.events)
	s.mux.HandleFunc("GET /api/approvals", s.approvals)
	s.mux.HandleFunc("POST /api/approvals/{id}", s.decide)
}

// eventFilterFromQuery reads an event filter from query parameters: tool,
// agent, call, type, since (a duration back from now, such as 10m, or an
// RFC 3339 time), after (an event id) and limit.
func eventFilterFromQuery(q map[string][]string) (store.EventFilter, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	f := store.EventFilter{Tool: get("tool"), Agent: get("agent"), Call: get("call"), Type: get("type")}
	var err error
	if v := get("since"); v != "" {
		f.Since, err = ParseSince(v, time.Now())
	}
	if v := get("after"); v != "" && err == nil {
		f.AfterID, err = strconv.ParseInt(v, 10, 64)
	}
	if v := get("limit"); v != "" && err == nil {
		f.Limit, err = strconv.Atoi(v)
	}
	if err != nil {
		return f, toolhost.Errorf(toolhost.CodeValidation, "event filter: %v", err)
	}
	return f, nil
}

// ParseSince reads a lower time bound: a duration back from now ("10m",
// "24h") or an RFC 3339 time.
func ParseSince(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, errors.New("since: want a duration such as 10m or an RFC 3339 time")
	}
	return t, nil
}

// events lists recorded events, oldest first, filtered by the query.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	f, err := eventFilterFromQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	events, err := s.h.Events().List(r.Context(), f)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if events == nil {
		events = []store.Event{}
	}
	writeJSON(w, http.StatusOK, events)
}

// approvals lists the calls waiting for a decision: this host's and those
// of every host sharing its store.
func (s *Server) approvals(w http.ResponseWriter, _ *http.Request) {
	q := s.h.Approvals()
	if q == nil {
		writeJSON(w, http.StatusOK, []host.ApprovalRequest{})
		return
	}
	writeJSON(w, http.StatusOK, q.Pending())
}

// decide answers a pending call, on whichever host sharing the store it
// waits: {decision: approve|deny|modify, arguments?, reason?}.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	q := s.h.Approvals()
	if q == nil {
		writeError(w, http.StatusNotFound, toolhost.Errorf(toolhost.CodeValidation, "approvals are not queued: the executor's approver is not \"queue\""))
		return
	}
	var d host.Decision
	if !decode(w, r, maxCallBody, &d) {
		return
	}
	d.By = principalOf(r).credential()
	if err := q.Decide(r.PathValue("id"), d); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
