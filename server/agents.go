package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
)

// maxAgentBody caps the body of a spawn or a message: text for an agent.
const maxAgentBody = 1 << 20

// terminateReason is the reason recorded for an agent terminated here.
const terminateReason = "terminated through the HTTP API"

// spawnBody is the body of POST /api/agents.
type spawnBody struct {
	// Role names the agent's role (its name or id).
	Role string `json:"role"`
	// Task is the agent's first message; empty: it waits for messages.
	Task string `json:"task"`
	// ParentID is the agent it works for; empty for an operator.
	ParentID string `json:"parentId,omitempty"`
}

// messageBody is the body of POST /api/agents/{id}/messages.
type messageBody struct {
	// Message is the text put in the agent's mailbox.
	Message string `json:"message"`
}

func (s *Server) routesAgents() {
	s.mux.HandleFunc("GET /api/agents", s.listAgents)
	s.mux.HandleFunc("POST /api/agents", s.spawnAgent)
	s.mux.HandleFunc("GET /api/agents/{id}", s.showAgent)
	s.mux.HandleFunc("GET /api/agents/{id}/tree", s.agentTree)
	s.mux.HandleFunc("POST /api/agents/{id}/messages", s.sendMessage)
	s.mux.HandleFunc("POST /api/agents/{id}/terminate", s.terminateAgent)
}

// agentRuntime returns the server's agent runtime, or answers 503 when it runs
// none.
func (s *Server) agentRuntime(w http.ResponseWriter) (*agents.Runtime, bool) {
	if s.rt == nil {
		writeError(w, http.StatusServiceUnavailable, toolhost.Errorf(toolhost.CodeInternal,
			"this server runs no agent runtime: agents can be listed and shown, not started, messaged or terminated"))
	}
	return s.rt, s.rt != nil
}

// agentBody reads a request to the runtime: the runtime must run, the body
// decode into body, and its required field (named field) be set (has).
func agentBody[T any](s *Server, w http.ResponseWriter, r *http.Request, body *T, field string, has func() bool) (*agents.Runtime, bool) {
	rt, ok := s.agentRuntime(w)
	if !ok || !decode(w, r, maxAgentBody, body) {
		return nil, false
	}
	if !has() {
		writeError(w, http.StatusBadRequest, toolhost.Errorf(toolhost.CodeValidation, "%s: required", field))
		return nil, false
	}
	return rt, true
}

// The page sizes of GET /api/agents: without ?limit=, and the most.
const (
	agentsPage    = 100
	maxAgentsPage = 1000
)

// listAgents answers a page of the agents in the store (agents.Page): at
// most ?limit= (default agentsPage) after ?cursor=, the agents not ended
// first. A Link header names the next page, when there is one.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := agentsPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAgentsPage {
			writeError(w, http.StatusBadRequest, toolhost.Errorf(toolhost.CodeValidation, "limit: %q is not a number from 1 to %d", v, maxAgentsPage))
			return
		}
		limit = n
	}
	page, next, err := agents.Page(r.Context(), s.h.Store(), q.Get("cursor"), limit)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if next != "" {
		w.Header().Set("Link", fmt.Sprintf(`</api/agents?%s>; rel="next"`, url.Values{"limit": {strconv.Itoa(limit)}, "cursor": {next}}.Encode()))
	}
	writeJSON(w, http.StatusOK, page)
}

// spawnAgent starts an agent of a role on a task.
func (s *Server) spawnAgent(w http.ResponseWriter, r *http.Request) {
	var body spawnBody
	rt, ok := agentBody(s, w, r, &body, "role", func() bool { return body.Role != "" })
	if !ok {
		return
	}
	a, err := rt.Spawn(r.Context(), agents.SpawnRequest{Role: body.Role, Task: body.Task, ParentID: body.ParentID, Credential: principalOf(r).credential()})
	if err != nil {
		status := statusOf(err)
		if status == http.StatusNotFound { // the role named in the body: the request is wrong, not its path
			status = http.StatusBadRequest
		}
		writeError(w, status, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

// showAgent answers an agent's detail: its record, conversation, mailbox
// and children.
func (s *Server) showAgent(w http.ResponseWriter, r *http.Request) {
	d, err := agents.Show(r.Context(), s.h.Store(), r.PathValue("id"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// agentTree answers an agent's event tree (see agents.Node).
func (s *Server) agentTree(w http.ResponseWriter, r *http.Request) {
	n, err := agents.Tree(r.Context(), s.h.Store(), r.PathValue("id"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, n)
}

// sendMessage puts the operator's message in an agent's mailbox.
func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) {
	var body messageBody
	rt, ok := agentBody(s, w, r, &body, "message", func() bool { return body.Message != "" })
	if !ok {
		return
	}
	m, err := rt.Send(r.Context(), "", r.PathValue("id"), body.Message)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusCreated, m)
}

// terminateAgent ends an agent and its descendants, answering the ids of
// those it ended (none when they all were final already).
func (s *Server) terminateAgent(w http.ResponseWriter, r *http.Request) {
	rt, ok := s.agentRuntime(w)
	if !ok {
		return
	}
	ids, err := rt.Terminate(r.Context(), r.PathValue("id"), terminateReason)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if ids == nil {
		ids = []string{}
	}
	writeJSON(w, http.StatusOK, map[string][]string{"terminated": ids})
}
