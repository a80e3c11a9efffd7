package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// slowGroup has a tool reporting three steps of progress, 60 ms apart, and
// one, wait, that waits until its call is cancelled, telling w.
func slowGroup(w *waiter) *sdk.Group {
	return &sdk.Group{ID: "slow", Description: "Slow tools.", Tools: []sdk.Tool{
		sdk.NewTool("steps", "Three steps.", func(_ context.Context, r *sdk.Request[struct{}]) (*sdk.Result, error) {
			for i := 1; i <= 3; i++ {
				time.Sleep(60 * time.Millisecond)
				r.Progress(float64(i), 3, fmt.Sprintf("step %d", i))
			}
			return sdk.Text("done"), nil
		}),
		sdk.NewTool("wait", "Wait to be cancelled.", func(ctx context.Context, _ *sdk.Request[struct{}]) (*sdk.Result, error) {
			w.started <- struct{}{}
			<-ctx.Done()
			w.cancelled <- ctx.Err()
			return nil, ctx.Err()
		}),
	}}
}

// waiter hears from slowGroup's wait tool: when a call of it starts, and
// its context's error when the call is cancelled.
type waiter struct {
	started   chan struct{}
	cancelled chan error
}

func newWaiter() *waiter {
	return &waiter{started: make(chan struct{}, 1), cancelled: make(chan error, 1)}
}

// cancelOnStart returns a context that is cancelled once the wait tool's
// call has started: a client that goes away mid-call, however long the call
// took to arrive.
func (w *waiter) cancelOnStart(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		select {
		case <-w.started:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx
}

// waitStarted waits until the wait tool's call has started.
func (w *waiter) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-w.started:
	case <-time.After(proctest.Patience):
		t.Fatalf("the wait tool's call did not start within %s", proctest.Patience)
	}
}

// waitCancelled waits until the wait tool's call is cancelled.
func (w *waiter) waitCancelled(t *testing.T) {
	t.Helper()
	select {
	case err := <-w.cancelled:
		if err == nil {
			t.Error("the call ended without its context's error")
		}
	case <-time.After(proctest.Patience):
		t.Fatalf("the call was not cancelled within %s", proctest.Patience)
	}
}

// frontConfig has a role with the console and slow groups.
var frontConfig = &config.Config{Roles: []config.Role{{Name: "worker", ToolGroups: []string{"console", "slow"}, Pos: "config.hcl:1,1"}}}

// call is a tools/call request of id; its params have _meta when meta is
// not "".
func call(id int, tool, args, meta string) string {
	params := fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args)
	if meta != "" {
		params = `"_meta":{` + meta + `},` + params
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s}}`, id, params)
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// rpcResponse is a JSON-RPC response or notification as the tests read it.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// httpSession is a client of /mcp/{role} that speaks raw HTTP.
type httpSession struct {
	url, id, version string
	token            string // the bearer token; "": the admin's
}

// post sends a JSON-RPC message and returns the response's Content-Type and
// the messages of its body (one JSON object, or SSE events).
func (s *httpSession) post(t *testing.T, msg string) (string, []rpcResponse) {
	t.Helper()
	resp, err := http.DefaultClient.Do(s.request(context.Background(), "POST", msg))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s: %s", msg, resp.Status, body)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		s.id = id
	}
	ct := resp.Header.Get("Content-Type")
	var out []rpcResponse
	for _, data := range sseData(ct, body) {
		var r rpcResponse
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		out = append(out, r)
	}
	return ct, out
}

// request is a request of the session (once it has one) with msg as its
// body, ended with ctx.
func (s *httpSession) request(ctx context.Context, method, msg string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, method, s.url, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
	return req
}

// sseData returns the messages of a response body: its data lines for an
// event stream, else the body itself when not empty.
func sseData(contentType string, body []byte) [][]byte {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil
		}
		return [][]byte{body}
	}
	var out [][]byte
	for line := range strings.Lines(string(body)) {
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && data != "" {
			out = append(out, []byte(data))
		}
	}
	return out
}

// TestMCPFastPathHTTP: a tools/call without a progress token gets a plain
// JSON response with the result the SDK's stream would carry; one with a
// token gets the stream, its progress notifications before the result; both

// lineClient speaks newline-delimited JSON-RPC to ServeMCP.
type lineClient struct {
	w  io.Writer
	rd *bufio.Reader
}

// newLineClient serves the role over a pair of pipes until the test ends.
func newLineClient(t *testing.T, serve func(mcp.Transport) error) *lineClient {
	t.Helper()
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- serve(&mcp.IOTransport{Reader: serverIn, Writer: serverOut}) }()
	t.Cleanup(func() { _ = clientOut.Close(); <-done })
	return &lineClient{w: clientOut, rd: bufio.NewReader(clientIn)}
}

// send writes a message.
func (c *lineClient) send(t *testing.T, msg string) {
	t.Helper()
	if _, err := io.WriteString(c.w, msg+"\n"); err != nil {
		t.Fatal(err)
	}
}

// roundTrip sends a request and returns the messages read until its
// response, which is last.
func (c *lineClient) roundTrip(t *testing.T, msg string, id int) []rpcResponse {
	t.Helper()
	c.send(t, msg)
	return c.await(t, id)
}

// await returns the messages read until the response to the request id,
// which is last.
func (c *lineClient) await(t *testing.T, id int) []rpcResponse {
	t.Helper()
	var out []rpcResponse
	for {
		line, err := c.rd.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var r rpcResponse
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, r)
		if string(r.ID) == fmt.Sprint(id) {
			return out
		}
	}
}

// post2026 sends one sessionless request of protocol 2026-07-28 to url with
// the token (none when ""), and returns the status and the messages of the
// response.
func post2026(t *testing.T, ctx context.Context, url, token, msg string, header map[string]string) (int, []rpcResponse, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	mcptest.SetMessageHeaders(req.Header, msg)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []rpcResponse
	for _, data := range sseData(resp.Header.Get("Content-Type"), body) {
		var r rpcResponse
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		out = append(out, r)
	}
	return resp.StatusCode, out, nil
}

// meta2026 is the _meta of a sessionless request, with more members when
// extra is not "".
func meta2026(extra string) string {
	m := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}`
	if extra != "" {
		m += "," + extra
	}
	return m
}

