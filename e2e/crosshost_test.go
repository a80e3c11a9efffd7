package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// pairConfig is a serve of TestTwoServesShareOnePostgres: the workspace
// module, the shared admin token, and the store on PostgreSQL.
const pairConfig = `
data_dir   = "data"
plugin_dir = %q
auth {
  token = "e2e-shared-admin-token-0123456789"
}
store {
  driver = "postgres"
  dsn    = %q
}
builtin "workspace" {
  config {}
}
`

// sibling is another serve of h's binary on a config of its own, in a
// directory of its own, on another port.
func (h *hostile) sibling(src string) *hostile {
	h.t.Helper()
	dir := h.t.TempDir()
	port := freePort(h.t, "127.0.0.2")
	s := &hostile{t: h.t, bin: h.bin, cfg: filepath.Join(dir, "config.hcl"), dir: dir, base: "http://127.0.0.2:" + port, port: port, stderr: &bytes.Buffer{}}
	if err := os.WriteFile(s.cfg, []byte(fmt.Sprintf("listen = \"127.0.0.2:%s\"\n", port)+src), 0o644); err != nil {
		h.t.Fatal(err)
	}
	s.admin = strings.TrimSpace(s.cli("token"))
	return s
}

// api sends a request to the serve with its admin token (or token when
// set), and returns the status and the decoded body.
func (h *hostile) api(method, path, token string, body any) (int, map[string]any) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+cmpOr(token, h.admin))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestTwoServesShareOnePostgres: two real serve processes on one
// PostgreSQL database act as one: a role created through A is served by B
// (told by PostgreSQL, which nothing polls); a call id used on A and repeated on B replays A's
// result; a token made on A opens B and, revoked on A, is refused by B
// within a second; an MCP session A opened is unknown to B (404); B's
// audit log shows A's calls.
func TestTwoServesShareOnePostgres(t *testing.T) {
	dsn := pgtest.Start(t)
	a := newServe(t, fmt.Sprintf(pairConfig, pluginDir, dsn))
	b := a.sibling(fmt.Sprintf(pairConfig, pluginDir, dsn))
	a.start()
	b.start()

	if code, body := a.api("POST", "/api/roles", "", map[string]any{"name": "reader", "toolGroups": []string{"workspace"}}); code != 201 {
		t.Fatalf("create a role on A: %d %v", code, body)
	}
	proctest.Eventually(t, "B serves the role A created", func() bool {
		code, _ := b.api("GET", "/api/roles/reader/tools", "", nil)
		return code == 200
	})

	call := map[string]any{"tool": "get_workspace_info", "arguments": map[string]any{}, "callId": "pair-1"}
	codeA, first := a.api("POST", "/api/call", "", call)
	codeB, again := b.api("POST", "/api/call", "", call)
	meta, _ := again["meta"].(map[string]any)
	if codeA != 200 || codeB != 200 || first["stdout"] != again["stdout"] || meta["replayed"] != true {
		t.Fatalf("call id pair-1 on A (%d) then B (%d): %v / %v", codeA, codeB, first, again)
	}

	secret := strings.TrimSpace(a.cli("tokens create", "-role", "reader", "-name", "pair"))
	if code, _ := b.api("GET", "/api/roles/reader/tools", secret, nil); code != 200 {
		t.Fatalf("A's token on B: %d", code)
	}
	a.cli("tokens revoke", "pair")
	proctest.Eventually(t, "B refuses the token revoked on A", func() bool {
		code, _ := b.api("GET", "/api/roles/reader/tools", secret, nil)
		return code == 401
	})

	// An MCP session lives on the host that opened it: another host
	// answers its requests 404, and the client opens a new session there
	// (docs/several-hosts.md: the load balancer keeps a session's requests
	// on one host).
	session := mcpPost(t, a.base+"/mcp/reader", a.admin, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	if session == "" {
		t.Fatal("A opened no MCP session")
	}
	if code := mcpStatus(t, b.base+"/mcp/reader", b.admin, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); code != http.StatusNotFound {
		t.Fatalf("A's MCP session on B: %d, want 404", code)
	}

	proctest.Eventually(t, "B's events show A's call", func() bool {
		out := b.cli("events", "-type", "tool_call.completed", "-json")
		return strings.Contains(out, `"pair-1"`)
	})
}

// mcpPost sends one JSON-RPC message to an MCP endpoint and returns the
// session id the answer names.
func mcpPost(t *testing.T, url, token, session, msg string) string {
	t.Helper()
	resp := mcpDo(t, url, token, session, msg)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
	return resp.Header.Get("Mcp-Session-Id")
}

// mcpStatus sends one JSON-RPC message to an MCP endpoint and returns the
// answer's status.
func mcpStatus(t *testing.T, url, token, session, msg string) int {
	t.Helper()
	resp := mcpDo(t, url, token, session, msg)
	resp.Body.Close()
	return resp.StatusCode
}

func mcpDo(t *testing.T, url, token, session, msg string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(msg))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
