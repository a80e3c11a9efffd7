package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// rawMCP is a client of one role's MCP endpoint speaking raw HTTP, with a
// bearer token ("": the test's admin token).
type rawMCP struct {
	url, token string
}

const (
	initializeMsg  = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	initializedMsg = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	listMsg        = `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`
)

// send sends a request of the session with the id ("": none) and returns
// the response's status, its Mcp-Session-Id and its body.
func (c rawMCP) send(t *testing.T, method, session, msg string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, c.url, strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), body
}

// open opens a session whose agent exists (it answered tools/list) and
// returns its id. A session that ends before it is open (idle between two
// requests on a slow machine) is replaced.
func (c rawMCP) open(t *testing.T) string {
	t.Helper()
	for {
		status, id, body := c.send(t, "POST", "", initializeMsg)
		if status != http.StatusOK || id == "" {
			t.Fatalf("initialize: %d %s", status, body)
		}
		if status, _, body = c.send(t, "POST", id, initializedMsg); status == http.StatusNotFound {
			continue
		} else if status != http.StatusAccepted {
			t.Fatalf("initialized: %d %s", status, body)
		}
		if status, _, body = c.send(t, "POST", id, listMsg); status == http.StatusNotFound {
			continue
		} else if status != http.StatusOK {
			t.Fatalf("tools/list: %d %s", status, body)
		}
		return id
	}
}

// roleAgents returns the stored agents of a role.
func roleAgents(t *testing.T, h *host.Host, role string) []store.Agent {
	t.Helper()
	r, err := h.Roles().Get(role)
	if err != nil {
		t.Fatal(err)
	}
	all, err := h.Store().Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Agent
	for _, a := range all {
		if a.RoleID == r.ID {
			out = append(out, a)
		}
	}
	return out
}

// allEnded reports whether the role has agents and all are terminated with
// a reason that mentions why.
func allEnded(t *testing.T, h *host.Host, role, why string) bool {
	agents := roleAgents(t, h, role)
	for _, a := range agents {
		if a.Status != store.StatusTerminated || !strings.Contains(a.Error, why) {
			return false
		}
	}
	return len(agents) > 0
}