// request is a JSON-RPC request of id with params (holding _meta when meta
// is not "").
func request(id int, method, params, meta string) string {
	if meta != "" {
		params = strings.Replace(params, "{", `{"_meta":{`+meta+`},`, 1)
		params = strings.Replace(params, ",}", "}", 1)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

// TestMCPSessionless: the endpoint answers the 2026-07-28 protocol without
// sessions beside the 2025 sessions: server/discover names it, with the
// role's prompt; each result says its resultType, a list its cacheScope;
// the list is sorted; calls with the same agent key are one agent, so
// that tools load_tools loaded stay loaded between requests, and another
// key is another agent.
func TestMCPSessionless(t *testing.T) {
	srv, h := serve(t, frontConfig, group("console", "console_print", "console_beep"), slowGroup(newWaiter()), group("artifact", "get_artifact"))
	url := srv.URL + "/mcp/worker"
	status, msgs, err := post2026(t, context.Background(), url, "", request(1, "server/discover", `{}`, meta2026("")), nil)
	if err != nil || status != 200 || len(msgs) != 1 {
		t.Fatalf("server/discover: %d %+v %v", status, msgs, err)
	}
	var disc struct {
		SupportedVersions []string `json:"supportedVersions"`
		ResultType        string   `json:"resultType"`
		CacheScope        string   `json:"cacheScope"`
	}
	if err := json.Unmarshal(msgs[0].Result, &disc); err != nil || !slices.Contains(disc.SupportedVersions, "2026-07-28") ||
		!slices.Contains(disc.SupportedVersions, "2025-11-25") || disc.ResultType != "complete" {
		t.Errorf("server/discover: %s (%v)", msgs[0].Result, err)
	}

	list := func(key string) (names []string) {
		t.Helper()
		_, msgs, err := post2026(t, context.Background(), url, "", request(2, "tools/list", `{}`, meta2026(key)), nil)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("tools/list: %+v %v", msgs, err)
		}
		var res struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			ResultType string `json:"resultType"`
			CacheScope string `json:"cacheScope"`
			TTLMs      *int   `json:"ttlMs"`
		}
		if err := json.Unmarshal(msgs[0].Result, &res); err != nil || res.ResultType != "complete" || res.CacheScope != "private" || res.TTLMs == nil {
			t.Fatalf("tools/list: %s (%v)", msgs[0].Result, err)
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	names := list("")
	if !slices.IsSorted(names) || !slices.Contains(names, "console_beep") {
		t.Errorf("tools/list: %q, want the role's tools sorted", names)
	}
	_, msgs, err = post2026(t, context.Background(), url, "", request(3, "tools/call", `{"name":"console_print","arguments":{"text":"hi"}}`, meta2026("")), nil)
	if err != nil || len(msgs) != 1 || !strings.Contains(string(msgs[0].Result), `"resultType":"complete"`) || !strings.Contains(string(msgs[0].Result), "console_print:hi") {
		t.Fatalf("tools/call: %+v %v", msgs, err)
	}

	// A tool the role does not offer is the protocol's unknown tool:
	// invalid params, 400.
	status, msgs, err = post2026(t, context.Background(), url, "", request(6, "tools/call", `{"name":"get_artifact","arguments":{}}`, meta2026("")), nil)
	if err != nil || status != http.StatusBadRequest || len(msgs) != 1 || !strings.Contains(string(msgs[0].Error), `"code":-32602`) || !strings.Contains(string(msgs[0].Error), "tool_not_available") {
		t.Fatalf("tools/call of a tool not offered: %+v %v", msgs, err)
	}

	// Each agent key is one agent, and the same key the same agent.
	agentOf := func(key string, header map[string]string) string {
		t.Helper()
		meta := meta2026("")
		if key != "" {
			meta = meta2026(fmt.Sprintf(`"toolhost/agent":%q`, key))
		}
		if _, msgs, err := post2026(t, context.Background(), url, "", request(4, "tools/call", `{"name":"console_print","arguments":{"text":"k"}}`, meta), header); err != nil || len(msgs) != 1 {
			t.Fatalf("tools/call: %+v %v", msgs, err)
		}
		if err := h.Events().Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		events, _ := h.Events().List(context.Background(), store.EventFilter{Type: store.EventCallCompleted})
		return events[len(events)-1].AgentID
	}
	a, b := agentOf("a", nil), agentOf("b", nil)
	if a == b || agentOf("a", nil) != a || agentOf("", map[string]string{"Toolhost-Agent": "b"}) != b || agentOf("", nil) == a {
		t.Errorf("agent keys a, b: agents %s, %s; the same key must be the same agent, another key another", a, b)
	}
	// A key longer than the limit is refused, not an agent.
	_, msgs, _ = post2026(t, context.Background(), url, "", request(5, "tools/call", `{"name":"console_print","arguments":{"text":"k"}}`,
		meta2026(`"toolhost/agent":"`+strings.Repeat("k", 129)+`"` /* one byte past the bound */)), nil)
	if len(msgs) != 1 || !strings.Contains(string(msgs[0].Result), "validation") {
		t.Errorf("a long agent key: %+v", msgs)
	}
	// Outside tools/call, the same refusal is the protocol's invalid
	// params (it was an error of code 0).
	_, msgs, _ = post2026(t, context.Background(), url, "", request(7, "tools/list", `{}`,
		meta2026(`"toolhost/agent":"`+strings.Repeat("k", 129)+`"`)), nil)
	if len(msgs) != 1 || !strings.Contains(string(msgs[0].Error), `"code":-32602`) || !strings.Contains(string(msgs[0].Error), "agent key") {
		t.Errorf("a long agent key's tools/list: %+v", msgs)
	}
}

// TestMCPSessionRequired: a 2025 request without Mcp-Session-Id that is not
// initialize gets 400 with a JSON-RPC error naming its id, not a result.
func TestMCPSessionRequired(t *testing.T) {
	srv, _ := serve(t, frontConfig, group("console", "console_print"), slowGroup(newWaiter()))
	for _, msg := range []string{call(7, "console_print", `{"text":"x"}`, ""), `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`} {
		status, _, body := rawMCP{url: srv.URL + "/mcp/worker"}.send(t, "POST", "", msg)
		var r rpcResponse
		if status != http.StatusBadRequest || json.Unmarshal(body, &r) != nil || string(r.ID) != "7" || r.Error == nil {
			t.Errorf("%s: %d %s, want 400 with a JSON-RPC error to id 7", msg, status, body)
		}
	}
}

// TestMCPSessionBoundToCredential: a session's id does not open it to
// another credential of the role, nor to a token made later under its
// token's name: their requests get 404, and the session goes on for its
// own.
func TestMCPSessionBoundToCredential(t *testing.T) {
	srv, h := serve(t, frontConfig, group("console", "console_print"), slowGroup(newWaiter()))
	as := map[string]rawMCP{}
	for _, name := range []string{"alice", "mallory"} {
		tok, _, err := h.Store().CreateToken(context.Background(), name, "worker", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		as[name] = rawMCP{url: srv.URL + "/mcp/worker", token: tok}
	}
	send := func(who, session, msg string) (int, string, string) {
		status, id, body := as[who].send(t, "POST", session, msg)
		return status, id, string(body)
	}
	status, id, body := send("alice", "", initializeMsg)
	if status != 200 || id == "" {
		t.Fatalf("initialize: %d %q %s", status, id, body)
	}
	send("alice", id, initializedMsg)
	if status, _, body := send("mallory", id, call(1, "console_print", `{"text":"x"}`, "")); status != http.StatusNotFound {
		t.Errorf("mallory with alice's session: %d %s, want 404", status, body)
	}
	if status, _, body := send("alice", id, call(2, "console_print", `{"text":"x"}`, "")); status != 200 || !strings.Contains(body, "console_print:x") {
		t.Errorf("alice with her session: %d %s", status, body)
	}
	// A token made under a revoked one's name is another credential.
	if err := h.Store().RevokeToken(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	tok, _, err := h.Store().CreateToken(context.Background(), "alice", "worker", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	as["alice"] = rawMCP{url: srv.URL + "/mcp/worker", token: tok}
	if status, _, body := send("alice", id, call(3, "console_print", `{"text":"x"}`, "")); status != http.StatusNotFound {
		t.Errorf("a new token named alice with the old alice's session: %d %s, want 404", status, body)
	}
}

// TestMCPGarbageLine: over stdio, a line that is not JSON gets -32700, one
// that is JSON but no message -32600, and the connection goes on.
func TestMCPGarbageLine(t *testing.T) {
	_, h := serve(t, frontConfig, group("console", "console_print"), slowGroup(newWaiter()))
	c := newLineClient(t, func(tr mcp.Transport) error { return ServeMCP(context.Background(), h, "worker", tr) })
	for _, tt := range []struct {
		line string
		want string
	}{
		{"this is not json", `"id":null,"error":{"code":-32700`},
		{`{"jsonrpc":"2.0","id":3,"mthd":"x"}`, `"id":3,"error":{"code":-32600`},
		{`[]`, `"error":{"code":-32600`},
		{strings.Repeat("x", mcp.DefaultMaxLineLength+10), `"error":{"code":-32600`},
	} {
		c.send(t, tt.line)
		line, err := c.rd.ReadString('\n')
		if err != nil || !strings.Contains(line, tt.want) {
			t.Errorf("%.40s: %q %v, want %s", tt.line, line, err, tt.want)
		}
	}
	msgs := c.roundTrip(t, request(1, "tools/call", `{"name":"console_print","arguments":{"text":"still"}}`, meta2026("")), 1)
	if !strings.Contains(string(msgs[len(msgs)-1].Result), "console_print:still") {
		t.Errorf("after the garbage: %+v", msgs)
	}
}

// gate is a group whose tool hold waits until the test opens the gate or
// the call is cancelled, and says which.
type gate struct {
	started chan struct{}
	open    chan struct{}
	ended   chan error // nil: the gate opened; else the call's context's error
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 64), open: make(chan struct{}), ended: make(chan error, 64)}
}

func (g *gate) group() *sdk.Group {
	return &sdk.Group{ID: "gate", Description: "A gate.", Tools: []sdk.Tool{
		sdk.NewTool("hold", "Wait for the gate.", func(ctx context.Context, _ *sdk.Request[struct{}]) (*sdk.Result, error) {
			g.started <- struct{}{}
			select {
			case <-g.open:
				g.ended <- nil
				return sdk.Text("held"), nil
			case <-ctx.Done():
				g.ended <- ctx.Err()
				return nil, ctx.Err()
			}
		}),
	}}
}

// awaitEnd returns how a hold call ended.
func (g *gate) awaitEnd(t *testing.T) error {
	t.Helper()
	select {
	case err := <-g.ended:
		return err
	case <-time.After(proctest.Patience):
		t.Fatalf("the hold call did not end within %s", proctest.Patience)
		return nil
	}
}

// gateConfig has a role with the gate and console groups.
var gateConfig = &config.Config{Roles: []config.Role{{Name: "worker", ToolGroups: []string{"gate", "console"}, Pos: "config.hcl:1,1"}}}

// TestMCPClientGoneCall: whether a call survives its HTTP client going away
// depends on the protocol era alone, not on whether the client asked for
// progress. In a 2025 session a disconnection is no cancellation (the spec's
// rule; the client cancels with notifications/cancelled): the call runs on,
// with or without a progress token. A sessionless 2026 request lives as
// long as its POST: the call is cancelled.
func TestMCPClientGoneCall(t *testing.T) {
	for _, tt := range []struct {
		name     string
		progress bool
		sessions bool
	}{{"2025 session", false, true}, {"2025 session with progress", true, true}, {"2026 sessionless", false, false}} {
		t.Run(tt.name, func(t *testing.T) {
			g := newGate()
			srv, _ := serve(t, gateConfig, g.group(), group("console", "console_print"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			meta := ""
			if tt.progress {
				meta = `"progressToken":"p"`
			}
			gone := make(chan error, 1)
			var s *httpSession
			if tt.sessions {
				s = &httpSession{url: srv.URL + "/mcp/worker", version: "2025-11-25"}
				s.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
				s.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				go func() {
					resp, err := http.DefaultClient.Do(s.request(ctx, "POST", call(1, "hold", `{}`, meta)))
					if err == nil {
						_, err = io.ReadAll(resp.Body)
						resp.Body.Close()
					}
					gone <- err
				}()
			} else {
				go func() {
					_, _, err := post2026(t, ctx, srv.URL+"/mcp/worker", "", request(1, "tools/call", `{"name":"hold","arguments":{}}`, meta2026(meta)), nil)
					gone <- err
				}()
			}
			select {
			case <-g.started:
			case <-time.After(proctest.Patience):
				t.Fatalf("the hold call did not start within %s", proctest.Patience)
			}
			cancel()
			if err := <-gone; err == nil {
				t.Fatal("the client's request ended without its cancellation")
			}
			if !tt.sessions {
				if err := g.awaitEnd(t); err == nil {
					t.Error("the sessionless call ran on after its client went away")
				}
				return
			}
			// The session's next request is answered while the call still
			// runs: the server has seen the client go.
			if _, msgs := s.post(t, call(2, "console_print", `{"text":"x"}`, "")); len(msgs) != 1 {
				t.Fatalf("console_print: %+v", msgs)
			}
			close(g.open)
			if err := g.awaitEnd(t); err != nil {
				t.Errorf("the session's call was cancelled when its client went away: %v", err)
			}
		})
	}
}

// TestMCPDuplicateRequestID: a request whose id is one of a call still
// running in the same session (or connection) is refused, the running call
// untouched: over HTTP with 400 and a JSON-RPC error, over stdio without
// an answer.
func TestMCPDuplicateRequestID(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		g := newGate()
		srv, _ := serve(t, gateConfig, g.group(), group("console", "console_print"))
		s := &httpSession{url: srv.URL + "/mcp/worker", version: "2025-11-25"}
		s.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		s.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		first := make(chan []rpcResponse, 1)
		go func() {
			_, msgs := s.post(t, call(5, "hold", `{}`, ""))
			first <- msgs
		}()
		<-g.started
		resp, err := http.DefaultClient.Do(s.request(context.Background(), "POST", call(5, "console_print", `{"text":"x"}`, "")))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "duplicate") {
			t.Errorf("a second request 5: %s %s, want 400 naming the duplicate", resp.Status, body)
		}
		close(g.open)
		if msgs := <-first; len(msgs) != 1 || !strings.Contains(string(msgs[0].Result), "held") {
			t.Errorf("the first request 5: %+v", msgs)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		g := newGate()
		_, h := serve(t, gateConfig, g.group(), group("console", "console_print"))
		c := newLineClient(t, func(tr mcp.Transport) error { return ServeMCP(context.Background(), h, "worker", tr) })
		c.send(t, request(5, "tools/call", `{"name":"hold","arguments":{}}`, meta2026("")))
		<-g.started
		c.send(t, request(5, "tools/call", `{"name":"console_print","arguments":{"text":"x"}}`, meta2026("")))
		// The SDK's connection drops it unanswered (it has no id of its own
		// to answer to): the ping sent after it is answered, and nothing
		// of console_print comes.
		for _, m := range c.roundTrip(t, request(6, "ping", `{}`, meta2026("")), 6) {
			if strings.Contains(string(m.Result), "console_print") {
				t.Errorf("the second request 5 ran: %s", m.Result)
			}
		}
		close(g.open)
		msgs := c.await(t, 5)
		if last := msgs[len(msgs)-1].Result; !strings.Contains(string(last), "held") {
			t.Errorf("the first request 5: %s", last)
		}
	})
}

// TestMCPCancelRightAfterCall: over stdio, a notifications/cancelled sent
// right behind its call cancels it, however soon it comes: no call of the
// many so cancelled is left running.
func TestMCPCancelRightAfterCall(t *testing.T) {
	g := newGate()
	_, h := serve(t, gateConfig, g.group(), group("console", "console_print"))
	c := newLineClient(t, func(tr mcp.Transport) error { return ServeMCP(context.Background(), h, "worker", tr) })
	go func() { _, _ = io.Copy(io.Discard, c.rd) }()
	const n = 50
	for i := range n {
		c.send(t, request(100+i, "tools/call", `{"name":"hold","arguments":{}}`, meta2026("")))
		c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"_meta":{%s}}}`, 100+i, meta2026("")))
	}
	// Each call either never reached the tool or was cancelled in it; none
	// holds. A call with its cancellation lost would hold until the gate
	// opens, and end with nil.
	started := 0
	proctest.Eventually(t, "every started hold call to end", func() bool {
		for {
			select {
			case <-g.started:
				started++
				continue
			case err := <-g.ended:
				if err == nil {
					t.Fatal("a hold call ended with the gate open")
				}
				started--
				continue
			default:
			}
			return started == 0
		}
	})
	close(g.open)
	select {
	case <-g.started:
		t.Error("a hold call started after its cancellation")
	default:
	}
}

// TestMCPAgentKeysBounded: agent keys cannot make agents without end: a
// sessionless agent, and one a session's client names beside the
// session's own, count against max_sessions_per_credential with the
// sessions; the agent past it ends the credential's idle one used least
// recently (terminated, saying why), and a session's end ends its keyed
// agents.
func TestMCPAgentKeysBounded(t *testing.T) {
	cfg := &config.Config{Roles: gateConfig.Roles, MCP: config.MCP{MaxSessionsPerCredential: 3}}
	srv, h := serve(t, cfg, newGate().group(), group("console", "console_print"))
	url := srv.URL + "/mcp/worker"
	s := &httpSession{url: url, version: "2025-11-25"}
	s.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	inSession := func(key string) string {
		t.Helper()
		_, msgs := s.post(t, call(1, "console_print", `{"text":"x"}`, fmt.Sprintf(`"toolhost/agent":%q`, key)))
		if len(msgs) != 1 {
			t.Fatalf("a call with key %s: %+v", key, msgs)
		}
		return string(msgs[0].Result)
	}
	sessionless := func() string {
		t.Helper()
		_, msgs, err := post2026(t, context.Background(), url, "", request(2, "tools/call", `{"name":"console_print","arguments":{"text":"x"}}`, meta2026("")), nil)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("a sessionless call: %+v %v", msgs, err)
		}
		return string(msgs[0].Result)
	}
	ended := func(why string) int {
		n := 0
		for _, a := range roleAgents(t, h, "worker") {
			if a.Status == store.StatusTerminated && strings.Contains(a.Error, why) {
				n++
			}
		}
		return n
	}
	for _, key := range []string{"a", "b", "c"} { // c ends a
		if res := inSession(key); !strings.Contains(res, "console_print:x") {
			t.Fatalf("key %s in the session: %s", key, res)
		}
	}
	if res := sessionless(); !strings.Contains(res, "console_print:x") { // ends b
		t.Fatalf("a sessionless call: %s", res)
	}
	proctest.Eventually(t, "the keys used least recently ended", func() bool { return ended("max_sessions_per_credential") == 2 })
	if n := len(roleAgents(t, h, "worker")) - ended("max_sessions_per_credential"); n != 3 { // the session's, c's, the sessionless one
		t.Errorf("%d agents not ended by the bound, want 3", n)
	}
	if resp, err := http.DefaultClient.Do(s.request(context.Background(), "DELETE", "")); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	proctest.Eventually(t, "the session's agents ended with it", func() bool { return ended("DELETE") == 2 })
}
