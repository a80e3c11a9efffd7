package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
)

// contentConfig has the role reader, whose one group is this binary
// serving mcptest.ContentServer as an mcp_server module.
func contentConfig(t *testing.T) *config.Config {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &config.Config{
		Limits: config.Limits{Timeout: 30 * time.Second},
		Plugins: []config.Plugin{{Name: "content", Kind: config.KindMCP, Path: exe, Env: map[string]string{mcptest.ContentServerEnv: "1"},
			StartTimeout: proctest.Patience, Sandbox: &sandbox.Policy{Off: true}}},
		Roles: []config.Role{{Name: "reader", ToolGroups: []string{"content"}}},
	}
}

// frontClients are go-sdk clients of the role reader's MCP server, one per
// way in: streamable HTTP in each era, and stdio (ServeMCP).
func frontClients(t *testing.T, url string, serveStdio func(mcp.Transport) error) map[string]*mcp.ClientSession {
	t.Helper()
	out := map[string]*mcp.ClientSession{}
	for _, era := range []string{sessionEra, sessionlessEra} {
		out["http "+era], _ = connectAs(t, &mcp.StreamableClientTransport{Endpoint: url + "/mcp/reader"}, era)
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- serveStdio(&mcp.IOTransport{Reader: serverIn, Writer: serverOut}) }()
	out["stdio"], _ = connectAs(t, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, sessionEra)
	t.Cleanup(func() { _ = clientOut.Close(); <-done })
	return out
}

// TestMCPContentAsSent: what an mcp_server's tool sends reaches the role's
// client, over HTTP in each era and over stdio, as a client of the server
// itself gets it: every content type in order, with annotations, _meta,
// icons and size; an error result as the server's own blocks with isError,
// nothing put before them; a secret in its text and in an embedded
// resource's text redacted. A tool the role does not have is the
// protocol's invalid params.
func TestMCPContentAsSent(t *testing.T) {
	srv, h := serve(t, contentConfig(t))
	// The server itself, as a client of it sees it.
	st, ct := mcp.NewInMemoryTransports()
	direct := mcptest.ContentServer()
	ss, err := direct.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	dc, _ := connect(t, ct)
	asSent := func(args mcptest.ContentArgs) (string, bool) {
		res, err := dc.CallTool(context.Background(), &mcp.CallToolParams{Name: "blocks", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.Content)
		return string(b), res.IsError
	}
	// The API's result has the blocks, and their text in stdout (the text
	// blocks' and the embedded resource's).
	var res struct {
		Stdout  string             `json:"stdout"`
		Content []toolhost.Content `json:"content"`
	}
	if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"role": "reader", "tool": "blocks", "arguments": mcptest.ContentArgs{Text: "api"}}, &res); code != 200 ||
		res.Stdout != "api\napi\nthe end" || len(res.Content) != 7 || res.Content[1].Type != toolhost.ContentImage || string(res.Content[1].Data) != "\x89PNG image" {
		t.Errorf("POST /api/call: %d %+v", code, res)
	}
	for name, cs := range frontClients(t, srv.URL, func(tr mcp.Transport) error { return ServeMCP(context.Background(), h, "reader", tr) }) {
		through := func(args mcptest.ContentArgs) (string, bool) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "blocks", Arguments: args})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			b, _ := json.Marshal(res.Content)
			return string(b), res.IsError
		}
		for _, args := range []mcptest.ContentArgs{{Text: "plain\ntext"}, {Text: "it failed", Error: true}} {
			want, wantErr := asSent(args)
			if got, isErr := through(args); got != want || isErr != wantErr {
				t.Errorf("%s: %+v:\n got %s (isError %v)\nwant %s (isError %v)", name, args, got, isErr, want, wantErr)
			}
		}
		secret := "export GITHUB_TOKEN=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
		got, _ := through(mcptest.ContentArgs{Text: secret})
		want, _ := json.Marshal(mcptest.Blocks("export GITHUB_TOKEN=***REDACTED***"))
		if got != string(want) {
			t.Errorf("%s: with a secret:\n got %s\nwant %s", name, got, want)
		}
		if e := mcptest.CallRefused(t, cs, "nope", map[string]any{}); e.Code != jsonrpc.CodeInvalidParams || !strings.HasPrefix(e.Message, "unknown_tool: ") {
			t.Errorf("%s: a tool no group has: %d %q, want -32602 unknown_tool", name, e.Code, e.Message)
		}
	}
}

