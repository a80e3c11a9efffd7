package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path answers the requests that make up nearly all of an MCP
// client's traffic, tools/call, without the SDK's per-request machinery: for
// each message, the SDK decodes the body several times over (each decoding
// allocating a 32 KiB buffer), hands the request across three goroutines and,
// over HTTP, opens an SSE stream for the one response. Our calls need none of
// it unless the client asked for progress. So a tools/call of a session the
// front knows (its agent exists) is decoded once, run through the pipeline as
// the session's agent, and answered with one JSON-RPC response — a plain
// application/json body over HTTP, one line over stdio — when the SDK would
// answer it the same way: its params carry no _meta (the session's protocol
// version is one of sessionVersions), or only the per-request protocol
// version requestVersion with the client's info and capabilities, over stdio.
// Everything else — initialize, tools/list, notifications, a call with a
// progress token or another _meta — goes to the SDK as before. A
// notifications/cancelled reaches the SDK, whose receiving middleware cancels
// the fast-path call it names.

// The protocol versions the fast path answers as the SDK does.
var (
	// sessionVersions are those a session negotiates in initialize.
	sessionVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	// requestVersion is the one a request may carry in its _meta (SEP-2575,
	// sessionless): its result says which server answers. A stateful HTTP
	// server refuses it, so only stdio takes it.
	requestVersion = "2026-07-28"
)

// fastCall is a tools/call the fast path answers.
type fastCall struct {
	id         json.RawMessage // the request's id, as the client wrote it
	tool       string
	args       json.RawMessage
	perRequest bool // the request carries requestVersion in its _meta
}

