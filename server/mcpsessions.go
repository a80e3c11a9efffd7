package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
)

// The sessions of /mcp/{role} end. A session is idle while none of its
// requests is open (a client's GET stream counts as open, so does a
// tools/call of the fast path); once idle for the mcp block's
// session_idle_timeout the front closes it, the SDK forgets it (a request
// with its id gets 404, as the spec asks, so the client initializes anew),
// its goroutines end and its agent is marked terminated (forget). A DELETE
// ends a session the same way. A credential holds at most
// max_sessions_per_credential sessions across the roles: the POST that would
// open one more is refused with 429 and a JSON-RPC error saying why, rather
// than another session of the credential being closed under its client.

// sessionTable holds the front's open HTTP sessions: whose each one is, and
// whether a request of it is open.
type sessionTable struct {
	idle time.Duration // how long a session lasts without an open request
	max  int           // the sessions a credential may hold

	mu    sync.Mutex
	byID  map[string]*openSession
	count map[string]int // by credential: its sessions, and those being opened
}

// openSession is a session in the table.
type openSession struct {
	id, cred string
	role     *mcpRole
	ss       *mcp.ServerSession
	busy     int         // its requests open
	since    time.Time   // when the last of them ended
	timer    *time.Timer // ends it once idle; nil until it is first idle
}

// newSessionTable returns a table whose sessions end after idle, perCred of
// them per credential.
func newSessionTable(idle time.Duration, perCred int) *sessionTable {
	return &sessionTable{idle: idle, max: perCred, byID: map[string]*openSession{}, count: map[string]int{}}
}

// reserve counts in a session that cred is opening; false when cred holds
// max already.
func (t *sessionTable) reserve(cred string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
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

// release counts out one of cred's sessions. t.mu is held.
func (t *sessionTable) release(cred string) {
	if t.count[cred]--; t.count[cred] <= 0 {
		delete(t.count, cred)
	}
}

// add records a session that cred opened with its reservation, busy with
// the request that opened it.
func (t *sessionTable) add(cred string, r *mcpRole, ss *mcp.ServerSession) *openSession {
	e := &openSession{id: ss.ID(), cred: cred, role: r, ss: ss, busy: 1}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID[e.id] = e
	return e
}

// begin counts in a request of the session with the id, which then is not
// idle until end; nil when the table holds no such session of role r.
func (t *sessionTable) begin(id string, r *mcpRole) *openSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || e.role != r {
		return nil
	}
	if e.busy++; e.timer != nil {
		e.timer.Stop()
	}
	return e
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
	e.role.h.Logger().Debug("mcp: idle session ended", "role", e.role.role, "session", e.id, "idle", t.idle)
	e.role.end(e.ss, fmt.Sprintf("the MCP session was idle for %s (mcp { session_idle_timeout })", t.idle))
}

// drop removes the session ss, which has ended, if the table holds it.
func (t *sessionTable) drop(id string, ss *mcp.ServerSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byID[id]; e != nil && e.ss == ss {
		t.remove(e)
	}
}

// remove takes e out of the table, counting it out of its credential's
// sessions. t.mu is held.
func (t *sessionTable) remove(e *openSession) {
	delete(t.byID, e.id)
	t.release(e.cred)
	if e.timer != nil {
		e.timer.Stop()
	}
}

// serveHTTP serves a request of role r's endpoint from cred: one of a
// session the table holds (on the fast path when it takes it), a POST
// that may open a session, or anything else, which the SDK answers (a
// session it does not know, or no longer, with 404).
func (f *mcpFront) serveHTTP(w http.ResponseWriter, req *http.Request, r *mcpRole, cred string) {
	id := req.Header.Get("Mcp-Session-Id")
	switch e := f.open.begin(id, r); {
	case e != nil:
		defer f.open.end(e)
		if req.Method == http.MethodDelete { // the SDK closes the session it knows
			f.open.drop(id, e.ss)
			r.ending(id, "the MCP client ended the session (DELETE)")
		}
		if !r.serveFastHTTP(w, req) {
			r.http.ServeHTTP(w, req)
		}
	case id == "" && req.Method == http.MethodPost:
		f.startSession(w, req, r, cred)
	default:
		r.http.ServeHTTP(w, req)
	}
}

// startSession passes a POST without a session id to the SDK, which opens a
// session when it is an initialize, unless cred holds its most sessions
// already. The session is in the table before the response that names it
// leaves, and out of it again if the initialize failed (the SDK closes such
// a session).
func (f *mcpFront) startSession(w http.ResponseWriter, req *http.Request, r *mcpRole, cred string) {
	if !f.open.reserve(cred) {
		refuseSession(w, req, toolhost.Errorf(toolhost.CodePolicy,
			"%s holds %d open MCP sessions, the most it may (mcp { max_sessions_per_credential }): end one (DELETE with its Mcp-Session-Id), or wait until one has been idle for %s",
			cred, f.open.max, f.open.idle))
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
		f.open.drop(e.id, e.ss)
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

// refuseSession answers a POST that would open a session with 429 and a
// JSON-RPC error response to its request.
func refuseSession(w http.ResponseWriter, req *http.Request, err error) {
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	body, _ := io.ReadAll(io.LimitReader(req.Body, mcp.DefaultMaxRequestBodyBytes))
	if json.Unmarshal(body, &msg) != nil || !isRequestID(msg.ID) {
		msg.ID = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	out, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", msg.ID, rpcError{jsonrpcServerError, fmt.Sprintf("%s: %s", toolhost.CodeOf(err), err)}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
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
