package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/hosttest"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/sdk"
)

// startHost starts a host on cfg, closed when the test ends.
func startHost(t testing.TB, cfg *config.Config) *host.Host {
	t.Helper()
	return hosttest.Start(t, cfg)
}

// testToken is the admin token of the servers the tests start, unless a
// test configures its own; http.DefaultTransport sends it (see TestMain).
const testToken = "test-admin-token-0123456789abcdef"

// plainTransport sends requests as they are, without testToken.
var plainTransport = http.DefaultTransport

// TestMain serves mcptest.ContentServer when this binary was re-executed
// as it; else it makes every request of http.DefaultClient (the tests' and the MCP
// SDK's) carry testToken, unless it carries an Authorization header already.
func TestMain(m *testing.M) {
	if os.Getenv(mcptest.ContentServerEnv) != "" {
		mcptest.ServeContent()
	}
	http.DefaultTransport = withToken{plainTransport}
	pgtest.Main(m)
}

// withToken adds testToken to requests without an Authorization header.
type withToken struct{ base http.RoundTripper }

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+testToken)
	}
	return t.base.RoundTrip(r)
}

// serve starts a host on cfg with the in-process groups, and an HTTP server
// on it, whose admin token is testToken unless cfg sets one; both stop when
// the test ends.
func serve(t *testing.T, cfg *config.Config, groups ...*sdk.Group) (*httptest.Server, *host.Host) {
	t.Helper()
	h := startHost(t, withTestToken(cfg))
	ctx := context.Background()
	for _, g := range groups {
		if err := h.Modules().Register(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	return newHTTPServer(t, h, nil), h
}

// withTestToken makes testToken cfg's admin token unless it has one or auth
// is off.
func withTestToken(cfg *config.Config) *config.Config {
	if cfg.Auth.Token == "" && !cfg.Auth.Disabled {
		cfg.Auth.Token = testToken
	}
	return cfg
}

// newHTTPServer serves h over HTTP until the test ends.
func newHTTPServer(t *testing.T, h *host.Host, opts *Options) *httptest.Server {
	t.Helper()
	handler, err := New(h, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

func newServer(t *testing.T) *httptest.Server {
	srv, _ := serve(t, &config.Config{}, &sdk.Group{ID: "console", Description: "Console.", Tools: []sdk.Tool{
		sdk.NewTool("console_print", "Print.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return nil, nil }),
	}})
	return srv
}

func get(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: content type %q", url, ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode
}

// serveClash serves a host whose MCP server group "files" has a tool that
// the core group workspace serves, read_file, and two of its own; the
// config role "reader" has files alone.
func serveClash(t *testing.T) (*httptest.Server, *host.Host) {
	t.Helper()
	noop := func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return nil, nil }
	cfg := &config.Config{Roles: []config.Role{{Name: "reader", ToolGroups: []string{"files"}}}}
	srv, h := serve(t, cfg, &sdk.Group{ID: "workspace", Description: "Files.", Tools: []sdk.Tool{sdk.NewTool("read_file", "Read.", noop)}})
	files := &sdk.Group{ID: "files", Description: "An MCP server.", Tools: []sdk.Tool{
		sdk.NewTool("read_file", "Read.", noop), sdk.NewTool("directory_tree", "Tree.", noop), sdk.NewTool("move_file", "Move.", noop)}}
	if err := h.Modules().Register(context.Background(), files); err != nil {
		t.Fatal(err)
	}
	return srv, h
}

// TestGroupCountsOfferedTools: an MCP server's group whose read_file a core
// group serves says so in /api/groups: its toolCount counts what a role
// with the group is offered (it counted read_file too, which the role
// never got), and the skipped tool is listed with its reason.
func TestGroupCountsOfferedTools(t *testing.T) {
	srv, _ := serveClash(t)
	var groups []host.GroupInfo
	get(t, srv.URL+"/api/groups", &groups)
	var role host.ToolList
	get(t, srv.URL+"/api/roles/reader/tools", &role)
	i := slices.IndexFunc(groups, func(g host.GroupInfo) bool { return g.ID == "files" })
	if i < 0 {
		t.Fatalf("no group files in %+v", groups)
	}
	g := groups[i]
	if g.ToolCount != len(role.Tools) || g.ToolCount != 2 || !slices.Equal(g.Tools, []string{"directory_tree", "move_file"}) {
		t.Errorf("files: toolCount %d, tools %v; the role is offered %d tools", g.ToolCount, g.Tools, len(role.Tools))
	}
	if want := []host.SkippedTool{{Name: "read_file", ServedBy: "workspace", Reason: "group workspace serves a tool of the same name"}}; !slices.Equal(g.Skipped, want) {
		t.Errorf("skipped %+v", g.Skipped)
	}
}

func TestEndpoints(t *testing.T) {
	srv := newServer(t)
	var health map[string]any
	if code := get(t, srv.URL+"/healthz", &health); code != 200 || health["status"] != "ok" || health["groups"] != 1.0 {
		t.Fatalf("healthz = %d %v", code, health)
	}
	var groups []map[string]any
	if code := get(t, srv.URL+"/api/groups", &groups); code != 200 || len(groups) != 1 {
		t.Fatalf("groups = %d %v", code, groups)
	}
	g := groups[0]
	src, _ := g["source"].(map[string]any)
	for k, want := range map[string]any{"id": "console", "description": "Console.", "toolCount": 1.0, "reserved": true} {
		if g[k] != want {
			t.Errorf("group[%s] = %v, want %v", k, g[k], want)
		}
	}
	if tools, _ := g["tools"].([]any); len(tools) != 1 || tools[0] != "console_print" {
		t.Errorf("tools = %v", g["tools"])
	}
	if src["kind"] != "runtime" || src["name"] != "console" || src["state"] != "running" || src["restarts"] != 0.0 {
		t.Errorf("source = %v", src)
	}
	var plugins []any
	if code := get(t, srv.URL+"/api/plugins", &plugins); code != 200 || len(plugins) != 0 {
		t.Fatalf("plugins = %d %v", code, plugins)
	}
}

func TestErrorsAreJSON(t *testing.T) {
	srv := newServer(t)
	var body struct {
		Error toolhost.ErrorInfo `json:"error"`
	}
	if code := get(t, srv.URL+"/api/nothing", &body); code != 404 || body.Error.Code != toolhost.CodeValidation || body.Error.Message == "" {
		t.Fatalf("404 = %d %+v", code, body)
	}
	resp, err := http.Post(srv.URL+"/api/groups", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusMethodNotAllowed ||
		resp.Header.Get("Allow") != "GET" || body.Error.Code != toolhost.CodeValidation {
		t.Fatalf("POST /api/groups = %d allow %q %+v (%v), want 405", resp.StatusCode, resp.Header.Get("Allow"), body, err)
	}
}

// TestWriteJSONDeepValue: an answer holding a deeply nested value (a
// tool's structured content, a call's story) is indented at its top
// levels only, so its size grows as the value's does, not with the
// square of its depth; it still decodes to the value.
func TestWriteJSONDeepValue(t *testing.T) {
	var v any = []any{}
	for range 2000 {
		v = []any{v}
	}
	compact, _ := json.Marshal(map[string]any{"result": v})
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]any{"result": v})
	if body := rec.Body.Bytes(); len(body) > 2*len(compact) || !json.Valid(body) {
		t.Fatalf("%d bytes for %d compact", len(body), len(compact))
	}
}
