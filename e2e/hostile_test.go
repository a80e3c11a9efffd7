package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// The hostile-agent suite: a real `toolhost serve` with real plugins and a
// real Chromium, attacked the way an agent (or a web page, or a local
// process) would. Every request stays on loopback.

// hostile is a running `toolhost serve` and what the attacks need of it.
type hostile struct {
	t      *testing.T
	bin    string // the toolhost executable
	cfg    string // its config file
	dir    string // the config's directory: the workspace, with data/ in it
	base   string // http://127.0.0.2:PORT
	port   string
	admin  string // the admin token, from `toolhost token`
	stderr *bytes.Buffer
}

// startHostile builds toolhost and runs `serve` on 127.0.0.2 with the
// workspace, command and chrome modules and three roles: webber (chrome
// only, editable), developer (workspace and command, from the config) and
// root. The chrome module may
// reach 127.0.0.2 (the host itself, as an operator might allow, so that the
// credentials are what stops the page) and 127.0.0.3 (the attacker's pages);
// every other loopback address is refused as by default.
func startHostile(t *testing.T) *hostile {
	t.Helper()
	src := fmt.Sprintf(`
data_dir   = "data"
plugin_dir = %q
executor {
  approver = "approve"
}
builtin "workspace" {
  config {}
}
builtin "command" {
  config {}
}
plugin "chrome" {
  path = "chrome"
  config {
    allow_hosts = ["127.0.0.2", "127.0.0.3"]
  }
  sandbox {
    network = "allowed"  # its proxy applies the config's allow_hosts
    limits {
      memory_mb = -1
      processes = 2048
    }
  }
}
role "developer" {
  tool_groups = ["workspace", "command"]
}
`, pluginDir)
	h := newServe(t, src)
	// webber is made at run time, so it is editable: a write that got
	// through would change it.
	h.cli("roles create", "-groups", "chrome", "webber")
	h.start()
	return h
}

// newServe builds toolhost and writes a config file in a new directory (the
// workspace): src after a listen line for a free port on 127.0.0.2. It makes
// the admin token; start runs serve.
func newServe(t *testing.T, src string) *hostile {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "toolhost")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/toolhost").CombinedOutput(); err != nil {
		t.Fatalf("build toolhost: %v\n%s", err, out)
	}
	dir := t.TempDir()
	port := freePort(t, "127.0.0.2")
	src = fmt.Sprintf("listen = \"127.0.0.2:%s\"\n", port) + src
	h := &hostile{t: t, bin: bin, cfg: filepath.Join(dir, "config.hcl"), dir: dir, base: "http://127.0.0.2:" + port, port: port, stderr: &bytes.Buffer{}}
	if err := os.WriteFile(h.cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	h.admin = strings.TrimSpace(h.cli("token"))
	return h
}