// parseFastCall decodes msg, one JSON-RPC message, as a tools/call the fast
// path may answer: a request (with a string or number id) whose params name a
// tool and carry no _meta but requestVersion's, with no member the fast path
// does not know. ok is false for any other message.
func parseFastCall(msg []byte) (c fastCall, ok bool) {
	if !bytes.Contains(msg, []byte(`"tools/call"`)) {
		return fastCall{}, false
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  *struct {
			Meta      *perRequestMeta `json:"_meta"`
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.DisallowUnknownFields()
	if dec.Decode(&m) != nil || dec.More() || m.JSONRPC != "2.0" || m.Method != "tools/call" || !isRequestID(m.ID) ||
		m.Params == nil || m.Params.Name == "" {
		return fastCall{}, false
	}
	meta := m.Params.Meta
	c = fastCall{id: m.ID, tool: m.Params.Name, args: m.Params.Arguments,
		perRequest: meta != nil && (meta.ProtocolVersion != "" || meta.ClientInfo != nil || meta.ClientCapabilities != nil)}
	return c, !c.perRequest || meta.valid()
}

// isRequestID reports whether id, as a message holds it, is a request's: a
// string or a number.
func isRequestID(id json.RawMessage) bool {
	return len(id) > 0 && strings.ContainsRune(`"-0123456789`, rune(id[0]))
}

// perRequestMeta is the _meta that a client of requestVersion sends with
// every request (SEP-2575).
type perRequestMeta struct {
	ProtocolVersion    string          `json:"io.modelcontextprotocol/protocolVersion"`
	ClientInfo         json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
}

// valid reports whether the _meta is requestVersion's, with the client's
// capabilities (an object) and, optionally, its info.
func (m *perRequestMeta) valid() bool {
	var info mcp.Implementation
	return m.ProtocolVersion == requestVersion && len(m.ClientCapabilities) > 0 && m.ClientCapabilities[0] == '{' &&
		(m.ClientInfo == nil || json.Unmarshal(m.ClientInfo, &info) == nil)
}

// fastSession returns the session with the id when the front knows it.
func (r *mcpRole) fastSession(id string) (*mcpSession, bool) {
	s, ok := r.sessions.Load(id)
	if !ok {
		return nil, false
	}
	return s.(*mcpSession), true
}

// answers reports whether the fast path answers c, a call of session s.
func (s *mcpSession) answers(c fastCall) bool {
	return c.perRequest || slices.Contains(sessionVersions, s.version)
}

// serveFast runs c as the session's agent, cancellable by the client's
// notifications/cancelled while it runs, and returns its JSON-RPC response.
func (r *mcpRole) serveFast(ctx context.Context, s *mcpSession, c fastCall) []byte {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if key := idKey(c.id); s.track(key, cancel) {
		defer s.untrack(key)
	}
	result, err := r.encodeResult(r.run(ctx, s, c.tool, c.args), c.perRequest)
	if err != nil { // a structured result that does not encode: say so
		result, _ = r.encodeResult(errorResult(err), c.perRequest)
	}
	out := make([]byte, 0, len(result)+len(c.id)+32)
	out = append(append(append(out, `{"jsonrpc":"2.0","id":`...), c.id...), `,"result":`...)
	return append(append(out, result...), '}')
}

// encodeResult encodes a result as the SDK does: for a request of
// requestVersion, with the server's info in its _meta.
func (r *mcpRole) encodeResult(res *mcp.CallToolResult, perRequest bool) ([]byte, error) {
	if perRequest {
		res.Meta = mcp.Meta{mcp.MetaKeyServerInfo: r.impl}
	}
	return json.Marshal(res)
}

// idKey is a request id as a key, the same whether it comes from the
// request's JSON or from a notifications/cancelled's requestId.
func idKey(id any) string {
	if raw, ok := id.(json.RawMessage); ok {
		if json.Unmarshal(raw, &id) != nil {
			return string(raw)
		}
	}
	b, _ := json.Marshal(id)
	return string(b)
}

// track registers the cancellation of a fast-path call; false when a call
// with the same id already runs (the id then cancels that one).
func (s *mcpSession) track(key string, cancel context.CancelFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.calls[key]; dup {
		return false
	}
	s.calls[key] = cancel
	return true
}

// untrack drops the cancellation of a fast-path call that has ended.
func (s *mcpSession) untrack(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.calls, key)
}

// cancel cancels the fast-path call with the request id, if one runs.
func (s *mcpSession) cancel(id any) {
	key := idKey(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel, ok := s.calls[key]; ok {
		cancel()
	}
}

// serveFastHTTP answers a POST that is one tools/call the fast path takes
// with a plain JSON response, cancelled when the client goes away. It
// returns false, having read nothing that the SDK's handler would miss, for
// any other request: another method, a call with a progress token, a
// session it does not know, headers the SDK would refuse (its protocol
// version header must be the session's, Accept must name both JSON and event
// streams, as the SDK asks).
func (r *mcpRole) serveFastHTTP(w http.ResponseWriter, req *http.Request) bool {
	if req.Method != http.MethodPost || req.Header.Get("Last-Event-ID") != "" {
		return false
	}
	s, ok := r.fastSession(req.Header.Get("Mcp-Session-Id"))
	if !ok || req.Header.Get("Mcp-Protocol-Version") != s.version || !acceptsJSONAndStream(req.Header.Values("Accept")) {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, mcp.DefaultMaxRequestBodyBytes+1))
	req.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), req.Body), req.Body}
	if err != nil || len(body) > mcp.DefaultMaxRequestBodyBytes {
		return false
	}
	c, ok := parseFastCall(body)
	if !ok || c.perRequest || !s.answers(c) {
		return false
	}
	out := r.serveFast(req.Context(), s, c)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return true
}

