package mcpfront

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcp/jsonline"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// The sessions of /mcp/{role} end. A session that has gone the mcp block's
// session_idle_timeout without a POST of it open is closed by the SDK
// (StreamableHTTPOptions.SessionTimeout, which counts POSTs, not a
// client's GET stream); a request with its id then gets 404, as the spec
// asks, so the client initializes anew; its goroutines end and its agents
// are marked terminated, saying it was idle. A DELETE ends a session the
// same way. A session answers only the credential that opened it: to any
// other its id is unknown (404). The agents of sessionless requests
// (mcpversion.Stateless), and those a session's client names by an agent
// key beside the session's own, which the SDK knows nothing of, live as
// long by the front's own timers: one that no request has used for
// session_idle_timeout is marked terminated. A credential holds at most
// max_sessions_per_credential sessions and such agents across the roles
// (the SDK bounds neither): the request that would make one more first
// ends the least recently used of them that is idle, and only when every
// one has a request open (a GET stream counts) is it refused, with 429,
// Retry-After and a JSON-RPC error, the same for every method (admit). A
// client that crashes and comes back so finds room at once, and one that
// opens session after session holds max_sessions_per_credential agents at
// most.

// sessionTable holds the front's open HTTP sessions and the agents they
// bound: whose each one is, and whether a request of it is open.
type sessionTable struct {
	idle   time.Duration // how long an entry lasts without an open request (a session: the SDK's SessionTimeout)
	max    int           // the entries a credential may hold
	replay *replayStore  // what the sessions' streams sent, for clients that resume them (replay.go)

	mu    sync.Mutex
	byID  map[string]*openSession
	creds map[string]*holding
}

// holding is what a credential holds in the table: its entries, and the
// sessions it is opening (reserved, not yet added).
type holding struct {
	entries map[*openSession]struct{}
	opening int
}

// openSession is an entry of the table: a session, or an agent named by an
// agent key (a sessionless agent, or one beside a session's own).
type openSession struct {
	id, cred string
	role     *mcpRole
	table    *sessionTable
	ss       *mcp.ServerSession // the session; nil for an agent
	agent    *mcpAgent          // the agent, once made; nil for a session
	busy     int                // its requests open
	since    time.Time          // when the last of them ended
	used     time.Time          // when the last of them began: the order of eviction
	timer    *time.Timer        // ends an agent once idle; nil until it is first idle, and for a session
}

// busyRetry is the Retry-After of a request refused because every entry of
// its credential has a request open.
const busyRetry = time.Second

// newSessionTable returns a table whose entries end after idle, perCred of
// them per credential.
func newSessionTable(idle time.Duration, perCred int) *sessionTable {
	return &sessionTable{idle: idle, max: perCred, replay: newReplayStore(replayBytes, replayStreams),
		byID: map[string]*openSession{}, creds: map[string]*holding{}}
}

// holdingLocked returns what cred holds, made when it holds nothing. t.mu
// is held.
func (t *sessionTable) holdingLocked(cred string) *holding {
	c := t.creds[cred]
	if c == nil {
		c = &holding{entries: map[*openSession]struct{}{}}
		t.creds[cred] = c
	}
	return c
}

// tidyLocked forgets cred once it holds nothing. t.mu is held.
func (t *sessionTable) tidyLocked(cred string) {
	if c := t.creds[cred]; c != nil && len(c.entries) == 0 && c.opening == 0 {
		delete(t.creds, cred)
	}
}

// roomLocked makes room for one more entry of cred: when cred holds max
// already, it takes out of the table the idle one of cred's entries whose
// last request began longest ago (an order a client's own sequence of
// requests fixes, whatever the machine's load does to when the server's
// handlers return), and returns it for the caller to end (evict) once t.mu
// is released. It returns false when every entry of cred is busy. t.mu is
// held.
func (t *sessionTable) roomLocked(cred string) (*openSession, bool) {
	c := t.creds[cred]
	if c == nil || len(c.entries)+c.opening < t.max {
		return nil, true
	}
	var lru *openSession
	for e := range c.entries {
		if e.busy == 0 && (lru == nil || e.used.Before(lru.used)) {
			lru = e
		}
	}
	if lru == nil {
		return nil, false
	}
	t.remove(lru)
	return lru, true
}

