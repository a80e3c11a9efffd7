package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/proctest"
)

// The role boundary against a hostile agent that holds one role token and
// everything it can make with it for free: MCP sessions of both eras,
// sessionless agent keys, agents, calls over the API. Each row is an
// attack against a real serve on the default config, plus only the blocks
// the rows need (a rule asking for an approval, a call limit, an approval
// on write_file), as an operator would add them.

// boundaryBlocks are what the rows add to the default config's developer
// role.
const boundaryBlocks = `
  rule "rm-asks" {
    tools  = ["run_command"]
    when   = "args.command.startsWith('rm ')"
    action = "approve"
    reason = "it deletes files"
  }
  limit "get_workspace_info" {
    calls = 5
    per   = "1m"
  }
`

// startBoundaryServe lays out the default deployment with the developer
// role's boundaryBlocks, write_file asking for an approval, and more in
// the config's top level, and runs serve on it.
func startBoundaryServe(t *testing.T, more string) *trustServe {
	t.Helper()
	dir := cloneLayout(t)
	cfg := filepath.Join(dir, "config.hcl")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for _, edit := range [][2]string{
		{"  tool_groups = [\"workspace\", \"command\"]\n", "  tool_groups = [\"workspace\", \"command\"]\n" + boundaryBlocks},
		{"builtin \"workspace\" {\n", "builtin \"workspace\" {\n  tool \"write_file\" {\n    requires_approval = true\n  }\n"},
	} {
		if !strings.Contains(src, edit[0]) {
			t.Fatalf("the default config.hcl has no %q", edit[0])
		}
		src = strings.Replace(src, edit[0], edit[1], 1)
	}
	if err := os.WriteFile(cfg, []byte(src+more), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, "127.0.0.2")
	t.Setenv("TOOLHOST_LISTEN", "127.0.0.2:"+port)
	h := &hostile{t: t, bin: filepath.Join(dir, "bin", "toolhost"), cfg: cfg, dir: dir, base: "http://127.0.0.2:" + port, port: port, stderr: &bytes.Buffer{}}
	h.admin = strings.TrimSpace(h.cli("token"))
	s := &trustServe{hostile: h, data: filepath.Join(dir, "data"), ws: filepath.Join(dir, "workspace")}
	s.dev = h.roleToken("developer", "dev", "")
	s.cmd = h.start()
	return s
}

