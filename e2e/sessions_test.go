package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// The hostile-agent suite's rows on MCP sessions and agent keys: one role
// token that opens session after session (2025: initialize, and DELETE or
// not) and names key after key (2026-07-28: a Toolhost-Agent header on
// sessionless requests), against a real serve whose credentials hold at
// most sessionCap sessions and keys.

// sessionsConfig is the serve of TestHostileSessions: the command module
// (run_command keeps a request open as long as a command sleeps), a role
// per row, the cap, and what else a row needs (%s).
const sessionsConfig = `
data_dir   = "data"
plugin_dir = %q
executor {
  approver = "approve"
}
builtin "command" {
  config {}
}
role "flood" {
  tool_groups = ["command"]
}
role "crash" {
  tool_groups = ["command"]
}
role "busy" {
  tool_groups = ["command"]
}
role "gone" {
  tool_groups = ["command"]
}
mcp {
  max_sessions_per_credential = 5
}
%s
`

// sessionCap is sessionsConfig's max_sessions_per_credential.
const sessionCap = 5

// The JSON-RPC messages of the rows: a 2025 session's initialize (id 1)
// and initialized, and the _meta of a 2026-07-28 sessionless request.
const (
	initialize2025  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}`
	initialized2025 = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	meta2026        = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"hostile","version":"1"}}`
)

// rpc is a JSON-RPC request of id; params is its params' members after
// _meta (2026-07-28 only) or "".
func rpc(id int, method string, in2026 bool, params string) string {
	var members []string
	if in2026 {
		members = append(members, meta2026)
	}
	if params != "" {
		members = append(members, params)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, id, method, strings.Join(members, ","))
}

// mcpReply is an answer of /mcp/ROLE as a client sees it.
type mcpReply struct {
	status int
	header http.Header
	body   string
}

// mcpPost posts a JSON-RPC message to /mcp/role with token: in the session
// with the id when session is set, else, with key set, as a sessionless
// 2026-07-28 request of that agent key ("-": of no key).
func (h *hostile) mcpPost(ctx context.Context, role, token, session, key, msg string) (*mcpReply, error) {
	return mcpPostURL(ctx, h.base+"/mcp/"+role, token, session, key, msg)
}