// evict ends e, which roomLocked took out of the table, if any.
func (t *sessionTable) evict(e *openSession) {
	if e == nil {
		return
	}
	e.role.h.Logger().Debug("mcp: least recently used idle session or agent ended to make room", "role", e.role.role, "credential", e.cred)
	why := fmt.Sprintf("ended to make room for another of its credential's, which held %d (mcp { max_sessions_per_credential }), it being the idle one used least recently", t.max)
	if e.agent != nil && e.agent.key.sessionless() {
		e.role.forgetIdle(e.agent, why) // on a shared store, it may be busy on another host
		return
	}
	e.close(why)
}

// inUse reports whether e has a request open (a task's call counts).
func (t *sessionTable) inUse(e *openSession) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.busy > 0
}

// close ends e, which is out of the table: its session, or its agent, for
// the reason why.
func (e *openSession) close(why string) {
	switch {
	case e.ss != nil:
		e.role.end(e.ss, why)
	case e.agent != nil:
		e.role.forget(e.agent, why)
	}
}

// reserve counts in a session that cred is opening, making room for it;
// false when cred holds max entries already, all busy.
func (t *sessionTable) reserve(cred string) bool {
	t.mu.Lock()
	lru, ok := t.roomLocked(cred)
	if ok {
		t.holdingLocked(cred).opening++
	}
	t.mu.Unlock()
	t.evict(lru)
	return ok
}

// unreserve counts out a session that cred did not open after all.
func (t *sessionTable) unreserve(cred string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.creds[cred].opening--
	t.tidyLocked(cred)
}

// add records a session that cred opened with its reservation, busy with
// the request that opened it.
func (t *sessionTable) add(cred string, r *mcpRole, ss *mcp.ServerSession) *openSession {
	e := &openSession{id: ss.ID(), cred: cred, role: r, table: t, ss: ss, busy: 1, used: time.Now()}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.creds[cred]
	c.opening--
	c.entries[e] = struct{}{}
	t.byID[e.id] = e
	return e
}

// admit counts in a request of the agent whose entry has the id (see
// agentKey.entryID), of role r and credential cred, until end: the entry
// is made, and room for it, when the table holds none; its agent is
// attached once made. The error, rate_limited, says that cred holds max
// entries, every one of them busy.
func (t *sessionTable) admit(cred string, r *mcpRole, id string) (*openSession, error) {
	t.mu.Lock()
	if e := t.byID[id]; e != nil {
		t.beginLocked(e)
		t.mu.Unlock()
		return e, nil
	}
	lru, ok := t.roomLocked(cred)
	var e *openSession
	if ok {
		e = &openSession{id: id, cred: cred, role: r, table: t, busy: 1, used: time.Now()}
		t.byID[id] = e
		t.holdingLocked(cred).entries[e] = struct{}{}
	}
	t.mu.Unlock()
	t.evict(lru)
	if !ok {
		return nil, t.refusal(cred)
	}
	return e, nil
}

// hold counts in a request of the entry with the id, until end; nil when
// the table holds no such entry.
func (t *sessionTable) hold(id string) *openSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e != nil {
		t.beginLocked(e)
	}
	return e
}

// attach makes a the agent of e, while e is in the table.
func (t *sessionTable) attach(e *openSession, a *mcpAgent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.id] == e {
		e.agent = a
	}
}

// refusal is the error of a request that would make cred hold more than
// max entries while all of them are busy: rate_limited, wrapping a
// JSON-RPC error of code jsonrpcServerError for the SDK's answers.
func (t *sessionTable) refusal(cred string) error {
	msg := fmt.Sprintf("%s holds %d MCP sessions and agent keys, the most it may (mcp { max_sessions_per_credential }), and each has a request open: retry after %s, or end a session (DELETE with its Mcp-Session-Id)",
		cred, t.max, busyRetry)
	return &toolhost.Error{Code: toolhost.CodeRateLimited, Message: msg, RetryAfter: busyRetry,
		Err: &jsonrpc.Error{Code: jsonrpcServerError, Message: string(toolhost.CodeRateLimited) + ": " + msg}}
}