// TestMCPTasksNeedTheExtension: tasks/get, tasks/update and tasks/cancel
// from a client that did not declare the tasks extension are answered
// -32021, the capability it lacks named in the error's data, over HTTP in
// each era (400 in the sessionless one) and over stdio; a client that
// declared it gets the usual answer for a task it does not have.
func TestMCPTasksNeedTheExtension(t *testing.T) {
	srv, h := serve(t, mcpConfig, group("console", "console_print"))
	url := srv.URL + "/mcp/printer"
	check := func(how string, m rpcResponse) {
		t.Helper()
		var e jsonrpc.Error
		if m.Result != nil || json.Unmarshal(m.Error, &e) != nil || e.Code != -32021 ||
			!strings.Contains(string(e.Data), `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`) {
			t.Errorf("%s: result %s, error %s; want -32021 naming the extension", how, m.Result, m.Error)
		}
	}
	methods := []string{"tasks/get", "tasks/update", "tasks/cancel"}
	for i, method := range methods {
		status, msgs, err := post2026(t, context.Background(), url, "", request(i, method, `{"taskId":"task_x"}`, meta2026("")), nil)
		if err != nil || status != http.StatusBadRequest || len(msgs) != 1 {
			t.Fatalf("sessionless %s: %d %+v %v", method, status, msgs, err)
		}
		check("sessionless "+method, msgs[0])
	}
	m := rpc(t, url, "", request(9, "tasks/get", `{"taskId":"task_x"}`, metaCaps(tasksCaps, "")), nil)
	if !strings.Contains(string(m.Error), "-32602") {
		t.Errorf("tasks/get of a client with the extension: %s, want invalid params (no such task)", m.Error)
	}

	s := &httpSession{url: url, version: sessionEra}
	s.post(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	for i, method := range methods {
		_, msgs := s.post(t, request(10+i, method, `{"taskId":"task_x"}`, ""))
		if len(msgs) != 1 {
			t.Fatalf("session %s: %+v", method, msgs)
		}
		check("session "+method, msgs[0])
	}

	c := newLineClient(t, func(tr mcp.Transport) error { return ServeMCP(context.Background(), h, "printer", tr) })
	c.roundTrip(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, 1)
	for i, method := range methods {
		msgs := c.roundTrip(t, request(20+i, method, `{"taskId":"task_x"}`, ""), 20+i)
		check("stdio "+method, msgs[len(msgs)-1])
	}
}

// TestMCPStreamPriming: a session's POST that answers with an event stream
// begins with the retry field and a priming event (an id, no data), before
// its result; a sessionless one has no resumable stream, so no priming.
func TestMCPStreamPriming(t *testing.T) {
	srv, _ := serve(t, mcpConfig, group("console", "console_print"))
	url := srv.URL + "/mcp/printer"
	s := &httpSession{url: url, version: sessionEra}
	s.post(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	// A progress token makes the answer a stream (the fast path answers
	// plain JSON without one).
	body := streamBody(t, s.request(context.Background(), "POST", call(2, "console_print", `{"text":"hi"}`, `"progressToken":"p"`)))
	prime, rest, ok := strings.Cut(body, "\n\n")
	if !ok || prime != "retry: 1000" {
		t.Fatalf("the stream begins %q, want the retry field alone", prime)
	}
	event, rest, _ := strings.Cut(rest, "\n\n")
	if !strings.Contains(event, "\nid: ") || !strings.HasSuffix(event, "\ndata: ") || !strings.Contains(rest, "console_print:hi") {
		t.Errorf("then %q, want a priming event (an id, empty data) and then the result: %q", event, rest)
	}
}

// streamBody sends req and returns its body, an event stream.
func streamBody(t *testing.T, req *http.Request) string {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%s %s: %s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	return string(b)
}

// TestMCPStreamResumed: a session's client whose stream broke during a
// call comes back with a GET and the priming event's id (Last-Event-ID),
// and gets the call's result, which came while it was away. Another
// credential cannot resume it (404, as for any session not its own), nor
// can the same credential from another session (400: not that session's
// stream).
func TestMCPStreamResumed(t *testing.T) {
	g := newGate()
	srv, h := serve(t, gateConfig, g.group(), group("console", "console_print"))
	alice, mallory := roleToken(t, h, "alice"), roleToken(t, h, "mallory")
	s := &httpSession{url: srv.URL + "/mcp/worker", version: sessionEra, token: alice}
	s.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	s.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(s.request(ctx, "POST", call(1, "hold", `{}`, `"progressToken":"p"`)))
	if err != nil {
		t.Fatal(err)
	}
	// The priming event's id, then the client goes.
	rd := bufio.NewReader(resp.Body)
	var id string
	for id == "" {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before a priming event: %v", err)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
			id = v
		}
	}
	select {
	case <-g.started:
	case <-time.After(proctest.Patience):
		t.Fatalf("the hold call did not start within %s", proctest.Patience)
	}
	cancel()
	resp.Body.Close()
	close(g.open)
	if err := g.awaitEnd(t); err != nil {
		t.Fatalf("the call ended with %v", err)
	}
	resume := func(s *httpSession) *http.Request {
		req := s.request(context.Background(), "GET", "")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", id)
		return req
	}
	other := &httpSession{url: s.url, version: sessionEra, token: alice}
	other.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	for _, attack := range []struct {
		name string
		s    *httpSession
		want int
	}{
		{"another credential, alice's session", &httpSession{url: s.url, version: sessionEra, token: mallory, id: s.id}, http.StatusNotFound},
		{"alice, from her other session", other, http.StatusBadRequest},
	} {
		resp, err := http.DefaultClient.Do(resume(attack.s))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != attack.want || strings.Contains(string(b), "held") {
			t.Errorf("%s: %s %s, want %d without the result", attack.name, resp.Status, b, attack.want)
		}
	}
	req := resume(s)
	// The result is stored once the call's handler has returned, which
	// may be a moment after the tool ended.
	proctest.Eventually(t, "the result replayed", func() bool {
		return strings.Contains(streamBody(t, req.Clone(context.Background())), `"held"`)
	})
}