// mcpPostURL is [hostile.mcpPost] to the MCP endpoint url, which may be
// another server's or a proxy's.
func mcpPostURL(ctx context.Context, url, token, session, key, msg string) (*mcpReply, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(msg))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	switch {
	case session != "":
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	case key != "":
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		mcptest.SetMessageHeaders(req.Header, msg)
		if key != "-" {
			req.Header.Set("Toolhost-Agent", key)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return &mcpReply{status: resp.StatusCode, header: resp.Header, body: string(body)}, err
}

// post is mcpPost of a request that must be answered, in test t.
func (h *hostile) post(t *testing.T, role, token, session, key, msg string) *mcpReply {
	t.Helper()
	r, err := h.mcpPost(context.Background(), role, token, session, key, msg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// mcpDelete ends the session with the id, as a client that closes it does,
// and returns the status.
func (h *hostile) mcpDelete(t *testing.T, role, token, session string) int {
	t.Helper()
	req, _ := http.NewRequest("DELETE", h.base+"/mcp/"+role, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// openSession opens a 2025 session of role with token whose agent exists
// (it answered tools/list), and returns its id; it fails t on any
// refusal.
func (h *hostile) openSession(t *testing.T, role, token string) string {
	t.Helper()
	r := h.post(t, role, token, "", "", initialize2025)
	id := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	if r := h.post(t, role, token, id, "", initialized2025); r.status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", r.status, r.body)
	}
	if r := h.post(t, role, token, id, "", rpc(2, "tools/list", false, "")); r.status != http.StatusOK {
		t.Fatalf("tools/list: %d %s", r.status, r.body)
	}
	return id
}

// useKey makes (or uses) the sessionless agent of key with a tools/list,
// and fails t on any refusal.
func (h *hostile) useKey(t *testing.T, role, token, key string) {
	t.Helper()
	if r := h.post(t, role, token, "", key, rpc(3, "tools/list", true, "")); r.status != http.StatusOK || !strings.Contains(r.body, "run_command") {
		t.Fatalf("tools/list of key %s: %d %s", key, r.status, r.body)
	}
}

// listedAgent is an agent as GET /api/agents lists it.
type listedAgent struct {
	ID, Role, Status, Error string
}

// agentsOf returns the agents of role in GET /api/agents?limit=1000, which
// holds them all here.
func (h *hostile) agentsOf(t *testing.T, role string) []listedAgent {
	t.Helper()
	status, body := h.send(request{method: "GET", path: "/api/agents?limit=1000", token: h.admin})
	var all []listedAgent
	if err := json.Unmarshal([]byte(body), &all); status != http.StatusOK || err != nil {
		t.Fatalf("GET /api/agents: %d %v", status, err)
	}
	if len(all) == 1000 {
		t.Fatal("GET /api/agents?limit=1000 answered 1000 agents: the rows cannot count them")
	}
	var out []listedAgent
	for _, a := range all {
		if a.Role == role {
			out = append(out, a)
		}
	}
	return out
}

// count returns how many of agents have the status.
func count(agents []listedAgent, status string) int {
	n := 0
	for _, a := range agents {
		if a.Status == status {
			n++
		}
	}
	return n
}

// TestHostileSessions: one role token cannot grow the agents without
// bound, nor lock itself out. Each row's attack, and what must hold after
// it.
func TestHostileSessions(t *testing.T) {
	h := newServe(t, fmt.Sprintf(sessionsConfig, pluginDir, ""))
	h.start()
	const flood = 300

	t.Run("300 sessions and 300 agent keys of one token leave the cap's worth of live agents", func(t *testing.T) {
		token := h.roleToken("flood", "flood", "")
		for range flood { // a client that never ends its sessions
			h.openSession(t, "flood", token)
		}
		for i := range flood {
			h.useKey(t, "flood", token, fmt.Sprintf("key-%d", i))
		}
		proctest.Eventually(t, "the agents past the cap marked ended", func() bool {
			agents := h.agentsOf(t, "flood")
			return len(agents) == 2*flood && count(agents, "terminated") == 2*flood-sessionCap
		})
		agents := h.agentsOf(t, "flood")
		if live := count(agents, "active"); live != sessionCap {
			t.Errorf("%d live agents of the token, want %d", live, sessionCap)
		}
		for _, a := range agents {
			if a.Status == "terminated" && !strings.Contains(a.Error, "max_sessions_per_credential") {
				t.Errorf("agent %s ended for %q, want the cap named", a.ID, a.Error)
				break
			}
		}
		// The page's list is paged: the live agents first, 100 at most.
		status, body := h.send(request{method: "GET", path: "/api/agents", token: h.admin})
		var page []listedAgent
		if err := json.Unmarshal([]byte(body), &page); status != http.StatusOK || err != nil || len(page) > 100 || len(page) <= sessionCap ||
			count(page[:sessionCap+1], "active") != sessionCap+1 { // the token's live agents and the root agent
			t.Errorf("GET /api/agents: %d, %d agents, %d bytes; want at most 100, the live ones first", status, len(page), len(body))
		}
	})

	t.Run("a client that crashed and reconnects gets a session at once", func(t *testing.T) {
		token := h.roleToken("crash", "crash", "")
		var left []string
		for range sessionCap {
			left = append(left, h.openSession(t, "crash", token))
		}
		fresh := h.openSession(t, "crash", token) // fails on any refusal
		if r := h.post(t, "crash", token, left[0], "", rpc(4, "tools/list", false, "")); r.status != http.StatusNotFound {
			t.Errorf("the session idle longest, after the new one: %d %s; want 404 (ended)", r.status, r.body)
		}
		for _, id := range append(left[1:], fresh) {
			if r := h.post(t, "crash", token, id, "", rpc(4, "tools/list", false, "")); r.status != http.StatusOK {
				t.Errorf("a session used since: %d %s", r.status, r.body)
			}
		}
		h.useKey(t, "crash", token, "after") // sessionless requests too
	})

	t.Run("with every session and key busy, the next request gets 429, Retry-After and a JSON-RPC error", func(t *testing.T) {
		token := h.roleToken("busy", "busy", "")
		sleep := `"name":"run_command","arguments":{"command":"sleep 120"}`
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var sessions []string
		for i := range sessionCap {
			session, key := "", ""
			if i < 3 {
				session = h.openSession(t, "busy", token)
				sessions = append(sessions, session)
			} else {
				key = fmt.Sprintf("sleeper-%d", i)
			}
			wg.Go(func() {
				_, _ = h.mcpPost(ctx, "busy", token, session, key, rpc(10+i, "tools/call", session == "", sleep))
			})
		}
		defer func() {
			cancel() // the sessionless calls end with their requests
			for _, id := range sessions {
				h.mcpDelete(t, "busy", token, id) // and a session's with the session
			}
			wg.Wait()
		}()
		proctest.Eventually(t, "every session and key has its call running", func() bool {
			status, body := h.send(request{method: "GET", path: "/api/events?tool=run_command&type=tool_call.started", token: h.admin})
			return status == http.StatusOK && strings.Count(body, `"role": "busy"`) == sessionCap
		})
		for _, row := range []struct {
			name, session, key, msg string
		}{
			{"initialize (2025)", "", "", initialize2025},
			{"tools/list of a new key (2026)", "", "new", rpc(1, "tools/list", true, "")},
			{"tools/call of a new key (2026)", "", "new", rpc(1, "tools/call", true, `"name":"run_command","arguments":{"command":"true"}`)},
			{"tools/list of no key (2026)", "", "-", rpc(1, "tools/list", true, "")},
			{"tools/call of a new key in a session (2025)", sessions[0], "", rpc(1, "tools/call", false, `"_meta":{"toolhost/agent":"new"},"name":"run_command","arguments":{"command":"true"}`)},
		} {
			r := h.post(t, "busy", token, row.session, row.key, row.msg)
			var reply mcptest.Reply
			err := json.Unmarshal([]byte(r.body), &reply)
			retry, rerr := strconv.Atoi(r.header.Get("Retry-After"))
			if r.status != http.StatusTooManyRequests || rerr != nil || retry < 1 || err != nil || reply.JSONRPC != "2.0" || string(reply.ID) != "1" ||
				reply.Result != nil || reply.Error == nil || reply.Error.Code > -32000 || reply.Error.Code < -32099 ||
				!strings.Contains(reply.Error.Message, "max_sessions_per_credential") {
				t.Errorf("%s: %d, Retry-After %q, %s; want 429, Retry-After and a JSON-RPC server error (-32099…-32000) to request 1 naming the cap",
					row.name, r.status, r.header.Get("Retry-After"), r.body)
			}
		}
	})

	t.Run("ended agents are removed after store { agent_retention }", func(t *testing.T) {
		g := newServe(t, fmt.Sprintf(sessionsConfig, pluginDir, "store {\n  agent_retention = \"2s\"\n}"))
		g.start()
		token := g.roleToken("gone", "gone", "")
		for range flood { // a client that ends its sessions
			id := g.openSession(t, "gone", token)
			if status := g.mcpDelete(t, "gone", token, id); status != http.StatusNoContent {
				t.Fatalf("DELETE: %d", status)
			}
		}
		for i := range flood {
			g.useKey(t, "gone", token, fmt.Sprintf("key-%d", i))
		}
		proctest.Eventually(t, "the ended agents removed", func() bool {
			agents := g.agentsOf(t, "gone")
			return len(agents) == sessionCap && count(agents, "active") == sessionCap
		})
	})
}