// lookup counts in a request of the session with the id, which then is not
// idle until end; nil when the table holds no such session of role r that
// cred opened.
func (t *sessionTable) lookup(id string, r *mcpRole, cred string) *openSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || e.ss == nil || e.role != r || e.cred != cred {
		return nil
	}
	t.beginLocked(e)
	return e
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

// begin counts in a request of e, and reports whether e is still in the
// table: false once it has ended (or is ending).
func (t *sessionTable) begin(e *openSession) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byID[e.id] != e {
		return false
	}
	t.beginLocked(e)
	return true
}

// beginLocked counts in a request of e. t.mu is held.
func (t *sessionTable) beginLocked(e *openSession) {
	e.used = time.Now()
	if e.busy++; e.timer != nil {
		e.timer.Stop()
	}
}

// end counts out a request of e; with none left open, e's idle time starts
// (a session's timer is the SDK's), or, for an entry whose requests made no
// agent, e leaves the table.
func (t *sessionTable) end(e *openSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.busy--; e.busy > 0 || t.byID[e.id] != e {
		return
	}
	if e.ss == nil && e.agent == nil {
		t.remove(e)
		return
	}
	e.since = time.Now()
	if e.ss != nil {
		return
	}
	if e.timer == nil {
		e.timer = time.AfterFunc(t.idle, func() { t.expire(e) })
	} else {
		e.timer.Reset(t.idle)
	}
}

// expire ends the agent of e if it is still in the table and has been idle
// for t.idle (a request may have come and gone since its timer fired: then
// the timer runs again).
func (t *sessionTable) expire(e *openSession) {
	t.mu.Lock()
	if t.byID[e.id] != e || e.busy > 0 || time.Since(e.since) < t.idle {
		t.mu.Unlock()
		return
	}
	t.remove(e)
	t.mu.Unlock()
	e.role.h.Logger().Debug("mcp: idle agent key ended", "role", e.role.role, "idle", t.idle)
	if e.agent != nil && e.agent.key.sessionless() {
		e.role.forgetIdle(e.agent, t.idleReason())
		return
	}
	e.close(t.idleReason())
}

// idleReason is why an entry ended idle: an agent by expire, a session by
// the SDK's SessionTimeout.
func (t *sessionTable) idleReason() string {
	return fmt.Sprintf("the MCP session was idle for %s (mcp { session_idle_timeout })", t.idle)
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
	delete(t.creds[e.cred].entries, e)
	t.tidyLocked(e.cred)
	if e.timer != nil {
		e.timer.Stop()
	}
}

// end ends a session, its agents marked terminated for the reason why.
func (r *mcpRole) end(ss *mcp.ServerSession, why string) {
	r.ending(ss.ID(), why)
	_ = ss.Close()
}

// serveHTTP serves a request of role r's endpoint from cred, whose context
// carries its Caller: a sessionless request (mcpversion.Stateless), one
// of a session the table holds for cred, a POST that may open a session,
// or anything else without a session id, which the SDK answers. A request
// naming a session the table does not hold for cred gets 404, whether the
// session is another credential's, ending, or none: only the front's table
// says which sessions a credential may reach, never the SDK's own.
func (f *Front) serveHTTP(w http.ResponseWriter, req *http.Request, r *mcpRole, cred string) {
	id := req.Header.Get("Mcp-Session-Id")
	if id == "" && sessionless(req.Header) {
		var body *postBody
		if req.Method == http.MethodPost {
			var ok bool
			if body, ok = readBody(w, req); !ok {
				return
			}
		}
		f.serve(w, req, r, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if !r.callDirect(w, req, body) {
				r.stateless.ServeHTTP(w, req)
			}
		}), cred, credScope+cred, body)
		return
	}
	sw := &sseWriter{ResponseWriter: w}
	defer sw.end()
	w = sw
	switch e := f.open.lookup(id, r, cred); {
	case e != nil:
		defer f.open.end(e)
		if req.Method == http.MethodDelete { // the SDK closes the session it knows
			f.open.drop(e)
			r.ending(id, "the MCP client ended the session (DELETE)")
		}
		f.serve(w, req, r, r.http, cred, id, nil)
	case id != "":
		http.Error(w, "Not Found: no session with this Mcp-Session-Id for this credential", http.StatusNotFound)
	case req.Method == http.MethodPost:
		f.post(w, req, r, cred)
	default:
		r.http.ServeHTTP(w, req)
	}
}

