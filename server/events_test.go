package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// approvalServer serves a host whose "guarded" tool needs approval, decided
// through the queue the API serves.
func approvalServer(t *testing.T) (*httptest.Server, *host.Host) {
	g := group("console", "console_print")
	g.Tools = append(g.Tools, sdk.NewTool("guarded", "Needs approval.", func(_ context.Context, r *sdk.Request[textArgs]) (*sdk.Result, error) {
		return sdk.Text("guarded:" + r.Args.Text), nil
	}, sdk.RequiresApproval()))
	return serve(t, &config.Config{Executor: config.Executor{Approver: "queue", ApprovalTimeout: time.Minute, IdempotencyWindow: time.Hour}}, g)
}

func TestApprovalsAPI(t *testing.T) {
	srv, _ := approvalServer(t)
	cases := []struct {
		decision string
		status   int
		want     string
	}{
		{`{"decision":"approve"}`, 200, `"stdout": "guarded:a"`},
		{`{"decision":"modify","arguments":{"text":"b"}}`, 200, `"stdout": "guarded:b"`},
		{`{"decision":"deny","reason":"not now"}`, 403, `not now`},
	}
	for _, c := range cases {
		type answer struct {
			code int
			body string
		}
		done := make(chan answer, 1)
		go func() {
			var raw json.RawMessage
			code := do(t, "POST", srv.URL+"/api/call", `{"tool":"guarded","arguments":{"text":"a"}}`, &raw)
			done <- answer{code, string(raw)}
		}()
		var pending []host.ApprovalRequest
		proctest.Eventually(t, "the call is pending", func() bool {
			do(t, "GET", srv.URL+"/api/approvals", nil, &pending)
			return len(pending) > 0
		})
		var args map[string]string
		if len(pending) == 1 {
			_ = json.Unmarshal(pending[0].Arguments, &args)
		}
		if len(pending) != 1 || pending[0].Tool != "guarded" || args["text"] != "a" {
			t.Fatalf("pending = %+v", pending)
		}
		if code := do(t, "POST", srv.URL+"/api/approvals/"+pending[0].ID, c.decision, nil); code != 204 {
			t.Fatalf("decide %s = %d", c.decision, code)
		}
		a := <-done
		var pretty map[string]any
		_ = json.Unmarshal([]byte(a.body), &pretty)
		b, _ := json.MarshalIndent(pretty, "", "  ")
		if a.code != c.status || !strings.Contains(string(b), c.want) {
			t.Fatalf("%s: %d %s", c.decision, a.code, b)
		}
	}
	var e apiError
	if code := do(t, "POST", srv.URL+"/api/approvals/appr_nope", `{"decision":"approve"}`, &e); code != 404 || e.Error.Code != toolhost.CodeValidation {
		t.Fatalf("unknown approval = %d %+v", code, e)
	}
	if code := do(t, "POST", srv.URL+"/api/approvals/appr_nope", `{"decision":"maybe"}`, &e); code != 400 {
		t.Fatalf("bad decision = %d %+v", code, e)
	}
}

func TestEventsAPI(t *testing.T) {
	srv, h := approvalServer(t)
	var res toolhost.Result
	for _, text := range []string{"one", "two"} {
		if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"tool": "console_print", "arguments": map[string]string{"text": text}, "callId": "c-" + text}, &res); code != 200 {
			t.Fatalf("call = %d", code)
		}
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var events []store.Event
	if code := do(t, "GET", srv.URL+"/api/events?tool=console_print&type=tool_call.&since=1h", nil, &events); code != 200 || len(events) != 4 {
		t.Fatalf("events = %d %+v", code, events)
	}
	if events[0].Type != store.EventCallStarted || events[0].CallID != "c-one" || events[3].Type != store.EventCallCompleted {
		t.Fatalf("events = %+v", events)
	}
	var after []store.Event
	do(t, "GET", srv.URL+"/api/events?tool=console_print&after="+itoa(events[1].ID), nil, &after)
	if len(after) != 2 || after[0].CallID != "c-two" {
		t.Fatalf("after = %+v", after)
	}
	var e apiError
	if code := do(t, "GET", srv.URL+"/api/events?since=yesterday", nil, &e); code != 400 || e.Error.Code != toolhost.CodeValidation {
		t.Fatalf("bad since = %d %+v", code, e)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestSecretToolNameIsRedactedInEvents: a secret sent as a tool's name is
// redacted in the call's error and in everything that shows its events
// (GET /api/events, its jsonl export and the call's story); a secret sent as
// a call id is refused, and its refusal does not repeat it.
func TestSecretToolNameIsRedactedInEvents(t *testing.T) {
	srv, h := approvalServer(t)
	const secret = "sk-WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW"
	var e apiError
	if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"tool": secret, "callId": "k2", "arguments": map[string]any{}}, &e); code != 404 ||
		e.Error.Code != toolhost.CodeUnknownTool || strings.Contains(e.Error.Message, "sk-") {
		t.Fatalf("a secret as a tool's name = %d %+v", code, e)
	}
	if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"tool": "console_print", "callId": secret, "arguments": map[string]string{"text": "x"}}, &e); code != 400 ||
		e.Error.Code != toolhost.CodeValidation || strings.Contains(e.Error.Message, "sk-") {
		t.Fatalf("a secret as a call id = %d %+v", code, e)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/events?type=tool_call.", "/api/events?format=jsonl", "/api/events/calls/k2"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(body), "WWWWWWWW") || !strings.Contains(string(body), "REDACTED") {
			t.Fatalf("GET %s = %d %s; want the tool's name redacted", path, resp.StatusCode, body)
		}
	}
}

// TestSecretToolNameIsRedactedThroughMCP: a role's MCP client calling a
// secret as a tool's name gets an error that does not repeat it, and the
// events (the jsonl export) keep it redacted.
func TestSecretToolNameIsRedactedThroughMCP(t *testing.T) {
	srv, h := serve(t, mcpConfig, group("console", "console_print"))
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/printer"})
	const secret = "sk-WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW"
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: secret, Arguments: map[string]any{}})
	answer, _ := json.Marshal(res)
	if err == nil && (res == nil || !res.IsError) || strings.Contains(fmt.Sprint(err)+string(answer), "WWWWWWWW") {
		t.Fatalf("tools/call of a secret: %s, %v; want an error that does not repeat it", answer, err)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/api/events?format=jsonl")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(body), "WWWWWWWW") || !strings.Contains(string(body), "REDACTED") {
		t.Fatalf("the events = %d %s; want the tool's name redacted", resp.StatusCode, body)
	}
}
