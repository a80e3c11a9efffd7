package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/store"
)

// attack is one request an attacker sends, and what it must get.
type attack struct {
	name    string
	method  string
	path    string
	token   string            // the bearer token; "" sends none
	host    string            // the Host header; "" the server's own
	headers map[string]string // more headers
	body    string            // sent as application/json unless headers say otherwise
	status  int
	code    toolhost.Code // the error's code; "" when the request succeeds
	message string        // a part of the error's message
}

// send sends a's request to srv without the test transport's token, and
// checks the answer.
func (a attack) send(t *testing.T, srv *httptest.Server) {
	t.Helper()
	var body io.Reader
	if a.body != "" {
		body = strings.NewReader(a.body)
	}
	req, _ := http.NewRequest(a.method, srv.URL+a.path, body)
	if a.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	if a.host != "" {
		req.Host = a.host
	}
	for k, v := range a.headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Transport: plainTransport}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e apiError
	_ = json.Unmarshal(raw, &e)
	if resp.StatusCode != a.status || e.Error.Code != a.code || !strings.Contains(e.Error.Message, a.message) {
		t.Errorf("%s: %s %s = %d %s, want %d %q with %q", a.name, a.method, a.path, resp.StatusCode, raw, a.status, a.code, a.message)
	}
	if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("%s: a 401 without WWW-Authenticate", a.name)
	}
}

// guarded serves a host with the console group, the role "developer"
// (console) and the root role, with auth as given (the admin token is
// testToken unless it sets one); it also answers the developer's token and
// a function that lists the roles as JSON, to check nothing changed.
func guarded(t *testing.T, auth config.Auth) (*httptest.Server, *host.Host, string, func() string) {
	t.Helper()
	srv, h := serve(t, &config.Config{Listen: "127.0.0.1:0", Auth: auth}, group("console", "console_print"))
	ctx := context.Background()
	if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: "developer", ToolGroups: []string{"console"}}); err != nil {
		t.Fatal(err)
	}
	dev, _, err := h.Store().CreateToken(ctx, "cursor", "developer", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	roles := func() string {
		raw, _ := json.Marshal(h.Roles().List())
		return string(raw)
	}
	return srv, h, dev, roles
}