// serve passes a request of the scope (a session's id, or credScope and
// cred) to next, the SDK's handler, once a POST is admitted (admit); its
// body, when read already, is body.
func (f *Front) serve(w http.ResponseWriter, req *http.Request, r *mcpRole, next http.Handler, cred, scope string, body *postBody) {
	if req.Method == http.MethodPost {
		entries, ok := f.admit(w, req, r, cred, scope, body)
		if !ok {
			return
		}
		defer func() {
			for _, e := range entries {
				f.open.end(e)
			}
		}()
	}
	next.ServeHTTP(w, req)
}

// admit counts a POST in as a request of each agent its messages act as
// (makesAgent) that the table bounds: a sessionless agent, or one a
// session's client names by a key; the caller ends the entries returned
// once the request is served. An agent new to the table is given room
// first (sessionTable.admit); when there is none, the request is answered
// 429 with Retry-After and a JSON-RPC error to its first request, whatever
// its method, and admit returns false. The agents' own lookup
// (mcpRole.agent) then finds their entries. The body is read here unless
// it was (body nil), and decoded only when the agents it acts as are not
// known without (a key in its _meta, an agent new to the table), at most
// once whoever asks: the SDK has no hook between its decoding and its
// answer where a refusal could still be a 429.
func (f *Front) admit(w http.ResponseWriter, req *http.Request, r *mcpRole, cred, scope string, body *postBody) ([]*openSession, bool) {
	if body == nil {
		var ok bool
		if body, ok = readBody(w, req); !ok {
			return nil, false
		}
	}
	header := req.Header.Get(agentKeyHeader)
	if !bytes.Contains(body.raw, []byte(agentKeyMeta)) { // every message acts as the agent of the header's key
		k := agentKey{scope: scope, name: header}
		if !k.sessionless() && k.name == "" {
			return nil, true // a request of the session's own agent, which the session's entry counts
		}
		if e := f.open.hold(k.entryID(r.role)); e != nil {
			return []*openSession{e}, true // an agent the table holds: no room to make, nothing to decode
		}
	}
	msgs, err := body.messages()
	if err != nil {
		return nil, true // the SDK answers what it cannot read
	}
	var entries []*openSession
	for _, m := range msgs {
		name, _ := m.Params.Meta.Agent.(string)
		k := agentKey{scope: scope, name: cmp.Or(name, header)}
		if !makesAgent(m.Method) || (!k.sessionless() && k.name == "") || len(k.name) > maxAgentKey {
			continue
		}
		e, err := f.open.admit(cred, r, k.entryID(r.role))
		if err != nil {
			for _, e := range entries {
				f.open.end(e)
			}
			refuse(w, firstRequestID(msgs), err)
			return nil, false
		}
		entries = append(entries, e)
	}
	return entries, true
}

// postBody is a POST's body as the front reads it, once, and decodes it,
// once, for what it needs to know before the SDK reads it.
type postBody struct {
	raw  []byte
	msgs []bodyMessage // once decoded
}

// readBody reads a POST's body, at most the SDK's limit, and puts it back
// for the SDK to read; a body past the limit is answered 413.
func readBody(w http.ResponseWriter, req *http.Request) (*postBody, bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, req.Body, mcp.DefaultMaxRequestBodyBytes))
	if err != nil {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mcp.DefaultMaxRequestBodyBytes), http.StatusRequestEntityTooLarge)
		return nil, false
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	return &postBody{raw: raw}, true
}