// keyTransport sends a bearer token and, when key is not "", names the
// sessionless agent with the Toolhost-Agent header.
type keyTransport struct{ token, key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.token)
	if k.key != "" {
		r.Header.Set("Toolhost-Agent", k.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// eras are the protocol versions a hostile client speaks: a 2025 session,
// and the sessionless 2026-07-28.
var eras = []string{"2025-11-25", "2026-07-28"}

// devClient connects a go-sdk client, which accepts every elicitation, to
// /mcp/developer with token (and agent key key) in the era version.
func (s *trustServe) devClient(t *testing.T, token, key, version string) (*goClient, *mcp.ClientSession) {
	t.Helper()
	c := &goClient{}
	return c, c.connect(t, &mcp.StreamableClientTransport{Endpoint: s.base + "/mcp/developer",
		HTTPClient: &http.Client{Transport: keyTransport{token, key}}}, version)
}

// pendingFor waits until the queue lists a call whose arguments hold mark,
// and returns its id.
func (s *trustServe) pendingFor(t *testing.T, mark string) string {
	t.Helper()
	var id string
	proctest.Eventually(t, "a call holding "+mark+" waits for an approval", func() bool {
		_, body := s.send(request{method: "GET", path: "/api/approvals", token: s.admin})
		var list []struct {
			ID        string
			Arguments json.RawMessage
		}
		_ = json.Unmarshal([]byte(body), &list)
		for _, a := range list {
			if strings.Contains(string(a.Arguments), mark) {
				id = a.ID
				return true
			}
		}
		return false
	})
	return id
}

// callEvents returns the terminal events of the calls of tool.
func (s *trustServe) callEvents(t *testing.T, tool string) []map[string]any {
	t.Helper()
	_, body := s.send(request{method: "GET", path: "/api/events?tool=" + tool, token: s.admin})
	var events []map[string]any
	if err := json.Unmarshal([]byte(body), &events); err != nil {
		t.Fatalf("events: %v: %.300s", err, body)
	}
	var out []map[string]any
	for _, e := range events {
		if e["type"] == "tool_call.completed" || e["type"] == "tool_call.failed" {
			out = append(out, e)
		}
	}
	return out
}

// payload is an event's payload.
func payload(e map[string]any) map[string]any {
	p, _ := e["payload"].(map[string]any)
	return p
}

// TestRoleBoundaryCredentials: the caller never judges itself, and what a
// credential makes for free (agents, sessions, keys) never resets what
// bounds it.
func TestRoleBoundaryCredentials(t *testing.T) {
	s := startBoundaryServe(t, "")

	t.Run("an agent approves its own call", func(t *testing.T) {
		// A rule asks for an approval of rm. The agent's own client can
		// elicit and accepts whatever it is asked: over MCP in both eras,
		// and over the API, the call waits for the operator's queue, the
		// client is never asked, and the file stays until the operator
		// decides (here: denies). The record names the operator.
		type attempt struct {
			name string
			call func(cmd string) (string, func() int) // the call's outcome; how many elicitations the client saw
		}
		var attempts []attempt
		for _, era := range eras {
			attempts = append(attempts, attempt{"MCP " + era, func(cmd string) (string, func() int) {
				c, cs := s.devClient(t, s.dev, "", era)
				res, err := cs.CallTool(patient(t), &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": cmd}})
				return fmt.Sprintf("%s %v", resultText(res), err), func() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.elicitations) }
			}})
		}
		attempts = append(attempts, attempt{"API", func(cmd string) (string, func() int) {
			return s.call(s.dev, "developer", "run_command", map[string]any{"command": cmd}, "").String(), func() int { return 0 }
		}})
		for i, a := range attempts {
			victim := fmt.Sprintf("victim-%d.txt", i)
			if err := os.WriteFile(filepath.Join(s.ws, victim), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			done := make(chan string, 1)
			var elicited func() int
			var mu sync.Mutex
			go func() {
				out, n := a.call("rm " + victim)
				mu.Lock()
				elicited = n
				mu.Unlock()
				done <- out
			}()
			id := s.pendingFor(t, victim)
			select {
			case out := <-done:
				t.Fatalf("%s: the call ended before the operator decided: %s", a.name, out)
			default:
			}
			if _, err := os.Stat(filepath.Join(s.ws, victim)); err != nil {
				t.Fatalf("%s: the victim is gone before any decision: %v", a.name, err)
			}
			if code, body := s.send(request{method: "POST", path: "/api/approvals/" + id, token: s.dev, contentType: "application/json", body: `{"decision":"approve"}`}); code != 403 {
				t.Errorf("%s: the agent's token deciding its own approval = %d %s, want 403", a.name, code, body)
			}
			if code, body := s.send(request{method: "POST", path: "/api/approvals/" + id, token: s.admin, contentType: "application/json", body: `{"decision":"deny","reason":"not today"}`}); code != 204 {
				t.Fatalf("%s: the operator's denial = %d %s", a.name, code, body)
			}
			var out string
			select {
			case out = <-done:
			case <-time.After(proctest.Patience):
				t.Fatalf("%s: the denied call did not end", a.name)
			}
			mu.Lock()
			n := elicited()
			mu.Unlock()
			if !strings.Contains(out, "approval_denied") || !strings.Contains(out, "not today") || n != 0 {
				t.Errorf("%s: %s after %d elicitations of the client, want approval_denied and none", a.name, out, n)
			}
			if _, err := os.Stat(filepath.Join(s.ws, victim)); err != nil {
				t.Errorf("%s: the victim is gone: %v", a.name, err)
			}
		}
		// The events are written after the calls end: wait for them.
		proctest.Eventually(t, "the events record the admin denying each of dev's calls", func() bool {
			denied := 0
			for _, e := range s.callEvents(t, "run_command") {
				p := payload(e)
				ap, _ := p["approval"].(map[string]any)
				cred, _ := p["credential"].(string)
				if ap["decision"] == "deny" && ap["by"] == "admin" && strings.HasPrefix(cred, "token/dev/") {
					denied++
				}
			}
			return denied == len(attempts)
		})
	})

	t.Run("one token, many agents, one limit", func(t *testing.T) {
		// 5 calls a minute: sessions opened and closed, sessionless agent
		// keys and API calls, all with one token, get 5 between them.
		granted, refused := 0, 0
		count := func(isErr bool, text string) {
			switch {
			case !isErr:
				granted++
			case strings.Contains(text, "rate_limited") && strings.Contains(text, "counted for token/dev/"):
				refused++
			default:
				t.Errorf("an unexpected failure: %s", text)
			}
		}
		for i := range 4 {
			for _, era := range eras {
				key := ""
				if era >= "2026" {
					key = fmt.Sprintf("key-%d", i)
				}
				_, cs := s.devClient(t, s.dev, key, era)
				for range 2 {
					res, err := cs.CallTool(patient(t), &mcp.CallToolParams{Name: "get_workspace_info", Arguments: map[string]any{}})
					if err != nil {
						t.Fatal(err)
					}
					count(res.IsError, resultText(res))
				}
				_ = cs.Close()
			}
		}
		for range 3 {
			o := s.call(s.dev, "developer", "get_workspace_info", map[string]any{}, "")
			count(!o.OK, o.String())
		}
		if granted != 5 || refused != 4*2*2+3-5 {
			t.Errorf("one token made %d calls against a limit of 5 (%d refused)", granted, refused)
		}
	})

	t.Run("a token acts as another's agent", func(t *testing.T) {
		// dev's MCP session makes an agent; another token of the same role
		// may not call as it, nor may dev's token call as an agent the
		// other made: the events would name the wrong caller. The admin
		// may.
		other := s.roleToken("developer", "dev-other", "")
		agentOf := func(token string) string {
			_, cs := s.devClient(t, token, "", eras[0])
			if _, err := cs.CallTool(patient(t), &mcp.CallToolParams{Name: "list_files", Arguments: map[string]any{"path": "."}}); err != nil {
				t.Fatal(err)
			}
			var id string
			proctest.Eventually(t, "a list_files event names the token's credential", func() bool {
				for _, e := range s.callEvents(t, "list_files") {
					if cred, _ := payload(e)["credential"].(string); strings.HasPrefix(cred, "token/"+map[string]string{s.dev: "dev", other: "dev-other"}[token]+"/") {
						id, _ = e["agentId"].(string)
						return true
					}
				}
				return false
			})
			return id
		}
		devAgent, otherAgent := agentOf(s.dev), agentOf(other)
		asAgent := func(token, agent string) (int, string) {
			return s.send(request{method: "POST", path: "/api/call", token: token, contentType: "application/json",
				body: fmt.Sprintf(`{"agentId":%q,"tool":"list_files","arguments":{"path":"."}}`, agent)})
		}
		for _, row := range []struct {
			name, token, agent string
			want               int
		}{
			{"another token as dev's agent", other, devAgent, 403},
			{"dev as the other's agent", s.dev, otherAgent, 403},
			{"dev as its own agent", s.dev, devAgent, 200},
			{"the admin as dev's agent", s.admin, devAgent, 200},
		} {
			if code, body := asAgent(row.token, row.agent); code != row.want || row.want == 403 && !strings.Contains(body, "belongs to the credential that made it") {
				t.Errorf("%s: %d %.600s, want %d", row.name, code, body, row.want)
			}
		}
	})
}

// TestRoleBoundaryPendingApprovals: one token sends 20 calls of write_file
// with 15 MiB of content each at once, every one needing an approval, then
// goes away. Past the credential's bound of request bodies in flight (64
// MiB) or of pending work (32 MiB of arguments) the calls are refused at
// once with rate_limited; what waits
// keeps a bounded preview for the approver; a caller gone frees its
// approval at once; serve, in a memory cgroup of its own, stays within
// its bound.
func TestRoleBoundaryPendingApprovals(t *testing.T) {
	s := startBoundaryServe(t, "")
	serve := s.cmd.Process.Pid
	memoryCgroup(t, serve, 1<<30)
	content := strings.Repeat("x", 15<<20)
	body, _ := json.Marshal(map[string]any{"role": "developer", "tool": "write_file", "arguments": map[string]any{"path": "big.txt", "content": content}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 20
	type answer struct {
		status int
		body   string
	}
	answers := make(chan answer, n)
	for range n {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/api/call", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+s.dev)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{0, err.Error()}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers <- answer{resp.StatusCode, string(b)}
		}()
	}
	var pending []struct {
		ID            string
		Arguments     json.RawMessage
		ArgumentsSize int64
	}
	refused := 0
	proctest.Eventually(t, "every call is refused or waits", func() bool {
		for {
			select {
			case a := <-answers:
				if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, "rate_limited") ||
					!strings.Contains(a.body, "max_pending_approval_mb") && !strings.Contains(a.body, "MiB per credential") {
					t.Fatalf("a call past the bound: %d %.300s", a.status, a.body)
				}
				refused++
				continue
			default:
			}
			break
		}
		_, list := s.send(request{method: "GET", path: "/api/approvals", token: s.admin})
		_ = json.Unmarshal([]byte(list), &pending)
		return refused+len(pending) == n
	})
	if len(pending) > 2 {
		t.Errorf("%d calls of 15 MiB wait for an approval, want at most 2 (32 MiB)", len(pending))
	}
	for _, p := range pending {
		if len(p.Arguments) > 17<<10 || p.ArgumentsSize < 15<<20 {
			t.Errorf("an approval keeps %d bytes of arguments of %d", len(p.Arguments), p.ArgumentsSize)
		}
	}
	hwm := statusKB(serve, "VmHWM")
	t.Logf("serve's peak RSS: %d MiB; %d refused, %d pending", hwm>>10, refused, len(pending))
	if hwm == 0 || hwm > 768<<10 {
		t.Errorf("serve's peak RSS is %d MiB, want at most 768 MiB", hwm>>10)
	}
	// The callers go away: their approvals end at once.
	cancel()
	proctest.Eventually(t, "the abandoned approvals end", func() bool {
		_, list := s.send(request{method: "GET", path: "/api/approvals", token: s.admin})
		return strings.TrimSpace(list) == "[]"
	})
	if _, err := os.Stat(filepath.Join(s.ws, "big.txt")); err == nil {
		t.Error("a write that waited for an approval ran")
	}
}
