package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
)

// The sessions of /mcp/{role} end. A session is idle while none of its
// requests is open (a client's GET stream counts as open); once idle for the
// mcp block's session_idle_timeout the front closes it, the SDK forgets it
// (a request with its id gets 404, as the spec asks, so the client
// initializes anew), its goroutines end and its agents are marked
// terminated. A DELETE ends a session the same way. A session answers only
// the credential that opened it: to any other its id is unknown (404). The
// agents of sessionless requests (2026-07-28) live as long: one that no
// request has used for session_idle_timeout is marked terminated. A
// credential holds at most max_sessions_per_credential sessions and
// sessionless agents across the roles: the request that would open one
// more is refused with a JSON-RPC error saying why (429 for a session),
// rather than another of the credential's being ended under its client.

// sessionTable holds the front's open HTTP sessions and sessionless agents:
// whose each one is, and whether a request of it is open.
type sessionTable struct {
	idle time.Duration // how long an entry lasts without an open request
	max  int           // the entries a credential may hold

	mu    sync.Mutex
	byID  map[string]*openSession
	count map[string]int // by credential: its entries, and the sessions being opened
}

// openSession is an entry of the table: a session, or a sessionless agent.
type openSession struct {
	id, cred string
	role     *mcpRole
	table    *sessionTable
	ss       *mcp.ServerSession // the session; nil for an agent
	agent    *mcpAgent          // the sessionless agent; nil for a session
	busy     int                // its requests open
	since    time.Time          // when the last of them ended
	timer    *time.Timer        // ends it once idle; nil until it is first idle
}

// newSessionTable returns a table whose entries end after idle, perCred of
// them per credential.
func newSessionTable(idle time.Duration, perCred int) *sessionTable {
	return &sessionTable{idle: idle, max: perCred, byID: map[string]*openSession{}, count: map[string]int{}}
}

// reserve counts in a session that cred is opening; false when cred holds
// max already.
func (t *sessionTable) reserve(cred string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reserveLocked(cred)
}

// reserveLocked counts in an entry of cred; false when cred holds max
// already. t.mu is held.
func (t *sessionTable) reserveLocked(cred string) bool {
	if t.count[cred] >= t.max {
		return false
	}
	t.count[cred]++
	return true
}

// unreserve counts out a session that cred did not open after all.
func (t *sessionTable) unreserve(cred string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.release(cred)
}

// release counts out one of cred's entries. t.mu is held.
func (t *sessionTable) release(cred string) {
	if t.count[cred]--; t.count[cred] <= 0 {
		delete(t.count, cred)
	}
}

// add records a session that cred opened with its reservation, busy with
// the request that opened it.
func (t *sessionTable) add(cred string, r *mcpRole, ss *mcp.ServerSession) *openSession {
	e := &openSession{id: ss.ID(), cred: cred, role: r, table: t, ss: ss, busy: 1}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID[e.id] = e
	return e
}

// reserveAgent records a sessionless agent of cred, busy with the request
// that made it; nil when cred holds max entries already.
func (t *sessionTable) reserveAgent(cred string, r *mcpRole, a *mcpAgent) *openSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.reserveLocked(cred) {
		return nil
	}
	e := &openSession{id: "agent\x00" + r.role + "\x00" + a.key.scope + "\x00" + a.key.name, cred: cred, role: r, table: t, agent: a, busy: 1}
	t.byID[e.id] = e
	return e
}

// refusal is the error of a request that would make cred hold more than
// max entries.
func (t *sessionTable) refusal(cred string) error {
	return toolhost.Errorf(toolhost.CodePolicy,
		"%s holds %d open MCP sessions and sessionless agents, the most it may (mcp { max_sessions_per_credential }): end a session (DELETE with its Mcp-Session-Id), or wait until one has been idle for %s",
		cred, t.max, t.idle)
}

// lookup counts in a request of the session with the id, which then is not
// idle until end; nil when the table holds no such session of role r that
// cred opened. known reports whether it holds the session for another
// credential.
func (t *sessionTable) lookup(id string, r *mcpRole, cred string) (e *openSession, known bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e = t.byID[id]
	if e == nil || e.ss == nil || e.role != r {
		return nil, false
	}
	if e.cred != cred {
		return nil, true
	}
	t.beginLocked(e)
	return e, true
}

