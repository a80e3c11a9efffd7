package server

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

func (s *Server) routesAudit() {
	s.mux.HandleFunc("GET /api/events", s.events)
	s.mux.HandleFunc("GET /api/events/calls/{id}", s.callStory)
	s.mux.HandleFunc("GET /api/approvals", s.approvals)
	s.mux.HandleFunc("POST /api/approvals/{id}", s.decide)
}

// maxEventsPage is the most events a page of GET /api/events holds.
const maxEventsPage = 1000

// eventParams are the query parameters GET /api/events and its stream
// take: any other is refused by name.
var eventParams = []string{"tool", "agent", "call", "role", "credential", "type", "outcome", "since", "until", "after", "before", "limit", "format"}

// ParseEventFilter reads an event filter from query parameters, as GET
// /api/events and `toolhost events` take them: tool, agent, call, role,
// credential and type; outcome (ok, failed, failed:CODE, denied,
// approved, rate_limited); since and until (a duration back from now,
// such as 10m, or an RFC 3339 time); after and before (event ids) and
// limit (1 to 1000). An error, code validation, names the parameter that
// is wrong; format is left to the caller.
func ParseEventFilter(q url.Values, now time.Time) (store.EventFilter, error) {
	f := store.EventFilter{Tool: q.Get("tool"), Agent: q.Get("agent"), Call: q.Get("call"), Role: q.Get("role"),
		Credential: q.Get("credential"), Type: q.Get("type")}
	bad := func(format string, args ...any) (store.EventFilter, error) {
		return f, toolhost.Errorf(toolhost.CodeValidation, "event filter: "+format, args...)
	}
	for k, v := range q {
		if !slices.Contains(eventParams, k) {
			return bad("unknown parameter %q (the filters are %s)", k, strings.Join(eventParams, ", "))
		}
		if len(v) > 1 {
			return bad("%s: given %d times; give it once", k, len(v))
		}
		if v[0] == "" {
			return bad("%s: empty; leave it out to filter nothing by it", k)
		}
	}
	if v := q.Get("outcome"); v != "" {
		outcome, code, coded := strings.Cut(v, ":")
		if !slices.Contains(store.Outcomes(), outcome) || coded && code == "" {
			return bad("outcome: %q is none of %s, failed:CODE", v, strings.Join(store.Outcomes(), ", "))
		}
		if code != "" && (outcome != store.OutcomeFailed || !slices.Contains(toolhost.Codes(), toolhost.Code(code))) {
			return bad("outcome: %q: a code goes after failed: only, and is one of the error codes (docs/errors.md)", v)
		}
		f.Outcome, f.Code = outcome, code
	}
	var err error
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			if *t.to, err = parseTime(v, now); err != nil {
				return bad("%s: %q: want a duration back from now such as 10m, or an RFC 3339 time", t.name, v)
			}
		}
	}
	for _, id := range []struct {
		name string
		to   *int64
	}{{"after", &f.AfterID}, {"before", &f.BeforeID}} {
		if v := q.Get(id.name); v != "" {
			if *id.to, err = strconv.ParseInt(v, 10, 64); err != nil || *id.to < 0 || id.name == "before" && *id.to == 0 {
				return bad("%s: %q is not an event id (they count from 1)", id.name, v)
			}
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > maxEventsPage {
			return bad("limit: %q is not a number from 1 to %d", v, maxEventsPage)
		}
	}
	return f, nil
}

// parseTime reads a duration back from now or an RFC 3339 time.
func parseTime(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	return time.Parse(time.RFC3339, v)
}

// events lists recorded events, filtered by the query: a page of the most
// recent that match, oldest first, with a Link header naming the page
// before it when the page is full; or, with format=jsonl, every event
// that matches, oldest first, one JSON object a line (exportEvents).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := ParseEventFilter(q, time.Now())
	switch format := q.Get("format"); {
	case err != nil:
	case format == "jsonl" && q.Has("limit"):
		err = toolhost.Errorf(toolhost.CodeValidation, "event filter: limit: an export (format=jsonl) has every matching event; bound it with since, until, after or before")
	case format == "jsonl":
		s.exportEvents(w, r, f)
		return
	case format != "" && format != "json":
		err = toolhost.Errorf(toolhost.CodeValidation, "event filter: format: %q is neither json nor jsonl", format)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	events, err := s.h.Events().List(r.Context(), f)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	out := make([]store.Event, len(events))
	for i, e := range events {
		out[i] = e.Readable()
	}
	if limit := cmp.Or(f.Limit, maxEventsPage); len(events) == limit {
		older := maps.Clone(q)
		older.Set("before", strconv.FormatInt(events[0].ID, 10))
		older.Set("limit", strconv.Itoa(limit))
		w.Header().Set("Link", fmt.Sprintf(`</api/events?%s>; rel="next"`, older.Encode()))
	}
	writeJSON(w, http.StatusOK, out)
}

// exportEvents streams every event matching f, oldest first, as JSON
// lines, up to the newest written when it starts ([store.Store.EachEvent]),
// a page at a time; it stops when the client goes.
func (s *Server) exportEvents(w http.ResponseWriter, r *http.Request, f store.EventFilter) {
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", `attachment; filename="events.jsonl"`)
	w.WriteHeader(http.StatusOK)
	err := s.h.Store().EachEvent(r.Context(), f, func(events []store.Event) error {
		return WriteJSONLines(w, events)
	})
	if err != nil && r.Context().Err() == nil {
		// The status is sent: the export ends with a line saying why.
		_ = json.NewEncoder(w).Encode(map[string]any{"error": toolhost.InfoOf(err)})
	}
}

// WriteJSONLines writes events, readable ([store.Event.Readable]), one
// JSON object a line: an export's format.
func WriteJSONLines(w io.Writer, events []store.Event) error {
	enc := json.NewEncoder(w)
	for _, e := range events {
		if err := enc.Encode(e.Readable()); err != nil {
			return err
		}
	}
	return nil
}

// callStory answers the story of a call ([store.CallStory]) composed from
// the events of its id.
func (s *Server) callStory(w http.ResponseWriter, r *http.Request) {
	st, err := s.h.Store().CallStory(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		err = toolhost.Errorf(toolhost.CodeValidation, "%w", err)
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, st)
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