// start runs `toolhost serve` on the config until the test ends, waits
// until it is ready, and returns its process.
func (h *hostile) start() *exec.Cmd {
	t := h.t
	t.Helper()
	cmd := exec.Command(h.bin, "serve", "-config", h.cfg)
	cmd.Dir = h.dir
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("serve's log:\n%s", h.stderr)
		}
	})
	proctest.Eventually(t, "serve is ready", func() bool {
		resp, err := http.Get(h.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return cmd
}

// freePort returns a port free on the loopback address ip.
func freePort(t *testing.T, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// cli runs the toolhost command (such as "tokens revoke") with the suite's
// config and args, and returns its stdout.
func (h *hostile) cli(command string, args ...string) string {
	h.t.Helper()
	argv := append(strings.Fields(command), "-config", h.cfg)
	cmd := exec.Command(h.bin, append(argv, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		h.t.Fatalf("toolhost %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// roleToken makes a token for role with the CLI, expiring after expires
// (empty: never), and returns its secret.
func (h *hostile) roleToken(role, name, expires string) string {
	h.t.Helper()
	args := []string{"-role", role, "-name", name}
	if expires != "" {
		args = append(args, "-expires", expires)
	}
	return strings.TrimSpace(h.cli("tokens create", args...))
}

// request is one HTTP request of an attack.
type request struct {
	method, path, token, host, contentType, origin, body string
}

// send sends r and returns the status and body.
func (h *hostile) send(r request) (int, string) {
	h.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, h.base+r.path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.host != "" {
		req.Host = r.host
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.origin != "" {
		req.Header.Set("Origin", r.origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mcpSession connects to /mcp/role with token, as an MCP client would.
func (h *hostile) mcpSession(role, token string) (*mcp.ClientSession, error) {
	client := &http.Client{Transport: bearerTransport(token)}
	return mcp.NewClient(&mcp.Implementation{Name: "attacker"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: h.base + "/mcp/" + role, HTTPClient: client}, nil)
}

// bearerTransport sends token on every request.
type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// victim is a loopback server an attack must not reach; it counts requests.
type victim struct {
	url  string
	hits atomic.Int64
}

func newVictim(t *testing.T, ip string) *victim {
	t.Helper()
	v := &victim{}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.hits.Add(1)
		fmt.Fprint(w, "secret")
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	v.url = "http://" + l.Addr().String()
	return v
}

// attackerPage serves html on 127.0.0.3, a page an agent is lured to.
func attackerPage(t *testing.T, html string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, html)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String() + "/"
}

// TestHostileAgent drives a real serve as a hostile agent, a hostile web
// page and a hostile local process would. Each row is one attack: what it
// sends, what it must get, and what must be unchanged afterwards.
func TestHostileAgent(t *testing.T) {
	h := startHostile(t)
	webberToken := h.roleToken("webber", "webber-mcp", "")
	devToken := h.roleToken("developer", "cursor", "")
	webber, err := h.mcpSession("webber", webberToken)
	if err != nil {
		t.Fatal(err)
	}
	defer webber.Close()
	webberTools := mcptest.ToolNames(t, webber)
	roleOf := func(name string) string {
		_, body := h.send(request{method: "GET", path: "/api/roles/" + name, token: h.admin})
		return body
	}
	webberBefore, developerBefore := roleOf("webber"), roleOf("developer")
	unchanged := func(row string) {
		t.Helper()
		if got := roleOf("webber"); got != webberBefore {
			t.Errorf("%s: role webber changed: %s", row, got)
		}
		if got := roleOf("developer"); got != developerBefore {
			t.Errorf("%s: role developer changed: %s", row, got)
		}
		if got := mcptest.ToolNames(t, webber); !slices.Equal(got, webberTools) {
			t.Errorf("%s: webber's tools changed: %v", row, got)
		}
	}

	t.Run("browser takes over the host", func(t *testing.T) {
		// The attack: the chrome-only agent loads the host's own
		// page (allowed here for the browser), then writes to the API
		// from it, same-origin. The browser holds no credential.
		if out, isErr := mcptest.CallText(t, webber, "navigate", map[string]any{"url": h.base + "/healthz"}); isErr {
			t.Fatalf("navigate to the host (allowed in this config): %s", out)
		}
		for _, row := range []struct{ name, script, want string }{
			{"PUT its own role", `fetch('/api/roles/webber', {method: 'PUT', headers: {'Content-Type': 'application/json'}, body: '{"toolGroups":[]}'}).then(r => r.status)`, "401"},
			{"PUT as a simple request", `fetch('/api/roles/webber', {method: 'PUT', body: '{"toolGroups":[]}'}).then(r => r.status)`, "401"},
			{"create a role", `fetch('/api/roles', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"name":"mine","toolGroups":["command"]}'}).then(r => r.status)`, "401"},
			{"run a command", `fetch('/api/call', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{"tool":"run_command","arguments":{"command":"id"}}'}).then(r => r.status)`, "401"},
			{"fetch /mcp/root", `fetch('/mcp/root', {method: 'POST', headers: {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}, body: JSON.stringify({jsonrpc: '2.0', id: 1, method: 'initialize', params: {protocolVersion: '2025-06-18', capabilities: {}, clientInfo: {name: 'x', version: '1'}}})}).then(r => r.status)`, "401"},
			{"read the roles", `fetch('/api/roles').then(r => r.status)`, "401"},
		} {
			out, isErr := mcptest.CallText(t, webber, "evaluate", map[string]any{"expression": row.script})
			if isErr || out != row.want {
				t.Errorf("%s: %s (error %v), want %s", row.name, out, isErr, row.want)
			}
			unchanged(row.name)
		}
	})

	t.Run("browser reaches loopback and metadata", func(t *testing.T) {
		v4 := newVictim(t, "127.0.0.1")
		port := v4.url[strings.LastIndex(v4.url, ":")+1:]
		for _, url := range []string{v4.url + "/", "http://localhost:" + port + "/", "http://[::1]:" + port + "/", "http://127.1.2.3:" + port + "/"} {
			out, isErr := mcptest.CallText(t, webber, "navigate", map[string]any{"url": url})
			if !isErr || !strings.HasPrefix(out, "policy:") || !regexp.MustCompile(`loopback|not in allow_hosts`).MatchString(out) {
				t.Errorf("navigate %s: %s (error %v), want policy naming the rule", url, out, isErr)
			}
		}
		for _, url := range []string{"file:///etc/passwd", "chrome://version", "devtools://devtools/bundled/inspector.html"} {
			if out, isErr := mcptest.CallText(t, webber, "navigate", map[string]any{"url": url}); !isErr || !strings.HasPrefix(out, "policy:") {
				t.Errorf("navigate %s: %s, want policy", url, out)
			}
		}
		// An allowed page that reaches for loopback from inside.
		page := attackerPage(t, `<!doctype html><title>lure</title>`)
		if out, isErr := mcptest.CallText(t, webber, "navigate", map[string]any{"url": page}); isErr {
			t.Fatalf("navigate to the attacker's page: %s", out)
		}
		for _, script := range []string{
			`fetch('` + v4.url + `/').then(r => r.status).catch(e => 'refused')`,
			`fetch('http://localhost:` + port + `/', {mode: 'no-cors'}).then(r => 'reached').catch(e => 'refused')`,
			`new Promise(res => { const ws = new WebSocket('ws://127.0.0.1:` + port + `/'); ws.onopen = () => res('reached'); ws.onerror = () => res('refused') })`,
		} {
			if out, _ := mcptest.CallText(t, webber, "evaluate", map[string]any{"expression": script}); out != `"refused"` {
				t.Errorf("%s = %s, want refused", script, out)
			}
		}
		if n := v4.hits.Load(); n != 0 {
			t.Errorf("the loopback victim was reached %d times", n)
		}
		unchanged("loopback")
	})

	t.Run("no credential", func(t *testing.T) {
		for _, r := range []request{
			{method: "GET", path: "/api/roles"},
			{method: "POST", path: "/api/roles", contentType: "application/json", body: `{"name":"mine"}`},
			{method: "POST", path: "/mcp/root", contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`},
			{method: "GET", path: "/api/events"},
			{method: "POST", path: "/api/call", contentType: "application/json", body: `{"tool":"run_command","arguments":{"command":"id"}}`},
		} {
			if code, body := h.send(r); code != 401 || !strings.Contains(body, `"code": "policy"`) {
				t.Errorf("%s %s without a token = %d %s, want 401", r.method, r.path, code, body)
			}
		}
		if code, _ := h.send(request{method: "GET", path: "/healthz"}); code != 200 {
			t.Errorf("healthz = %d", code)
		}
		unchanged("no credential")
	})

	t.Run("a role token stays in its role", func(t *testing.T) {
		for _, r := range []request{
			{method: "GET", path: "/api/roles", token: devToken},
			{method: "POST", path: "/mcp/root", token: devToken, contentType: "application/json", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`},
			{method: "PUT", path: "/api/roles/developer", token: devToken, contentType: "application/json", body: `{"toolGroups":[]}`},
			{method: "POST", path: "/api/call", token: devToken, contentType: "application/json", body: `{"tool":"navigate","arguments":{"url":"http://127.0.0.3/"}}`},
			{method: "POST", path: "/api/call", token: devToken, contentType: "application/json", body: `{"role":"webber","tool":"navigate","arguments":{"url":"http://127.0.0.3/"}}`},
			{method: "POST", path: "/api/auth/tokens", token: devToken, contentType: "application/json", body: `{"role":"root"}`},
		} {
			if code, body := h.send(r); code != 403 || !strings.Contains(body, `token \"cursor\" is for role developer`) {
				t.Errorf("%s %s %s with the developer's token = %d %s, want 403 policy", r.method, r.path, r.body, code, body)
			}
		}
		if _, err := h.mcpSession("root", devToken); err == nil {
			t.Error("the developer's token opened /mcp/root")
		}
		dev, err := h.mcpSession("developer", devToken)
		if err != nil {
			t.Fatalf("the developer's token on /mcp/developer: %v", err)
		}
		defer dev.Close()
		if tools := mcptest.ToolNames(t, dev); !slices.Contains(tools, "run_command") || slices.Contains(tools, "navigate") {
			t.Errorf("developer's tools = %v", tools)
		}
		// The data directory is beside the workspace: the admin token is
		// not the developer's to read.
		for _, path := range []string{"../data/admin.token", filepath.Join(h.dir, "data", "admin.token"), "../data/toolhost.db"} {
			if out, isErr := mcptest.CallText(t, dev, "read_file", map[string]any{"path": path}); !isErr || !strings.HasPrefix(out, "policy:") || strings.Contains(out, h.admin) {
				t.Errorf("read_file %s: %s, want policy", path, out)
			}
		}
		if out, _ := mcptest.CallText(t, dev, "search_files", map[string]any{"pattern": "thk_", "literal": true}); strings.Contains(out, h.admin) {
			t.Errorf("search_files found the admin token: %s", out)
		}
		// run_command is a shell in a sandbox: an attack on what the sandbox
		// hides (the shadow file, the admin token, the host's own API, a
		// file planted outside the workspace) finds and leaves nothing.
		planted := filepath.Join(os.TempDir(), "toolhost-e2e-planted-"+h.port)
		defer os.Remove(planted)
		out, _ := mcptest.CallText(t, dev, "run_command", map[string]any{"command": "head -3 /etc/shadow; cat data/admin.token; ls /root; " +
			"curl -s -m 3 " + h.base + "/healthz; touch " + planted + "; echo END"})
		if strings.Contains(out, "root:") || strings.Contains(out, h.admin) || strings.Contains(out, `"status"`) || !strings.Contains(out, "END") {
			t.Errorf("run_command reached the host: %s", out)
		}
		if _, err := os.Stat(planted); err == nil {
			t.Errorf("run_command planted %s", planted)
		}
		unchanged("role token")
	})

	t.Run("DNS rebinding and simple requests", func(t *testing.T) {
		marker := filepath.Join(h.dir, "pwned")
		call := `{"tool":"run_command","arguments":{"command":"touch ` + marker + `"}}`
		rebind := "rebind.attacker.example:" + h.port
		for _, r := range []request{
			{method: "POST", path: "/api/call", host: rebind, origin: "http://" + rebind, contentType: "text/plain", body: call},
			{method: "POST", path: "/api/call", host: rebind, origin: "http://" + rebind, contentType: "text/plain", body: call, token: h.admin},
			{method: "POST", path: "/api/call", host: rebind, contentType: "application/json", body: call, token: h.admin},
			{method: "GET", path: "/api/roles", host: rebind, token: h.admin},
		} {
			if code, body := h.send(r); code != 403 || !strings.Contains(body, "DNS rebinding") {
				t.Errorf("%s %s Host %s (token %v) = %d %s, want 403 policy", r.method, r.path, r.host, r.token != "", code, body)
			}
		}
		if code, body := h.send(request{method: "POST", path: "/api/call", token: h.admin, contentType: "text/plain", body: call}); code != 415 {
			t.Errorf("a text/plain call with the admin token = %d %s, want 415", code, body)
		}
		if code, body := h.send(request{method: "POST", path: "/api/call", token: h.admin, contentType: "application/json", origin: "http://evil.example", body: call}); code != 403 {
			t.Errorf("a call from another origin = %d %s, want 403", code, body)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the command ran")
		}
		unchanged("rebinding")
	})

	t.Run("revoked and expired tokens", func(t *testing.T) {
		tok := h.roleToken("developer", "short-lived", "")
		if code, _ := h.send(request{method: "GET", path: "/api/roles/developer/tools", token: tok}); code != 200 {
			t.Fatalf("a fresh token = %d", code)
		}
		session, err := h.mcpSession("developer", tok)
		if err != nil {
			t.Fatal(err)
		}
		defer session.Close()
		h.cli("tokens revoke", "short-lived") // another process, at once
		if code, body := h.send(request{method: "GET", path: "/api/roles/developer/tools", token: tok}); code != 401 || !strings.Contains(body, "revoked") {
			t.Errorf("a revoked token = %d %s, want 401", code, body)
		}
		if _, err := session.ListTools(context.Background(), nil); err == nil {
			t.Error("an MCP session opened with a revoked token still answers")
		}
		expired := h.roleToken("developer", "expired", "1ns")
		if code, body := h.send(request{method: "GET", path: "/api/roles/developer/tools", token: expired}); code != 401 || !strings.Contains(body, `token \"expired\" expired on`) {
			t.Errorf("an expired token = %d %s, want 401", code, body)
		}
	})

	// The events show that one command ran: the developer's, in its
	// sandbox; none of the requests above ran one.
	var events []map[string]any
	_, body := h.send(request{method: "GET", path: "/api/events?tool=run_command", token: h.admin})
	err = json.Unmarshal([]byte(body), &events)
	completed := 0
	for _, e := range events {
		if e["type"] == "tool_call.completed" {
			completed++
		}
	}
	if err != nil || completed != 1 || slices.ContainsFunc(events, func(e map[string]any) bool { return e["role"] != "developer" }) {
		t.Errorf("run_command events = %s", body)
	}
}