// messages returns the JSON-RPC messages of the body, one or a batch,
// decoded on first use.
func (b *postBody) messages() ([]bodyMessage, error) {
	if b.msgs != nil {
		return b.msgs, nil
	}
	raw := bytes.TrimSpace(b.raw)
	var msgs []bodyMessage
	if len(raw) > 0 && raw[0] == '[' {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return nil, err
		}
	} else {
		var m bodyMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	b.msgs = msgs
	return msgs, nil
}

// refuse answers a request that the table refused (sessionTable.refusal)
// with 429, Retry-After and a JSON-RPC error to the request with the id
// (null when nil) whose code is jsonrpcServerError.
func refuse(w http.ResponseWriter, id json.RawMessage, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(toolhost.RetryAfter(err).Seconds()))))
	writeRPCError(w, http.StatusTooManyRequests, id, jsonrpcServerError, fmt.Sprintf("%s: %s", toolhost.CodeOf(err), err))
}

// firstRequestID returns the id of the first request among msgs, nil when
// there is none.
func firstRequestID(msgs []bodyMessage) json.RawMessage {
	for _, m := range msgs {
		if jsonline.IsRequestID(m.ID) {
			return m.ID
		}
	}
	return nil
}

// sessionless reports whether a request's protocol version header names
// mcpversion.Stateless or a later version: a request of no session.
func sessionless(h http.Header) bool {
	return h.Get("Mcp-Protocol-Version") >= mcpversion.Stateless
}

// post serves a POST without a session id: an initialize opens a session;
// a server/discover, or a request that names a sessionless version in its
// _meta, is sessionless; anything else needs a session, and gets 400.
func (f *Front) post(w http.ResponseWriter, req *http.Request, r *mcpRole, cred string) {
	body, ok := readBody(w, req)
	if !ok {
		return
	}
	msgs, err := body.messages()
	if err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "parse error: "+err.Error())
		return
	}
	for _, m := range msgs {
		switch {
		case m.Method == "initialize":
			f.startSession(w, req, r, cred, m.ID)
			return
		case m.Method == "server/discover" || m.Params.Meta.Version >= mcpversion.Stateless:
			f.serve(w, req, r, r.stateless, cred, credScope+cred, body)
			return
		}
	}
	writeRPCError(w, http.StatusBadRequest, firstRequestID(msgs), jsonrpc.CodeInvalidRequest,
		"Bad Request: an Mcp-Session-Id header is required; open a session with initialize, or make sessionless requests of protocol version "+mcpversion.Stateless)
}

// bodyMessage is what the front reads of a JSON-RPC message: what it
// needs to route a POST and admit it, all the SDK is not asked.
type bodyMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
			Agent   any    `json:"toolhost/agent"` // agentKeyMeta: a string, or ignored as mcpRole.agentKeyOf does
		} `json:"_meta"`
	} `json:"params"`
}

// startSession passes an initialize, the request with the id, to the SDK,
// which opens a session, once the table has room for it (reserve), else it
// is refused as admit refuses. The session is in the table before the
// response that names it leaves, and out of it again when the session
// ends, or at once if the initialize failed (the SDK closes such a
// session).
func (f *Front) startSession(w http.ResponseWriter, req *http.Request, r *mcpRole, cred string, id json.RawMessage) {
	if !f.open.reserve(cred) {
		if !jsonline.IsRequestID(id) {
			id = nil
		}
		refuse(w, id, f.open.refusal(cred))
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
	out := jsonline.ErrorReply(id, code, message)
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

var sessionsDesc = prometheus.NewDesc("toolhost_mcp_sessions",
	"Open MCP sessions over streamable HTTP, by role.", []string{"role"}, nil)

// Describe implements [prometheus.Collector]: a [Front] is the collector of
// its open sessions, counted by role when scraped.
func (f *Front) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

// Collect implements [prometheus.Collector].
func (f *Front) Collect(ch chan<- prometheus.Metric) {
	f.roles.Range(func(name, r any) bool {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(f.open.sessions(r.(*mcpRole))), name.(string))
		return true
	})
}