// TestMCPIdleSessionsEnd: sessions left idle past mcp { session_idle_timeout }
// end: their goroutines are gone, their agents are terminated, and a request
// with their id gets 404, so the client initializes anew.
func TestMCPIdleSessionsEnd(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse(fmt.Appendf(nil, "data_dir = %q\nmcp {\n  session_idle_timeout = \"1s\"\n}\nrole \"idler\" {\n  tool_groups = [\"console\"]\n}\n",
		filepath.Join(dir, "data")), filepath.Join(dir, "config.hcl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, h := serve(t, cfg, group("console", "console_print"))
	c := rawMCP{url: srv.URL + "/mcp/idler"}
	// The client's connections go, and the server's goroutines serving
	// them, so that what stays is the sessions'.
	idleConns := plainTransport.(*http.Transport).CloseIdleConnections
	idleConns()
	before := runtime.NumGoroutine()

	const n = 20
	ids := make([]string, n)
	for i := range ids {
		ids[i] = c.open(t)
	}
	proctest.Eventually(t, "the idle sessions' goroutines have ended", func() bool {
		idleConns()
		return runtime.NumGoroutine() <= before+n/4 // a session holds two
	})
	proctest.Eventually(t, "the idle sessions' agents are terminated", func() bool { return allEnded(t, h, "idler", "idle") })
	for _, msg := range []string{listMsg, call(9, "console_print", `{"text":"x"}`, "")} {
		if status, _, body := c.send(t, "POST", ids[0], msg); status != http.StatusNotFound {
			t.Errorf("%s in an ended session: %d %s, want 404", msg, status, body)
		}
	}
	if status, id, body := c.send(t, "POST", "", initializeMsg); status != http.StatusOK || id == "" {
		t.Errorf("a new initialize: %d %s", status, body)
	}
}

// TestMCPOpenRequestKeepsSession: a session with a request open (here a
// tools/call) is not idle, however long the request; the session's end
// cancels it.
func TestMCPOpenRequestKeepsSession(t *testing.T) {
	w := newWaiter()
	cfg := &config.Config{Roles: []config.Role{{Name: "busy", ToolGroups: []string{"slow"}, Pos: "config.hcl:1,1"}, {Name: "idle", ToolGroups: []string{"slow"}, Pos: "config.hcl:2,1"}},
		MCP: config.MCP{SessionIdleTimeout: time.Second}}
	srv, h := serve(t, cfg, slowGroup(w))
	busy := rawMCP{url: srv.URL + "/mcp/busy"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var id string
	for started := false; !started; {
		// The call is in a session that is open, unless the session ended
		// before it came (idle between two requests on a slow machine).
		id = busy.open(t)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", busy.url, strings.NewReader(call(1, "wait", `{}`, "")))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			status := 0
			if resp, err := http.DefaultClient.Do(req); err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			done <- status
		}()
		select {
		case <-w.started:
			started = true
		case status := <-done:
			if status != http.StatusNotFound {
				t.Fatalf("the wait call answered %d before it started", status)
			}
		case <-time.After(proctest.Patience):
			t.Fatalf("the wait call did not start within %s", proctest.Patience)
		}
	}

	// A session opened later, and idle, ends first.
	rawMCP{url: srv.URL + "/mcp/idle"}.open(t)
	proctest.Eventually(t, "the idle session's agent is terminated", func() bool { return allEnded(t, h, "idle", "idle") })
	active := 0
	for _, a := range roleAgents(t, h, "busy") {
		if a.Status == store.StatusActive {
			active++
		}
	}
	if active != 1 {
		t.Errorf("the busy session's agent is not active: %+v", roleAgents(t, h, "busy"))
	}
	if status, _, body := busy.send(t, "DELETE", id, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	w.waitCancelled(t)
	cancel()
	<-done
}

// TestMCPSessionCapEndsLeastRecentlyUsed: a credential holds at most mcp {
// max_sessions_per_credential } sessions; the initialize past it opens one
// all the same, ending the credential's session idle longest (its agent
// terminated saying why, its id 404 from then on), and no other
// credential's; a session ended with DELETE makes room without ending one.
func TestMCPSessionCapEndsLeastRecentlyUsed(t *testing.T) {
	cfg := &config.Config{Roles: []config.Role{{Name: "worker", ToolGroups: []string{"console"}, Pos: "config.hcl:1,1"}},
		MCP: config.MCP{MaxSessionsPerCredential: 2}}
	srv, h := serve(t, cfg, group("console", "console_print"))
	url := srv.URL + "/mcp/worker"
	token := func(name string) rawMCP {
		secret, _, err := h.Tokens().Create(context.Background(), name, "worker", time.Time{}, "test")
		if err != nil {
			t.Fatal(err)
		}
		return rawMCP{url: url, token: secret}
	}
	alpha, beta, admin := token("alpha"), token("beta"), rawMCP{url: url}
	answers := func(c rawMCP, id string) bool {
		t.Helper()
		status, _, _ := c.send(t, "POST", id, listMsg)
		return status == http.StatusOK
	}
	evicted := func() int {
		n := 0
		for _, a := range roleAgents(t, h, "worker") {
			if a.Status == store.StatusTerminated && strings.Contains(a.Error, "max_sessions_per_credential") {
				n++
			}
		}
		return n
	}

	first, second := alpha.open(t), alpha.open(t)
	if !answers(alpha, first) { // first is now used more recently than second
		t.Fatal("the first session does not answer")
	}
	third := alpha.open(t)
	proctest.Eventually(t, "the least recently used session's agent is terminated", func() bool { return evicted() == 1 })
	if answers(alpha, second) {
		t.Error("the least recently used session still answers")
	}
	if !answers(alpha, first) || !answers(alpha, third) {
		t.Error("a session used more recently was ended")
	}
	beta.open(t)
	admin.open(t)
	if !answers(alpha, first) || !answers(alpha, third) || evicted() != 1 {
		t.Error("another credential's sessions ended one of alpha's")
	}

	if status, _, body := alpha.send(t, "DELETE", first, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", status, body)
	}
	alpha.open(t)
	if !answers(alpha, third) || evicted() != 1 {
		t.Error("a session opened after a DELETE ended another")
	}
}

// rawPost posts msg to url with the test's admin token and the headers
// (and, for a sessionless request, Mcp-Method and Mcp-Name), and returns
// the response (its body read) and its body; nil once ctx has ended.
func rawPost(t *testing.T, ctx context.Context, url string, header map[string]string, msg string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testToken)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if req.Header.Get("Mcp-Protocol-Version") >= mcpversion.Stateless { // the headers a sessionless request needs
		mcptest.SetMessageHeaders(req.Header, msg)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestMCPSessionCapAllBusy: when every session and agent key of a
// credential has a request open, a request that would need one more is
// refused, whatever its method and era, in one shape: 429, Retry-After,
// and a JSON-RPC error to its request whose code is -32000, naming the
// bound; it makes no agent. The busy ones answer on, and once a call ends,
// the next session opens.
func TestMCPSessionCapAllBusy(t *testing.T) {
	g := newGate()
	cfg := &config.Config{Roles: gateConfig.Roles, MCP: config.MCP{MaxSessionsPerCredential: 2}}
	srv, h := serve(t, cfg, g.group(), group("console", "console_print"))
	url := srv.URL + "/mcp/worker"
	session := rawMCP{url: url}.open(t)
	in2025 := map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-06-18"}
	key := func(name string) map[string]string {
		return map[string]string{"Mcp-Protocol-Version": mcpversion.Stateless, "Toolhost-Agent": name}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := make(chan int, 2)
	busy := []struct {
		header   map[string]string
		hold, ls string
	}{
		{in2025, call(1, "hold", `{}`, ""), listMsg},
		{key("k1"), call(1, "hold", `{}`, meta2026("")), request(8, "tools/list", `{}`, meta2026(""))},
	}
	for _, b := range busy {
		go func() {
			resp, _ := rawPost(t, ctx, url, b.header, b.hold)
			if resp == nil {
				held <- 0
				return
			}
			held <- resp.StatusCode
		}()
		select {
		case <-g.started:
		case <-time.After(proctest.Patience):
			t.Fatalf("the hold call did not start within %s", proctest.Patience)
		}
	}
	agents := len(roleAgents(t, h, "worker"))

	for _, row := range []struct {
		name   string
		header map[string]string
		msg    string
	}{
		{"initialize", nil, initializeMsg},
		{"sessionless tools/list, new key", key("k2"), request(7, "tools/list", `{}`, meta2026(""))},
		{"sessionless tools/call, new key", key("k2"), request(7, "tools/call", `{"name":"console_print","arguments":{"text":"x"}}`, meta2026(""))},
		{"sessionless tools/list, no key", key(""), request(7, "tools/list", `{}`, meta2026(""))},
		{"tools/call in the session, new key in _meta", in2025, call(7, "console_print", `{"text":"x"}`, `"toolhost/agent":"k3"`)},
	} {
		resp, body := rawPost(t, context.Background(), url, row.header, row.msg)
		var refusal mcptest.Reply
		err := json.Unmarshal(body, &refusal)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
			resp.Header.Get("Content-Type") != "application/json" || refusal.JSONRPC != "2.0" || string(refusal.ID) != "7" ||
			refusal.Result != nil || refusal.Error == nil || refusal.Error.Code != -32000 ||
			!strings.HasPrefix(refusal.Error.Message, "rate_limited: ") || !strings.Contains(refusal.Error.Message, "max_sessions_per_credential") {
			t.Errorf("%s: %d, Retry-After %q, %s; want 429, Retry-After 1 and a JSON-RPC error -32000 to request 7 naming the bound",
				row.name, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if n := len(roleAgents(t, h, "worker")); n != agents {
		t.Errorf("the refused requests made %d agents", n-agents)
	}
	for _, b := range busy {
		if resp, body := rawPost(t, context.Background(), url, b.header, b.ls); resp.StatusCode != http.StatusOK {
			t.Errorf("tools/list of a busy session or key (%v): %d %s", b.header, resp.StatusCode, body)
		}
	}

	close(g.open)
	for range 2 {
		if status := <-held; status != http.StatusOK {
			t.Errorf("a hold call: %d", status)
		}
	}
	if status, id, body := (rawMCP{url: url}).send(t, "POST", "", initializeMsg); status != http.StatusOK || id == "" {
		t.Errorf("an initialize once the calls ended: %d %s", status, body)
	}
}

// TestMCPDeleteEndsAgent: a client that ends its session (the go-sdk
// client's Close sends DELETE) ends its agent, and the session's id gets
// 404 from then on.
func TestMCPDeleteEndsAgent(t *testing.T) {
	srv, h := serve(t, &config.Config{Roles: []config.Role{{Name: "leaver", ToolGroups: []string{"console"}, Pos: "config.hcl:1,1"}}},
		group("console", "console_print"))
	url := srv.URL + "/mcp/leaver"
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url},
		&mcp.ClientSessionOptions{ProtocolVersion: sessionEra})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "console_print", Arguments: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
	if agents := roleAgents(t, h, "leaver"); len(agents) != 1 || agents[0].Status != store.StatusActive {
		t.Fatalf("the session's agent: %+v, want one, active", agents)
	}
	id := cs.ID()
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the session's agent is terminated", func() bool { return allEnded(t, h, "leaver", "DELETE") })
	if status, _, body := (rawMCP{url: url}).send(t, "POST", id, listMsg); status != http.StatusNotFound {
		t.Errorf("tools/list in the deleted session: %d %s, want 404", status, body)
	}
}

// TestMCPStdioEndEndsAgent: a session over stdio ends with its input, and
// its agent is terminated by the time ServeMCP returns.
func TestMCPStdioEndEndsAgent(t *testing.T) {
	_, h := serve(t, &config.Config{Roles: []config.Role{{Name: "piper", ToolGroups: []string{"console"}, Pos: "config.hcl:1,1"}}},
		group("console", "console_print"))
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ServeMCP(context.Background(), h, "piper", &mcp.IOTransport{Reader: serverIn, Writer: serverOut})
	}()
	c := &lineClient{w: clientOut, rd: bufio.NewReader(clientIn)}
	c.roundTrip(t, initializeMsg, 7)
	c.send(t, initializedMsg)
	c.roundTrip(t, listMsg, 8)
	_ = clientOut.Close()
	select {
	case <-done:
	case <-time.After(proctest.Patience):
		t.Fatalf("ServeMCP did not return within %s of its input's end", proctest.Patience)
	}
	if agents := roleAgents(t, h, "piper"); len(agents) != 1 || agents[0].Status != store.StatusTerminated {
		t.Errorf("the session's agent: %+v, want one, terminated", agents)
	}
}