// TestRebindingAndCrossOrigin: a web page the operator opens, on a name that
// resolves to 127.0.0.1 (DNS rebinding) or on another origin, cannot change
// anything, with or without a token; nor can a body a browser sends without
// a preflight.
func TestRebindingAndCrossOrigin(t *testing.T) {
	srv, _, _, roles := guarded(t, config.Auth{AllowedHosts: []string{"toolhost.internal"}})
	before := roles()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	rebind := "rebind.attacker.example:" + port
	call := `{"role":"developer","tool":"console_print","arguments":{"text":"pwned"}}`
	text := map[string]string{"Content-Type": "text/plain"}
	for _, a := range []attack{
		{name: "rebinding page, no token", method: "POST", path: "/api/call", host: rebind,
			headers: map[string]string{"Origin": "http://" + rebind, "Content-Type": "text/plain"}, body: call,
			status: 403, code: toolhost.CodePolicy, message: `Host "rebind.attacker.example:` + port + `" is not a loopback name`},
		{name: "rebinding page, with the admin token", method: "POST", path: "/api/call", host: rebind, token: testToken,
			headers: map[string]string{"Origin": "http://" + rebind, "Content-Type": "text/plain"}, body: call,
			status: 403, code: toolhost.CodePolicy, message: "DNS rebinding"},
		{name: "rebinding name reading roles", method: "GET", path: "/api/roles", host: rebind, token: testToken,
			status: 403, code: toolhost.CodePolicy},
		{name: "rebinding name on the health check", method: "GET", path: "/healthz", host: rebind,
			status: 403, code: toolhost.CodePolicy},
		{name: "rebinding name on MCP", method: "POST", path: "/mcp/root", host: rebind, token: testToken, body: `{}`,
			status: 403, code: toolhost.CodePolicy},
		{name: "an empty Host", method: "GET", path: "/healthz", host: " ", status: 403, code: toolhost.CodePolicy},
		{name: "text/plain body (a simple request)", method: "POST", path: "/api/call", token: testToken, headers: text, body: call,
			status: 415, code: toolhost.CodeValidation, message: `Content-Type "text/plain"`},
		{name: "form body", method: "POST", path: "/api/roles", token: testToken,
			headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: `{"name":"x"}`,
			status: 415, code: toolhost.CodeValidation},
		{name: "no Content-Type", method: "PUT", path: "/api/roles/developer", token: testToken,
			headers: map[string]string{"Content-Type": ""}, body: `{"toolGroups":[]}`, status: 415, code: toolhost.CodeValidation},
		{name: "text/plain to MCP", method: "POST", path: "/mcp/developer", token: testToken, headers: text, body: `{}`,
			status: 415, code: toolhost.CodeValidation},
		{name: "another origin", method: "POST", path: "/api/roles", token: testToken,
			headers: map[string]string{"Origin": "http://evil.example"}, body: `{"name":"x"}`,
			status: 403, code: toolhost.CodePolicy, message: "from another origin (http://evil.example)"},
		{name: "another loopback origin", method: "POST", path: "/api/roles", token: testToken,
			headers: map[string]string{"Origin": "http://127.0.0.1:1"}, body: `{"name":"x"}`, status: 403, code: toolhost.CodePolicy},
		{name: "an opaque origin", method: "DELETE", path: "/api/roles/developer", token: testToken,
			headers: map[string]string{"Origin": "null"}, status: 403, code: toolhost.CodePolicy},
		{name: "a cross-site fetch", method: "POST", path: "/api/roles", token: testToken,
			headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, body: `{"name":"x"}`, status: 403, code: toolhost.CodePolicy},
		{name: "a same-site fetch (another port)", method: "POST", path: "/api/roles", token: testToken,
			headers: map[string]string{"Sec-Fetch-Site": "same-site"}, body: `{"name":"x"}`, status: 403, code: toolhost.CodePolicy},
	} {
		a.send(t, srv)
	}
	if after := roles(); after != before {
		t.Fatalf("the roles changed:\nbefore %s\nafter  %s", before, after)
	}
	for _, a := range []attack{
		{name: "localhost", method: "GET", path: "/healthz", host: "localhost:" + port, status: 200},
		{name: "[::1]", method: "GET", path: "/healthz", host: "[::1]:" + port, status: 200},
		{name: "127.0.0.2", method: "GET", path: "/api/groups", host: "127.0.0.2", token: testToken, status: 200},
		{name: "an allowed host", method: "GET", path: "/api/groups", host: "TOOLHOST.internal.:" + port, token: testToken, status: 200},
		{name: "an allowed host's page", method: "POST", path: "/api/roles", host: "toolhost.internal", token: testToken,
			headers: map[string]string{"Origin": "https://toolhost.internal", "Sec-Fetch-Site": "same-origin"}, body: `{"name":"viaproxy"}`, status: 201},
		{name: "the page itself", method: "POST", path: "/api/roles", token: testToken,
			headers: map[string]string{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}, body: `{"name":"x"}`, status: 201},
		{name: "JSON with a charset", method: "PUT", path: "/api/roles/x", token: testToken,
			headers: map[string]string{"Content-Type": "application/json; charset=utf-8"}, body: `{"prompt":"p"}`, status: 200},
		{name: "a read from another origin (it cannot read the answer)", method: "GET", path: "/api/groups", token: testToken,
			headers: map[string]string{"Origin": "http://evil.example"}, status: 200},
	} {
		a.send(t, srv)
	}
}

