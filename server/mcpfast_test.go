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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

func TestParseFastCall(t *testing.T) {
	const meta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	tests := []struct {
		name       string
		msg        string
		ok         bool
		perRequest bool
	}{
		{"a call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}`, true, false},
		{"a string id", `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t"}}`, true, false},
		{"empty _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{},"name":"t"}}`, true, false},
		{"per-request protocol", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + meta + `,"io.modelcontextprotocol/clientInfo":{"name":"c"}},"name":"t"}}`, true, true},
		{"a progress token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"t"}}`, false, false},
		{"a progress token beside the protocol", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + meta + `,"progressToken":1},"name":"t"}}`, false, false},
		{"another protocol version", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}},"name":"t"}}`, false, false},
		{"no capabilities", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"t"}}`, false, false},
		{"client info not an implementation", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + meta + `,"io.modelcontextprotocol/clientInfo":5},"name":"t"}}`, false, false},
		{"a notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}`, false, false},
		{"a null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}`, false, false},
		{"another method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"tools/call"}}`, false, false},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, false, false},
		{"no name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, false, false},
		{"an unknown member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{}}}`, false, false},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}]`, false, false},
		{"two messages", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}} {}`, false, false},
		{"not JSON-RPC 2.0", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := parseFastCall([]byte(tt.msg))
			if ok != tt.ok || (ok && (c.perRequest != tt.perRequest || c.tool != "t")) {
				t.Errorf("parseFastCall = %+v, %v; want ok %v, perRequest %v", c, ok, tt.ok, tt.perRequest)
			}
		})
	}
}

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

// fastConfig has a role with the console and slow groups.
var fastConfig = &config.Config{Roles: []config.Role{{Name: "worker", ToolGroups: []string{"console", "slow"}, Pos: "config.hcl:1,1"}}}

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
}

// post sends a JSON-RPC message and returns the response's Content-Type and
// the messages of its body (one JSON object, or SSE events).
func (s *httpSession) post(t *testing.T, msg string) (string, []rpcResponse) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
	resp, err := http.DefaultClient.Do(req)
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
// run as the session's agent; a call whose client goes away is cancelled.
func TestMCPFastPathHTTP(t *testing.T) {
	w := newWaiter()
	srv, h := serve(t, fastConfig, group("console", "console_print"), group("artifact", "get_artifact"), slowGroup(w))
	s := &httpSession{url: srv.URL + "/mcp/worker", version: "2025-06-18"}
	s.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	s.post(t, call(100, "console_print", `{"text":"first"}`, "")) // through the SDK if the session is not known yet
	for i, c := range []struct{ tool, args string }{{"console_print", `{"text":"x"}`}, {"get_artifact", `{"text":"x"}`}, {"console_print", `{"text":1}`}} {
		fastType, fast := s.post(t, call(2*i+1, c.tool, c.args, ""))
		streamType, stream := s.post(t, call(2*i+2, c.tool, c.args, `"progressToken":"p"`))
		if fastType != "application/json" || !strings.HasPrefix(streamType, "text/event-stream") {
			t.Errorf("%s: Content-Type %q without a progress token, %q with one", c.tool, fastType, streamType)
		}
		if len(fast) != 1 || len(stream) != 1 || string(fast[0].ID) != fmt.Sprint(2*i+1) || !jsonEqual(t, fast[0].Result, stream[0].Result) {
			t.Errorf("%s %s: fast path %+v, SDK %+v", c.tool, c.args, fast, stream)
		}
	}

	// Progress goes on the call's stream, before its result.
	_, msgs := s.post(t, call(10, "steps", `{}`, `"progressToken":"p"`))
	var methods []string
	for _, m := range msgs {
		methods = append(methods, m.Method)
	}
	if want := []string{"notifications/progress", "notifications/progress", "notifications/progress", ""}; !reflect.DeepEqual(methods, want) {
		t.Errorf("messages on the stream: %q, want %q", methods, want)
	}
	if err := h.FlushEvents(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, _ := h.Events(context.Background(), store.EventFilter{Type: store.EventCallCompleted})
	for _, ev := range events {
		if ev.AgentID != events[0].AgentID || ev.Role != "worker" {
			t.Errorf("event %+v: want the session's one agent (%s) of role worker", ev, events[0].AgentID)
		}
	}

	// A client that goes away cancels its call.
	req, _ := http.NewRequestWithContext(w.cancelOnStart(t), "POST", s.url, strings.NewReader(call(11, "wait", `{}`, "")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("Mcp-Protocol-Version", s.version)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("wait answered %s", resp.Status)
	}
	w.waitCancelled(t)
}

// TestMCPFastPathSDKClient: the go-sdk client, over streamable HTTP and
// over stdio (where it speaks the per-request protocol), gets its results,
// progress when it asks, and cancels a call of the fast path with
// notifications/cancelled.
func TestMCPFastPathSDKClient(t *testing.T) {
	w := newWaiter()
	srv, h := serve(t, fastConfig, group("console", "console_print"), slowGroup(w))
	for name, open := range map[string]func(t *testing.T, c *mcp.Client) *mcp.ClientSession{
		"http": func(t *testing.T, c *mcp.Client) *mcp.ClientSession {
			cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/worker"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return cs
		},
		"stdio": func(t *testing.T, c *mcp.Client) *mcp.ClientSession {
			clientIn, serverOut := io.Pipe()
			serverIn, clientOut := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- ServeMCP(ctx, h, "worker", &mcp.IOTransport{Reader: serverIn, Writer: serverOut}) }()
			t.Cleanup(func() { cancel(); _ = clientOut.Close(); <-done })
			cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return cs
		},
	} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var progress []string
			c := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					progress = append(progress, req.Params.Message)
				},
			})
			cs := open(t, c)
			defer cs.Close()
			for range 3 { // the first may go through the SDK, which makes the session known
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "console_print", Arguments: map[string]any{"text": "hi"}})
				if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "console_print:hi" {
					t.Fatalf("console_print: %+v, %v", res, err)
				}
			}
			params := &mcp.CallToolParams{Name: "steps", Arguments: map[string]any{}}
			params.SetProgressToken("p")
			if res, err := cs.CallTool(context.Background(), params); err != nil || res.IsError {
				t.Fatalf("steps: %+v, %v", res, err)
			}
			// The client may handle the last notification after the result.
			proctest.Eventually(t, "the progress of the three steps", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(progress) >= 3
			})
			mu.Lock()
			if want := []string{"step 1", "step 2", "step 3"}; !reflect.DeepEqual(progress, want) {
				t.Errorf("progress %q, want %q", progress, want)
			}
			mu.Unlock()

			if _, err := cs.CallTool(w.cancelOnStart(t), &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{}}); err == nil {
				t.Fatal("wait: no error")
			}
			w.waitCancelled(t)
		})
	}
}

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

// TestMCPFastPathLines: over stdio, the fast path answers a tools/call as
// the SDK does — in a session that began with initialize, and with the
// per-request protocol — and notifications/cancelled cancels it.
func TestMCPFastPathLines(t *testing.T) {
	w := newWaiter()
	_, h := serve(t, fastConfig, group("console", "console_print"), slowGroup(w))
	serveWorker := func(tr mcp.Transport) error { return ServeMCP(context.Background(), h, "worker", tr) }
	const perRequest = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}`
	for _, tt := range []struct {
		name, meta string
		setup      []string
	}{
		{"initialized session", "", []string{
			`{"jsonrpc":"2.0","id":100,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		}},
		{"per-request protocol", perRequest, []string{call(100, "console_print", `{"text":"first"}`, perRequest+`,"progressToken":0`)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newLineClient(t, serveWorker)
			for _, msg := range tt.setup {
				c.send(t, msg)
				if strings.Contains(msg, `"id":100`) {
					c.await(t, 100)
				}
			}
			sep := ""
			if tt.meta != "" {
				sep = ","
			}
			for i, args := range []string{`{"text":"x"}`, `{"text":1}`} {
				fast := c.roundTrip(t, call(2*i+1, "console_print", args, tt.meta), 2*i+1)
				sdkPath := c.roundTrip(t, call(2*i+2, "console_print", args, tt.meta+sep+`"progressToken":"p"`), 2*i+2)
				if len(fast) != 1 || len(sdkPath) != 1 || !jsonEqual(t, fast[0].Result, sdkPath[0].Result) {
					t.Errorf("%s: fast path %s, SDK %s", args, fast[0].Result, sdkPath[0].Result)
				}
			}
			c.send(t, call(20, "wait", `{}`, tt.meta))
			w.waitStarted(t)
			c.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":20}}`)
			w.waitCancelled(t)
			if res := c.await(t, 20); !strings.Contains(string(res[len(res)-1].Result), `"isError":true`) {
				t.Errorf("the cancelled call answered %s", res[len(res)-1].Result)
			}
		})
	}
}

// TestLinesRouting: the reader answers the tools/call lines of a known
// session itself and hands every other line, in order, to the SDK — a line
// longer than its buffer whole, even one that is a tools/call.
func TestLinesRouting(t *testing.T) {
	_, h := serve(t, fastConfig, group("console", "console_print"))
	r := newMCPRole(h, "worker", nil)
	defer r.cancel()
	a, err := h.CreateAgent(context.Background(), "worker", store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	r.sessions.Store("", &mcpSession{agentID: a.ID, version: "2025-06-18", calls: map[string]context.CancelFunc{}})

	long := call(3, "console_print", `{"text":"`+strings.Repeat("y", 300)+`"}`, "")
	input := strings.Join([]string{
		call(1, "console_print", `{"text":"a"}`, ""),
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		long,
		call(4, "console_print", `{"text":"b"}`, `"progressToken":1`),
		call(5, "console_print", `{"text":"c"}`, ""),
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}, "\n") + "\n"
	toSDK, fromLines := io.Pipe()
	var out bytes.Buffer
	calls := &callGroup{}
	l := &lines{r: r, ctx: context.Background(), in: bufio.NewReaderSize(strings.NewReader(input), 160), toSDK: fromLines,
		out: &lockedWriter{w: &out}, calls: calls, turn: make(chan struct{}, 1), done: make(chan struct{})}
	go l.read()
	got, err := io.ReadAll(toSDK)
	calls.close()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, long,
		call(4, "console_print", `{"text":"b"}`, `"progressToken":1`), `{"jsonrpc":"2.0","method":"notifications/initialized"}`}, "\n") + "\n"
	if string(got) != want {
		t.Errorf("to the SDK:\n%s\nwant\n%s", got, want)
	}
	answers := map[string]string{}
	for line := range strings.Lines(out.String()) {
		var r struct {
			ID     json.RawMessage
			Result mcp.CallToolResult
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		answers[string(r.ID)] = r.Result.Content[0].(*mcp.TextContent).Text
	}
	if want := map[string]string{"1": "console_print:a", "5": "console_print:c"}; !reflect.DeepEqual(answers, want) {
		t.Errorf("answered %v, want %v", answers, want)
	}
}