// credentialOf returns the credential that opened the session with the id,
// "" when the table holds no such session.
func (t *sessionTable) credentialOf(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byID[id]; e != nil && e.ss != nil {
		return e.cred
	}
	return ""
}

// sessions returns how many sessions of role r the table holds.
func (t *sessionTable) sessions(r *mcpRole) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.byID {
		if e.role == r && e.ss != nil {
			n++
		}
	}
	return n
}

// begin counts in a request of e.
func (t *sessionTable) begin(e *openSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.beginLocked(e)
}

// beginLocked counts in a request of e. t.mu is held.
func (t *sessionTable) beginLocked(e *openSession) {
	if e.busy++; e.timer != nil {
		e.timer.Stop()
	}
}

// end counts out a request of e; with none left open, e's idle time starts.
func (t *sessionTable) end(e *openSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.busy--; e.busy > 0 || t.byID[e.id] != e {
		return
	}
	e.since = time.Now()
	if e.timer == nil {
		e.timer = time.AfterFunc(t.idle, func() { t.expire(e) })
	} else {
		e.timer.Reset(t.idle)
	}
}

// expire ends e if it is still in the table and has been idle for t.idle
// (a request may have come and gone since its timer fired: then the timer
// runs again).
func (t *sessionTable) expire(e *openSession) {
	t.mu.Lock()
	if t.byID[e.id] != e || e.busy > 0 || time.Since(e.since) < t.idle {
		t.mu.Unlock()
		return
	}
	t.remove(e)
	t.mu.Unlock()
	why := fmt.Sprintf("the MCP session was idle for %s (mcp { session_idle_timeout })", t.idle)
	if e.ss == nil {
		e.role.h.Logger().Debug("mcp: idle sessionless agent ended", "role", e.role.role, "agent", e.agent.agentID, "idle", t.idle)
		e.role.forget(e.agent, why)
		return
	}
	e.role.h.Logger().Debug("mcp: idle session ended", "role", e.role.role, "session", e.id, "idle", t.idle)
	e.role.end(e.ss, why)
}

// drop removes e, which has ended, if the table holds it.
func (t *sessionTable) drop(e *openSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.id] == e {
		t.remove(e)
	}
}

// remove takes e out of the table, counting it out of its credential's
// entries. t.mu is held.
func (t *sessionTable) remove(e *openSession) {
	delete(t.byID, e.id)
	t.release(e.cred)
	if e.timer != nil {
		e.timer.Stop()
	}
}

// end ends a session, its agents marked terminated for the reason why.
func (r *mcpRole) end(ss *mcp.ServerSession, why string) {
	r.ending(ss.ID(), why)
	_ = ss.Close()
}

// serveHTTP serves a request of role r's endpoint from cred: a sessionless
// request (2026-07-28), one of a session the table holds for cred, a POST
// that may open a session, or anything else, which the SDK answers (a
// session it does not know, or no longer, with 404).
func (f *mcpFront) serveHTTP(w http.ResponseWriter, req *http.Request, r *mcpRole, cred string) {
	req.Header.Set(credentialHeader, cred)
	id := req.Header.Get("Mcp-Session-Id")
	if id == "" && sessionless(req.Header) {
		r.stateless.ServeHTTP(w, req)
		return
	}
	switch e, known := f.open.lookup(id, r, cred); {
	case e != nil:
		defer f.open.end(e)
		if req.Method == http.MethodDelete { // the SDK closes the session it knows
			f.open.drop(e)
			r.ending(id, "the MCP client ended the session (DELETE)")
		}
		r.http.ServeHTTP(w, req)
	case known:
		http.Error(w, "Not Found: no session with this Mcp-Session-Id for this credential", http.StatusNotFound)
	case id == "" && req.Method == http.MethodPost:
		f.post(w, req, r, cred)
	default:
		r.http.ServeHTTP(w, req)
	}
}

// sessionless reports whether a request's protocol version header names
// 2026-07-28 or a later version: a request of no session.
func sessionless(h http.Header) bool {
	return h.Get("Mcp-Protocol-Version") >= sessionlessVersion
}

// sessionlessVersion is the first protocol version without sessions.
const sessionlessVersion = "2026-07-28"