// acceptsJSONAndStream reports whether Accept headers name both
// application/json and text/event-stream (or wildcards covering them).
func acceptsJSONAndStream(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(item, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// serveLines serves the role's server over newline-delimited JSON-RPC until
// in ends, ctx ends or the client disconnects: the fast path answers the
// tools/call lines it takes, and every other line goes on to the SDK's
// transport, in order (see lines). The two write whole messages to out
// under one lock; closing the transport closes in, and out with closeOut
// unless it is nil. maxLine is the SDK's mcp.IOTransport.MaxLineLength.
func (r *mcpRole) serveLines(ctx context.Context, in io.ReadCloser, out io.Writer, closeOut func() error, maxLine int) error {
	ctx, cancel := context.WithCancel(ctx)
	calls := &callGroup{}
	defer calls.close()
	defer cancel()
	toSDK, fromLines := io.Pipe()
	w := &lockedWriter{w: out, close: closeOut}
	l := &lines{r: r, ctx: ctx, in: bufio.NewReaderSize(in, 64<<10), toSDK: fromLines, out: w, calls: calls,
		turn: make(chan struct{}, 1), done: make(chan struct{})}
	go l.read()
	return r.srv.Run(ctx, &mcp.IOTransport{Reader: readBoth{toSDK, in}, Writer: w, MaxLineLength: maxLine})
}

// lines reads a stream of newline-delimited JSON-RPC for serveLines, with
// readers that take turns: the one whose turn it is reads, the others serve
// a call or wait for their turn.
type lines struct {
	r     *mcpRole
	ctx   context.Context // the fast-path calls'
	out   io.Writer       // where the fast path answers
	calls *callGroup

	// Used by the reader whose turn it is.
	in    *bufio.Reader
	long  bool           // in the middle of a line longer than in's buffer
	toSDK *io.PipeWriter // what the SDK's transport reads

	turn    chan struct{} // the turn, passed to a waiting reader
	waiting atomic.Int32  // readers waiting for the turn
	done    chan struct{} // closed at the end of the stream
}

// read is a reader: it reads until it meets a tools/call the fast path
// takes, passes the turn on, serves the call and waits for its turn again.
// Passing the turn before serving lets the call start at once, on a
// goroutine already running; taking turns rather than starting a reader per
// call spares each call the growth of a new goroutine's stack.
func (l *lines) read() {
	for {
		s, c, ok := l.next()
		if !ok {
			return
		}
		if l.waiting.Load() > 0 {
			l.turn <- struct{}{}
		} else {
			go l.read()
		}
		_, _ = l.out.Write(append(l.r.serveFast(l.ctx, s, c), '\n'))
		l.calls.end()
		if !l.wait() {
			return
		}
	}
}

// next reads lines until one is a tools/call that the fast path takes (the
// transport carries one session, of id "") and returns it, counted in
// calls. Every other line, a line too long for the buffer included, is
// copied to toSDK. At the end of the stream — in fails (io.EOF at its end),
// or the SDK stops reading — it closes toSDK with the error, ends the
// readers and returns false.
func (l *lines) next() (*mcpSession, fastCall, bool) {
	for {
		line, err := l.in.ReadSlice('\n')
		if err == nil && !l.long {
			if s, ok := l.r.fastSession(""); ok {
				if c, ok := parseFastCall(line); ok && s.answers(c) && l.calls.begin() {
					return s, c, true
				}
			}
		}
		l.long = errors.Is(err, bufio.ErrBufferFull)
		if len(line) > 0 {
			if _, werr := l.toSDK.Write(line); werr != nil {
				err, l.long = werr, false
			}
		}
		if err != nil && !l.long {
			_ = l.toSDK.CloseWithError(err)
			close(l.done)
			return nil, fastCall{}, false
		}
	}
}

// wait waits for the reader's turn; false at the end of the stream.
func (l *lines) wait() bool {
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	select {
	case <-l.turn:
		return true
	case <-l.done:
		return false
	}
}

// callGroup counts a stream's fast-path calls until it is closed.
type callGroup struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// begin counts a call in, unless the group is closed (then false).
func (g *callGroup) begin() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.wg.Add(1)
	}
	return !g.closed
}

// end counts a call out.
func (g *callGroup) end() { g.wg.Done() }

// close waits for the calls running, and makes begin refuse new ones.
func (g *callGroup) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// lockedWriter writes each message whole, however many goroutines write.
type lockedWriter struct {
	mu    sync.Mutex
	w     io.Writer
	close func() error // nil: Close leaves w open
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error {
	if l.close == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.close()
}

// readBoth reads from the pipe the lines go through, and closes the stream
// they come from with it.
type readBoth struct {
	io.ReadCloser
	in io.Closer
}

func (r readBoth) Close() error { return errors.Join(r.ReadCloser.Close(), r.in.Close()) }
