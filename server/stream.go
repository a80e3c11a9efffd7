package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

// streamPoll is how often the event stream looks for new events.
const streamPoll = 300 * time.Millisecond

func (s *Server) routesLive() {
	s.mux.HandleFunc("GET /api/tokens", s.tokens)
	s.mux.HandleFunc("GET /api/events/stream", s.eventStream)
}

// tokens answers the token cost of a role with the tool groups named by
// ?groups=a,b (none: every group): {tokens, tools, allTokens, allTools}.
func (s *Server) tokens(w http.ResponseWriter, r *http.Request) {
	var groups []string
	if v := r.URL.Query().Get("groups"); v != "" {
		groups = strings.Split(v, ",")
	}
	rt, err := s.h.Tools(host.ToolQuery{Preview: true, Groups: groups, Tokens: true})
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"tokens": rt.Tokens, "tools": len(rt.Tools), "allTokens": rt.AllTokens, "allTools": rt.AllTools})
}

// eventStream sends events as they are recorded, as server-sent events
// (`data: EVENT-JSON`, readable: [store.Event.Readable]), starting after
// ?after= (default: the newest event now), filtered like GET /api/events.
// It ends when the client goes.
func (s *Server) eventStream(w http.ResponseWriter, r *http.Request) {
	f, err := ParseEventFilter(r.URL.Query(), time.Now())
	if err == nil && r.URL.Query().Has("format") {
		err = toolhost.Errorf(toolhost.CodeValidation, "event filter: format: the stream is server-sent events only")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, toolhost.Errorf(toolhost.CodeInternal, "streaming is not supported"))
		return
	}
	ctx := r.Context()
	if r.URL.Query().Get("after") == "" {
		latest := f
		latest.Limit = 1
		if last, err := s.h.Events().List(ctx, latest); err == nil && len(last) > 0 {
			f.AfterID = last[0].ID
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	_ = s.h.Store().Follow(ctx, f, streamPoll, func(events []store.Event) error {
		for _, e := range events {
			b, _ := json.Marshal(e.Readable())
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.ID, b)
		}
		flusher.Flush()
		return nil
	})
}