// post serves a POST without a session id: an initialize opens a session;
// a server/discover, or a request that names a sessionless version in its
// _meta, is sessionless; anything else needs a session, and gets 400.
func (f *mcpFront) post(w http.ResponseWriter, req *http.Request, r *mcpRole, cred string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, mcp.DefaultMaxRequestBodyBytes))
	if err != nil {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mcp.DefaultMaxRequestBodyBytes), http.StatusRequestEntityTooLarge)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	msgs, err := decodeBody(body)
	if err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "parse error: "+err.Error())
		return
	}
	var firstID json.RawMessage
	for _, m := range msgs {
		switch {
		case m.Method == "initialize":
			f.startSession(w, req, r, cred, m.ID)
			return
		case m.Method == "server/discover" || m.Params.Meta.Version >= sessionlessVersion:
			r.stateless.ServeHTTP(w, req)
			return
		case firstID == nil && isRequestID(m.ID):
			firstID = m.ID
		}
	}
	writeRPCError(w, http.StatusBadRequest, firstID, jsonrpc.CodeInvalidRequest,
		"Bad Request: an Mcp-Session-Id header is required; open a session with initialize, or make sessionless requests of protocol version "+sessionlessVersion)
}

// bodyMessage is what post reads of a JSON-RPC message.
type bodyMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
	} `json:"params"`
}

// decodeBody decodes a POST's body: one JSON-RPC message or a batch.
func decodeBody(body []byte) ([]bodyMessage, error) {
	body = bytes.TrimSpace(body)
	var msgs []bodyMessage
	if len(body) > 0 && body[0] == '[' {
		if err := json.Unmarshal(body, &msgs); err != nil {
			return nil, err
		}
	} else {
		var m bodyMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// startSession passes an initialize, the request with the id, to the SDK,
// which opens a session, unless cred holds its most sessions already. The session is in the table
// before the response that names it leaves, and out of it again when the
// session ends, or at once if the initialize failed (the SDK closes such a
// session).
func (f *mcpFront) startSession(w http.ResponseWriter, req *http.Request, r *mcpRole, cred string, id json.RawMessage) {
	if !f.open.reserve(cred) {
		if !isRequestID(id) {
			id = nil
		}
		writeRPCError(w, http.StatusTooManyRequests, id, jsonrpcServerError,
			fmt.Sprintf("%s: %s", toolhost.CodePolicy, f.open.refusal(cred)))
		return
	}
	var e *openSession
	hw := &headerHook{ResponseWriter: w}
	hw.hook = func() {
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			if ss := r.serverSession(id); ss != nil {
				e = f.open.add(cred, r, ss)
			}
		}
	}
	r.http.ServeHTTP(hw, req)
	hw.once.Do(hw.hook) // a response with nothing written
	if e == nil {
		f.open.unreserve(cred)
		return
	}
	if e.ss.InitializeParams() == nil {
		f.open.drop(e)
	} else {
		r.forgetting.Go(func() {
			_ = e.ss.Wait()
			f.open.drop(e)
		})
	}
	f.open.end(e)
}

// serverSession returns the SDK's session with the id, nil if none.
func (r *mcpRole) serverSession(id string) *mcp.ServerSession {
	for ss := range r.srv.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}

// writeRPCError answers with the status and a JSON-RPC error response to
// the request with the id (null when nil).
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, message string) {
	out, _ := json.Marshal(rpcErrorResponse(id, code, message))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// jsonrpcServerError is the JSON-RPC error code of a refusal: the first of
// those the specification leaves to servers.
const jsonrpcServerError = -32000

// headerHook passes a response on, calling hook once before any of it
// leaves: by then the SDK has set its headers.
type headerHook struct {
	http.ResponseWriter
	once sync.Once
	hook func()
}

func (w *headerHook) WriteHeader(status int) {
	w.once.Do(w.hook)
	w.ResponseWriter.WriteHeader(status)
}

func (w *headerHook) Write(p []byte) (int, error) {
	w.once.Do(w.hook)
	return w.ResponseWriter.Write(p)
}

// Flush flushes the response, as http.ResponseController does.
func (w *headerHook) Flush() {
	w.once.Do(w.hook)
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the response writer it wraps, for http.ResponseController.
func (w *headerHook) Unwrap() http.ResponseWriter { return w.ResponseWriter }