// TestCredentials: every route but the health check and the page's files
// needs a credential; a role token opens its role's routes and nothing else.
func TestCredentials(t *testing.T) {
	srv, h, dev, roles := guarded(t, config.Auth{})
	ctx := context.Background()
	before := roles()
	callAs := func(caller string) string {
		return `{` + caller + `"tool":"console_print","arguments":{"text":"hi"}}`
	}
	devTools := `token "cursor" is for role developer`
	for _, a := range []attack{
		{name: "roles without a token", method: "GET", path: "/api/roles", status: 401, code: toolhost.CodePolicy, message: "a bearer token is required"},
		{name: "root's MCP without a token", method: "POST", path: "/mcp/root", body: `{}`, status: 401, code: toolhost.CodePolicy},
		{name: "events without a token", method: "GET", path: "/api/events/stream", status: 401, code: toolhost.CodePolicy},
		{name: "a wrong token", method: "GET", path: "/api/groups", token: "thk_nope", status: 401, code: toolhost.CodePolicy, message: "not valid"},
		{name: "a token in another scheme", method: "GET", path: "/api/groups", headers: map[string]string{"Authorization": "Basic " + testToken}, status: 401, code: toolhost.CodePolicy},
		{name: "the scheme without its space", method: "GET", path: "/api/groups", headers: map[string]string{"Authorization": "Bearer" + testToken}, status: 401, code: toolhost.CodePolicy},
		{name: "the scheme in lower case", method: "GET", path: "/api/groups", headers: map[string]string{"Authorization": "bearer " + testToken}, status: 200},
		{name: "the health check", method: "GET", path: "/healthz", status: 200},
		{name: "the page", method: "GET", path: "/", status: 200},
		{name: "the page's script", method: "GET", path: "/ui/app.js", status: 200},

		{name: "developer: root's MCP", method: "POST", path: "/mcp/root", token: dev, body: `{}`, status: 403, code: toolhost.CodePolicy, message: devTools},
		{name: "developer: an unknown role's MCP", method: "POST", path: "/mcp/nosuch", token: dev, body: `{}`, status: 403, code: toolhost.CodePolicy},
		{name: "developer: the role list", method: "GET", path: "/api/roles", token: dev, status: 403, code: toolhost.CodePolicy, message: devTools},
		{name: "developer: another role", method: "GET", path: "/api/roles/root", token: dev, status: 403, code: toolhost.CodePolicy},
		{name: "developer: widen its own role", method: "PUT", path: "/api/roles/developer", token: dev, body: `{"toolGroups":[]}`, status: 403, code: toolhost.CodePolicy},
		{name: "developer: raise its own script bounds", method: "PUT", path: "/api/roles/developer", token: dev, body: `{"code":{"calls":1000000}}`, status: 403, code: toolhost.CodePolicy},
		{name: "no token: script bounds", method: "PUT", path: "/api/roles/developer", body: `{"code":{"calls":1000000}}`, status: 401, code: toolhost.CodePolicy},
		{name: "developer: create a role", method: "POST", path: "/api/roles", token: dev, body: `{"name":"mine"}`, status: 403, code: toolhost.CodePolicy},
		{name: "developer: delete its role", method: "DELETE", path: "/api/roles/developer", token: dev, status: 403, code: toolhost.CodePolicy},
		{name: "developer: a call as the operator", method: "POST", path: "/api/call", token: dev, body: callAs(""), status: 403, code: toolhost.CodePolicy, message: "every group"},
		{name: "developer: a call as root", method: "POST", path: "/api/call", token: dev, body: callAs(`"role":"root",`), status: 403, code: toolhost.CodePolicy},
		{name: "developer: a call as the root agent", method: "POST", path: "/api/call", token: dev, body: callAs(`"agentId":"root",`), status: 403, code: toolhost.CodePolicy},
		{name: "developer: the root agent, naming its own role", method: "POST", path: "/api/call", token: dev, body: callAs(`"role":"developer","agentId":"root",`), status: 403, code: toolhost.CodePolicy},
		{name: "developer: approvals", method: "GET", path: "/api/approvals", token: dev, status: 403, code: toolhost.CodePolicy},
		{name: "developer: decide an approval", method: "POST", path: "/api/approvals/x", token: dev, body: `{"decision":"approve"}`, status: 403, code: toolhost.CodePolicy},
		{name: "developer: events", method: "GET", path: "/api/events", token: dev, status: 403, code: toolhost.CodePolicy},
		{name: "developer: the overview", method: "GET", path: "/api/overview", token: dev, status: 403, code: toolhost.CodePolicy},
		{name: "developer: agents", method: "POST", path: "/api/agents", token: dev, body: `{"role":"developer"}`, status: 403, code: toolhost.CodePolicy},
		{name: "developer: tokens", method: "GET", path: "/api/auth/tokens", token: dev, status: 403, code: toolhost.CodePolicy},
		{name: "developer: a token for root", method: "POST", path: "/api/auth/tokens", token: dev, body: `{"role":"root"}`, status: 403, code: toolhost.CodePolicy},

		{name: "developer: its role", method: "GET", path: "/api/roles/developer", token: dev, status: 200},
		{name: "developer: its tools", method: "GET", path: "/api/roles/developer/tools", token: dev, status: 200},
		{name: "developer: a call as itself", method: "POST", path: "/api/call", token: dev, body: callAs(`"role":"developer",`), status: 200},
		{name: "admin: anything", method: "GET", path: "/api/events", token: testToken, status: 200},
	} {
		a.send(t, srv)
	}
	if after := roles(); after != before {
		t.Fatalf("the roles changed:\nbefore %s\nafter  %s", before, after)
	}

	// The token works as an MCP client's credential, on its role only.
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/developer", HTTPClient: bearerClient(dev)})
	if got := mcptest.ToolNames(t, cs); !slices.Equal(got, []string{"console_print"}) {
		t.Fatalf("developer's tools = %v", got)
	}
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/root", HTTPClient: bearerClient(dev)}, nil); err == nil {
		t.Fatal("the developer's token connected to /mcp/root")
	}
	root, _, err := h.Store().CreateToken(ctx, "", "root", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/root", HTTPClient: bearerClient(root)})
	if got := mcptest.ToolNames(t, rs); !slices.Contains(got, "create_role") && len(got) != 0 {
		t.Fatalf("root's tools = %v", got)
	}

	// Revoked: refused at once, on the next request and in the open session.
	if err := h.Store().RevokeToken(ctx, "cursor"); err != nil {
		t.Fatal(err)
	}
	attack{name: "revoked", method: "GET", path: "/api/roles/developer", token: dev, status: 401, code: toolhost.CodePolicy, message: "revoked"}.send(t, srv)
	if _, err := cs.ListTools(ctx, nil); err == nil {
		t.Error("the revoked token's open MCP session still answers")
	}

	// Expired, and a token whose role is gone.
	old, _, err := h.Store().CreateToken(ctx, "old", "developer", time.Now().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	attack{name: "expired", method: "GET", path: "/api/roles/developer", token: old, status: 401, code: toolhost.CodePolicy, message: `token "old" expired on`}.send(t, srv)
	tmp, _, err := h.Store().CreateToken(ctx, "", "developer", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Roles().Delete(ctx, "developer"); err != nil {
		t.Fatal(err)
	}
	attack{name: "its role deleted", method: "GET", path: "/api/roles/developer", token: tmp, status: 401, code: toolhost.CodePolicy}.send(t, srv)
}

// bearerClient sends token on every request.
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return plainTransport.RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestRoleTokensCannotAdminister: only the admin token manages roles and
// tokens. A role token, the root role's included (its org_management tools
// create roles through MCP, never tokens), cannot create, change or delete a
// role over the API, nor make, list or revoke a token, its own role's
// included: a leaked token cannot outlive its revocation through another.
func TestRoleTokensCannotAdminister(t *testing.T) {
	srv, h, dev, roles := guarded(t, config.Auth{})
	ctx := context.Background()
	root, _, err := h.Store().CreateToken(ctx, "root-agent", "root", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	tokens := func() string {
		list, err := h.Store().Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range list {
			list[i].LastUsedAt = time.Time{} // the attacks themselves use them
		}
		raw, _ := json.Marshal(list)
		return string(raw)
	}
	beforeRoles, beforeTokens := roles(), tokens()
	for who, token := range map[string]string{"root": root, "developer": dev} {
		for _, a := range []attack{
			{name: "create a role of every group", method: "POST", path: "/api/roles", body: `{"name":"mine"}`},
			{name: "widen root", method: "PUT", path: "/api/roles/root", body: `{"toolGroups":null}`},
			{name: "widen developer", method: "PUT", path: "/api/roles/developer", body: `{"toolGroups":null}`},
			{name: "delete developer", method: "DELETE", path: "/api/roles/developer"},
			{name: "a token for its own role", method: "POST", path: "/api/auth/tokens", body: `{"role":"` + who + `"}`},
			{name: "a token for root", method: "POST", path: "/api/auth/tokens", body: `{"role":"root","name":"mine"}`},
			{name: "a metrics token", method: "POST", path: "/api/auth/tokens", body: `{"scope":"metrics"}`},
			{name: "the token list", method: "GET", path: "/api/auth/tokens"},
			{name: "revoke another's token", method: "DELETE", path: "/api/auth/tokens/cursor"},
			{name: "revoke root's token", method: "DELETE", path: "/api/auth/tokens/root-agent"},
		} {
			a.name, a.token, a.status, a.code = who+": "+a.name, token, http.StatusForbidden, toolhost.CodePolicy
			a.message = `token "` + map[string]string{"root": "root-agent", "developer": "cursor"}[who] + `" is for role ` + who
			a.send(t, srv)
		}
	}
	if after := roles(); after != beforeRoles {
		t.Errorf("the roles changed:\nbefore %s\nafter  %s", beforeRoles, after)
	}
	if after := tokens(); after != beforeTokens {
		t.Errorf("the tokens changed:\nbefore %s\nafter  %s", beforeTokens, after)
	}
}

// TestTokensAPI: the admin makes, lists and revokes role tokens over HTTP;
// the secret is shown once and never listed.
func TestTokensAPI(t *testing.T) {
	srv, h, _, _ := guarded(t, config.Auth{})
	var made NewToken
	if code := do(t, "POST", srv.URL+"/api/auth/tokens", map[string]string{"role": "developer", "name": "ci", "expires": "1h"}, &made); code != 201 ||
		!strings.HasPrefix(made.Secret, "thk_") || made.Role != "developer" || made.ExpiresAt.IsZero() {
		t.Fatalf("create = %d %+v", code, made)
	}
	attack{name: "the new token", method: "GET", path: "/api/roles/developer/tools", token: made.Secret, status: 200}.send(t, srv)
	resp, err := http.Get(srv.URL + "/api/auth/tokens")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers = %v", resp.Header)
	}
	if !strings.Contains(string(raw), `"name": "ci"`) || strings.Contains(string(raw), made.Secret) || strings.Contains(string(raw), `"token"`) {
		t.Fatalf("list = %s", raw)
	}
	var e apiError
	for _, c := range []struct {
		method, path string
		body         any
		status       int
	}{
		{"POST", "/api/auth/tokens", map[string]string{"role": "developer", "name": "ci"}, 409},
		{"POST", "/api/auth/tokens", map[string]string{"role": "nosuch"}, 400},
		{"POST", "/api/auth/tokens", map[string]string{"name": "x"}, 400},
		{"POST", "/api/auth/tokens", map[string]string{"role": "developer", "expires": "-1h"}, 400},
		{"POST", "/api/auth/tokens", map[string]string{"role": "developer", "name": "a b"}, 400},
		{"DELETE", "/api/auth/tokens/nosuch", nil, 404},
	} {
		if code := do(t, c.method, srv.URL+c.path, c.body, &e); code != c.status || e.Error.Code != toolhost.CodeValidation {
			t.Errorf("%s %s %v = %d %+v, want %d", c.method, c.path, c.body, code, e, c.status)
		}
	}
	if code := do(t, "DELETE", srv.URL+"/api/auth/tokens/ci", nil, nil); code != 204 {
		t.Fatalf("revoke = %d", code)
	}
	attack{name: "revoked through the API", method: "GET", path: "/api/roles/developer/tools", token: made.Secret, status: 401, code: toolhost.CodePolicy}.send(t, srv)

	// Both are audited, with who did it and never the secret.
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, err := h.Events().List(context.Background(), store.EventFilter{Type: "token."})
	if err != nil || len(events) != 2 || events[0].Type != store.EventTokenCreated || events[0].Role != "developer" ||
		events[0].Payload["name"] != "ci" || events[0].Payload["by"] != "api" || events[1].Type != store.EventTokenRevoked {
		t.Fatalf("token events = %+v, %v", events, err)
	}
	if raw, _ := json.Marshal(events); strings.Contains(string(raw), made.Secret) {
		t.Fatal("an event holds the secret")
	}
}

// TestStrictBodies: a field the endpoint does not know is an error naming it,
// not a call run as the operator with every group.
func TestStrictBodies(t *testing.T) {
	srv, _, _, _ := guarded(t, config.Auth{})
	for _, a := range []attack{
		{name: "a slip for agentId", method: "POST", path: "/api/call", token: testToken,
			body: `{"agent":"x","tool":"console_print","arguments":{}}`, status: 400, code: toolhost.CodeValidation, message: `unknown field "agent"`},
		{name: "a wrong type", method: "POST", path: "/api/call", token: testToken,
			body: `{"tool":["console_print"]}`, status: 400, code: toolhost.CodeValidation, message: `field "tool": a JSON array cannot be a string`},
		{name: "two values", method: "POST", path: "/api/roles", token: testToken,
			body: `{"name":"a"}{"name":"b"}`, status: 400, code: toolhost.CodeValidation, message: "after the JSON value"},
		{name: "an unknown role field", method: "POST", path: "/api/roles", token: testToken,
			body: `{"name":"a","groups":["console"]}`, status: 400, code: toolhost.CodeValidation, message: `unknown field "groups"`},
		{name: "an unknown decision field", method: "POST", path: "/api/approvals/x", token: testToken,
			body: `{"decision":"approve","args":{}}`, status: 400, code: toolhost.CodeValidation, message: `unknown field "args"`},
	} {
		a.send(t, srv)
	}
}

// TestAuthDisabled: with auth { disabled = true } every route is open, but
// Host and Origin are still checked.
func TestAuthDisabled(t *testing.T) {
	srv, _, _, _ := guarded(t, config.Auth{Disabled: true})
	attack{name: "no token", method: "GET", path: "/api/roles", status: 200}.send(t, srv)
	attack{name: "rebinding", method: "GET", path: "/api/roles", host: "rebind.attacker.example", status: 403, code: toolhost.CodePolicy}.send(t, srv)
}

// TestAdminTokenFile: the generated admin token is private, kept across
// starts, and replaced by a configured one.
func TestAdminTokenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := AdminToken(&config.Config{}, dir)
	if err != nil || !strings.HasPrefix(first, "thk_") {
		t.Fatalf("AdminToken = %q, %v", first, err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, AdminTokenFile): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %v", path, fi.Mode(), err, want)
		}
	}
	if again, err := AdminToken(&config.Config{}, dir); err != nil || again != first {
		t.Errorf("the second start's token = %q, %v; want the first's", again, err)
	}
	configured := strings.Repeat("c", config.MinTokenLength)
	if got, _ := AdminToken(&config.Config{Auth: config.Auth{Token: configured}}, dir); got != configured {
		t.Errorf("configured token: got %q", got)
	}
	if got, _ := AdminToken(&config.Config{Auth: config.Auth{Disabled: true}}, t.TempDir()); got != "" {
		t.Errorf("disabled: got %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := AdminToken(&config.Config{}, dir); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("a short token file: %v", err)
	}
}

// BenchmarkGuard measures what a credential costs a request, in process:
// GET /api/roles/developer with the admin token (a constant-time compare) and
// with a role token (its hash looked up in the token cache, or in SQLite),
// against the open health check; each alone and with 16 callers per core.
func BenchmarkGuard(b *testing.B) {
	h := startHost(b, withTestToken(&config.Config{}))
	ctx := context.Background()
	if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: "developer"}); err != nil {
		b.Fatal(err)
	}
	dev, _, err := h.Store().CreateToken(ctx, "cursor", "developer", time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(h, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, path, token string }{
		{"healthz_open", "/healthz", ""},
		{"role_admin_token", "/api/roles/developer", testToken},
		{"role_role_token", "/api/roles/developer", dev},
	} {
		serve := func(b *testing.B, next func() bool) {
			req := httptest.NewRequest("GET", "http://127.0.0.1:8741"+bc.path, nil)
			if bc.token != "" {
				req.Header.Set("Authorization", "Bearer "+bc.token)
			}
			for next() {
				w := httptest.NewRecorder()
				if s.ServeHTTP(w, req); w.Code != 200 {
					b.Errorf("%d %s", w.Code, w.Body)
					return
				}
			}
		}
		b.Run(bc.name, func(b *testing.B) { serve(b, b.Loop) })
		b.Run(bc.name+"_parallel", func(b *testing.B) {
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) { serve(b, pb.Next) })
		})
	}
}
