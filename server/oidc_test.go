package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// oidcSecret is every test client's secret at the provider.
const oidcSecret = "client-secret-0123456789abcdef"

// oidcClients are the provider's client-credentials clients, by the roles
// their tokens' toolhost_roles claim names: reader-bot the role reader,
// admin-bot the admin role, ghost-bot a role that does not exist.
var oidcClients = []map[string]any{
	{"id": "reader-bot", "secret": oidcSecret, "roles": []string{"reader"}, "scope": "toolhost"},
	{"id": "admin-bot", "secret": oidcSecret, "roles": []string{"toolhost-admin"}, "scope": "toolhost"},
	{"id": "ghost-bot", "secret": oidcSecret, "roles": []string{"nobody"}, "scope": "toolhost"},
}

// oidcProvider is npm's oidc-provider, a certified OpenID provider, run on
// loopback by testdata/oidc/provider.mjs until the test ends.
type oidcProvider struct {
	issuer string
	in     io.WriteCloser
	lines  <-chan string
	key    *jose.JSONWebKey // the private key it signs with now
	keys   int              // keys made so far, for their kids
}

// newSigningKey returns a new private ES256 key with the kid.
func newSigningKey(t *testing.T, kid string) *jose.JSONWebKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: "ES256", Use: "sig"}
}

// startProvider starts the provider on 127.0.0.1:port (0: any port).
func startProvider(t *testing.T, port int) *oidcProvider {
	t.Helper()
	node := mcptest.NPMNode(t)
	lib := filepath.Join(mcptest.NPMPackage(t, "oidc-provider"), "lib", "index.js")
	cmd := exec.Command(node, filepath.Join("testdata", "oidc", "provider.mjs"))
	cmd.Env = append(os.Environ(), "OIDC_PROVIDER="+lib)
	cmd.Stderr = os.Stderr
	in, lines := mcptest.StartLines(t, "the provider", cmd)
	p := &oidcProvider{in: in, lines: lines}
	p.key = p.newKey(t)
	p.send(t, map[string]any{"port": port, "clients": oidcClients, "jwks": p.jwks(t)})
	line := p.await(t)
	var ok bool
	if p.issuer, ok = strings.CutPrefix(line, "issuer "); !ok {
		t.Fatalf("the provider said %q, not its issuer", line)
	}
	return p
}

func (p *oidcProvider) newKey(t *testing.T) *jose.JSONWebKey {
	p.keys++
	return newSigningKey(t, fmt.Sprintf("k%d", p.keys))
}

// jwks is the provider's private key set.
func (p *oidcProvider) jwks(t *testing.T) json.RawMessage {
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{*p.key}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (p *oidcProvider) send(t *testing.T, msg any) {
	t.Helper()
	b, _ := json.Marshal(msg)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// await returns the provider's next answer, skipping the notices
// oidc-provider prints.
func (p *oidcProvider) await(t *testing.T) string {
	t.Helper()
	deadline := time.After(proctest.Patience)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatal("the provider exited (its stderr is the test's)")
			}
			if !strings.HasPrefix(line, "oidc-provider ") {
				return line
			}
		case <-deadline:
			t.Fatal("the provider did not answer")
		}
	}
}

// rotate replaces the provider's signing key by a new one: its key set
// publishes the new key alone.
func (p *oidcProvider) rotate(t *testing.T) {
	t.Helper()
	p.key = p.newKey(t)
	p.send(t, map[string]any{"jwks": p.jwks(t)})
	if line := p.await(t); line != "rotated" {
		t.Fatalf("the provider said %q", line)
	}
}

// token is an access token of the client for the resource, from the
// provider's token endpoint (client credentials).
func (p *oidcProvider) token(t *testing.T, client, resource string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {"toolhost"}}
	req, _ := http.NewRequest(http.MethodPost, p.issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, oidcSecret)
	resp, err := plainTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 || body.AccessToken == "" {
		t.Fatalf("token of %s: %d %v", client, resp.StatusCode, err)
	}
	return body.AccessToken
}

// fetches is how many times the provider's key set was fetched.
func (p *oidcProvider) fetches(t *testing.T) int {
	t.Helper()
	var n struct{ Count int }
	resp := plainRequest(t, http.MethodGet, p.issuer+"/test/jwks-fetches")
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		t.Fatal(err)
	}
	return n.Count
}

// plainRequest sends a request without a credential.
func plainRequest(t *testing.T, method, url string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := plainTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// mint signs claims with key as a JWT access token (typ at+jwt).
func mint(t *testing.T, key *jose.JSONWebKey, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(key.Algorithm), Key: key}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// accessClaims are the claims of a good access token of reader-bot for
// aud, at the provider's issuer, valid for ten minutes from now.
func accessClaims(iss, aud string) map[string]any {
	now := time.Now().Unix()
	return map[string]any{"iss": iss, "aud": aud, "sub": "reader-bot", "client_id": "reader-bot", "scope": "toolhost",
		"iat": now, "exp": now + 600, "toolhost_roles": []string{"reader"}}
}

// oidcServer is a host behind its HTTP server with auth { oidc } for a
// provider, whose audience is the server's own URL.
type oidcServer struct {
	url string
	s   *Server
	h   *host.Host
	log *proctest.Buffer
}

// serveOIDC serves a host with the roles reader (group notes: read_note)
// and writer (group ink: write_note), with auth { oidc } for issuer:
// roles_claim toolhost_roles, admin_role toolhost-admin, and what tune
// changes of that.
func serveOIDC(t *testing.T, issuer string, tune ...func(*config.OIDC)) *oidcServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &oidcServer{url: "http://" + ln.Addr().String(), log: &proctest.Buffer{}}
	cfg := withTestToken(&config.Config{
		Roles: []config.Role{{Name: "reader", ToolGroups: []string{"notes"}}, {Name: "writer", ToolGroups: []string{"ink"}}},
		Auth: config.Auth{OIDC: &config.OIDC{Issuer: issuer, Audience: o.url, RolesClaim: "toolhost_roles", ScopesClaim: "scope",
			AdminRole: "toolhost-admin", ClockSkew: config.DefaultOIDCClockSkew, Algorithms: config.OIDCAlgorithms()}},
	})
	for _, f := range tune {
		f(cfg.Auth.OIDC)
	}
	if o.h, err = host.New(cfg, &host.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: o.log, Level: hclog.Debug})}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.h.Close() })
	ctx := context.Background()
	if err := o.h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	note := func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return sdk.Text("a note"), nil }
	for _, g := range []*sdk.Group{
		{ID: "notes", Description: "Notes.", Tools: []sdk.Tool{sdk.NewTool("read_note", "Read a note.", note)}},
		{ID: "ink", Description: "Ink.", Tools: []sdk.Tool{sdk.NewTool("write_note", "Write a note.", note)}},
	} {
		if err := o.h.Modules().Register(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if o.s, err = New(o.h, nil); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(o.s)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(o.s.Close)
	return o
}

// do sends a request with the bearer token ("" for none) and returns the
// response's status, WWW-Authenticate and body.
func (o *oidcServer) do(t *testing.T, method, path, token, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, o.url+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := plainTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// ready waits until the server checks the provider's tokens.
func (o *oidcServer) ready(t *testing.T) {
	t.Helper()
	proctest.Eventually(t, "the OpenID provider's keys are fetched", func() bool { return o.s.auth.oidc.unavailable() == "" })
}

// TestOIDCTokensOpenTheirRoles: the provider's access tokens open exactly
// the roles their claim names, over the API and MCP, as a role token does;
// the admin role's open everything; a role that does not exist opens
// nothing; the admin and role tokens keep working beside them; the events
// of a token's calls name its subject.
func TestOIDCTokensOpenTheirRoles(t *testing.T) {
	p := startProvider(t, 0)
	o := serveOIDC(t, p.issuer)
	o.ready(t)
	reader, admin, ghost := p.token(t, "reader-bot", o.url), p.token(t, "admin-bot", o.url), p.token(t, "ghost-bot", o.url)
	roleToken, _, err := o.h.Tokens().Create(context.Background(), "writer-ci", "writer", time.Time{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	call := func(role, tool string) string {
		return fmt.Sprintf(`{"role": %q, "tool": %q, "callId": "c-%s-%s"}`, role, tool, role, tool)
	}
	for _, c := range []struct {
		who, token, method, path, body string
		want                           int
	}{
		{"reader", reader, "GET", "/api/roles/reader/tools", "", 200},
		{"reader", reader, "GET", "/api/roles/reader", "", 200},
		{"reader", reader, "POST", "/api/call", call("reader", "read_note"), 200},
		{"reader", reader, "GET", "/api/roles/writer/tools", "", 403},
		{"reader", reader, "POST", "/api/call", call("writer", "write_note"), 403},
		{"reader", reader, "GET", "/api/groups", "", 403},
		{"reader", reader, "GET", "/api/events", "", 403},
		{"reader", reader, "POST", "/mcp/writer", `{}`, 403},
		{"admin", admin, "GET", "/api/groups", "", 200},
		{"admin", admin, "GET", "/api/roles/writer/tools", "", 200},
		{"ghost", ghost, "GET", "/api/roles/reader/tools", "", 403},
		{"ghost", ghost, "GET", "/api/groups", "", 403},
		{"role token", roleToken, "GET", "/api/roles/writer/tools", "", 200},
		{"role token", roleToken, "GET", "/api/roles/reader/tools", "", 403},
		{"admin token", testToken, "GET", "/api/groups", "", 200},
	} {
		if got, _, body := o.do(t, c.method, c.path, c.token, c.body); got != c.want {
			t.Errorf("%s: %s %s = %d, want %d: %s", c.who, c.method, c.path, got, c.want, body)
		}
	}

	// Over MCP, with the go-sdk's client: reader's tools alone.
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: o.url + "/mcp/reader", HTTPClient: bearerClient(reader)})
	if got := mcptest.ToolNames(t, cs); strings.Join(got, ",") != "read_note" {
		t.Errorf("/mcp/reader lists %v", got)
	}
	if text, isErr := mcptest.CallText(t, cs, "read_note", map[string]any{}); isErr {
		t.Errorf("read_note over MCP: %s", text)
	}

	// Every event of the token's calls names its subject; the role token's
	// calls name none.
	if err := o.h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, err := o.h.Store().Events(context.Background(), store.EventFilter{Type: "tool_call."})
	if err != nil {
		t.Fatal(err)
	}
	var overHTTP, overMCP int
	for _, e := range events {
		if e.Payload["principal"] != "reader-bot" {
			t.Errorf("event %s of %s (%s) names principal %v, want reader-bot", e.Type, e.Tool, e.Payload["channel"], e.Payload["principal"])
		}
		switch e.Type {
		case store.EventCallStarted:
			if e.Payload["channel"] == "http" {
				overHTTP++
			} else {
				overMCP++
			}
		}
	}
	if overHTTP != 1 || overMCP != 1 {
		t.Errorf("%d calls over HTTP and %d over MCP in %d events, want 1 and 1", overHTTP, overMCP, len(events))
	}
}

// TestOIDCRoleByID: a roles claim names a role by its name or by its id,
// as docs/configuration.md says; an id that is no role's opens nothing.
func TestOIDCRoleByID(t *testing.T) {
	p := startProvider(t, 0)
	o := serveOIDC(t, p.issuer)
	o.ready(t)
	writer, err := o.h.Roles().Get("writer")
	if err != nil {
		t.Fatal(err)
	}
	token := func(roles ...string) string {
		c := accessClaims(p.issuer, o.url)
		c["toolhost_roles"] = roles
		return mint(t, p.key, c)
	}
	for _, c := range []struct {
		name, token, method, path, body string
		want                            int
	}{
		{"the writer's id", token(writer.ID), "GET", "/api/roles/writer/tools", "", 200},
		{"the writer's id, a call", token(writer.ID), "POST", "/api/call", `{"role": "writer", "tool": "write_note", "callId": "by-id"}`, 200},
		{"the writer's id, not the reader", token(writer.ID), "GET", "/api/roles/reader/tools", "", 403},
		{"an id that is no role's", token("role_0000000000000000"), "GET", "/api/roles/writer/tools", "", 403},
		{"a name beside an id", token("reader", writer.ID), "GET", "/api/roles/reader/tools", "", 200},
	} {
		if got, _, body := o.do(t, c.method, c.path, c.token, c.body); got != c.want {
			t.Errorf("%s: %s %s = %d, want %d: %s", c.name, c.method, c.path, got, c.want, body)
		}
	}
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: o.url + "/mcp/writer", HTTPClient: bearerClient(token(writer.ID))})
	if got := mcptest.ToolNames(t, cs); strings.Join(got, ",") != "write_note" {
		t.Errorf("/mcp/writer lists %v", got)
	}
}

// TestOIDCWellKnown: with auth { oidc } the resource metadata is served,
// and its URL is in every 401; any other /.well-known/ path is a plain 404
// (it was a 401 whose JSON body OAuth clients misread as an OAuth error),
// and so with no oidc block, where 401s are as they were.
func TestOIDCWellKnown(t *testing.T) {
	p := startProvider(t, 0)
	o := serveOIDC(t, p.issuer)
	plain, _ := serve(t, &config.Config{})
	meta := func(at string) protectedResource {
		code, _, body := o.do(t, "GET", at, "", "")
		var m protectedResource
		if err := json.Unmarshal([]byte(body), &m); code != 200 || err != nil {
			t.Fatalf("GET %s = %d %s", at, code, body)
		}
		return m
	}
	for _, at := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp/reader", "/.well-known/oauth-protected-resource/mcp/no-such-role"} {
		if m := meta(at); m.Resource != o.url || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != p.issuer {
			t.Errorf("%s: %+v", at, m)
		}
	}
	for _, c := range []struct {
		name, base, path, want string
	}{
		{"oidc: MCP endpoint", o.url, "/mcp/reader", `Bearer realm="toolhost", resource_metadata="` + o.url + `/.well-known/oauth-protected-resource/mcp/reader"`},
		{"oidc: API", o.url, "/api/groups", `Bearer realm="toolhost", resource_metadata="` + o.url + `/.well-known/oauth-protected-resource"`},
		{"no oidc", plain.URL, "/mcp/reader", `Bearer realm="toolhost"`},
	} {
		resp := plainRequest(t, "POST", c.base+c.path)
		resp.Body.Close()
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != c.want {
			t.Errorf("%s: %d %q, want 401 %q", c.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), c.want)
		}
	}
	for _, base := range []string{o.url, plain.URL} {
		for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration", "/.well-known/oauth-protected-resource/api/groups", "/.well-known/oauth-protected-resource/mcp/a/b"} {
			resp := plainRequest(t, "GET", base+path)
			resp.Body.Close()
			if resp.StatusCode != 404 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
				t.Errorf("GET %s%s = %d %s, want a plain 404", base, path, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		}
	}
	resp := plainRequest(t, "GET", plain.URL+"/.well-known/oauth-protected-resource")
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("no oidc: the resource metadata = %d, want 404", resp.StatusCode)
	}
}

// TestOIDCAttacks: tokens that must not open anything are refused with 401
// — another audience's, expired, a wrong signature, an unknown kid, no
// signature, a shared-secret signature, another issuer's, one without exp,
// one not yet valid, one of 1 MB — while the provider's good token opens
// its role; a flood of unknown kids fetches the provider's keys at most
// once; no refused token starts a call.
func TestOIDCAttacks(t *testing.T) {
	p := startProvider(t, 0)
	o := serveOIDC(t, p.issuer)
	o.ready(t)
	good := p.token(t, "reader-bot", o.url)
	tampered := good[:len(good)-4] + map[bool]string{true: "AAAA", false: "BBBB"}[!strings.HasSuffix(good, "AAAA")]
	with := func(change func(map[string]any)) string {
		c := accessClaims(p.issuer, o.url)
		change(c)
		return mint(t, p.key, c)
	}
	impostor := newSigningKey(t, p.key.KeyID) // the provider's kid, another key
	unknown := newSigningKey(t, "no-such-kid")
	pub, _ := json.Marshal(p.key.Public())
	hs, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: pub}, (&jose.SignerOptions{}).WithHeader("kid", p.key.KeyID))
	if err != nil {
		t.Fatal(err)
	}
	hmac, err := jwt.Signed(hs).Claims(accessClaims(p.issuer, o.url)).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(accessClaims(p.issuer, o.url))
	none := b64([]byte(`{"alg":"none","kid":"`+p.key.KeyID+`"}`)) + "." + b64(claims) + "."

	for _, c := range []struct {
		name  string
		token string
		want  int
	}{
		{"the provider's token for this server (control)", good, 200},
		{"the provider's token for another audience", p.token(t, "reader-bot", "https://other.example"), 401},
		{"expired", with(func(c map[string]any) { c["exp"] = time.Now().Add(-2 * time.Minute).Unix() }), 401},
		{"a wrong signature", tampered, 401},
		{"signed by another key under the provider's kid", mint(t, impostor, accessClaims(p.issuer, o.url)), 401},
		{"an unknown kid", mint(t, unknown, accessClaims(p.issuer, o.url)), 401},
		{"alg none", none, 401},
		{"HS256 with the provider's public key as the secret", hmac, 401},
		{"another issuer", with(func(c map[string]any) { c["iss"] = "http://127.0.0.1:1" }), 401},
		{"no exp", with(func(c map[string]any) { delete(c, "exp") }), 401},
		{"not valid before an hour from now", with(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), 401},
		{"1000 KB", strings.Repeat("a.", 500<<10), 401},
	} {
		code, challenge, body := o.do(t, "GET", "/api/roles/reader/tools", c.token, "")
		if code != c.want {
			t.Errorf("%s: %d, want %d: %s", c.name, code, c.want, body)
		}
		if code == 401 && !strings.Contains(challenge, `resource_metadata="`+o.url) {
			t.Errorf("%s: WWW-Authenticate %q names no resource metadata", c.name, challenge)
		}
	}

	// A token of 1 MB is refused before it is read, by the handler itself
	// (net/http's own header bound is about as large).
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/roles/reader/tools", nil)
	req.Host = "127.0.0.1"
	req.Header.Set("Authorization", "Bearer "+strings.Repeat("a", 1<<20))
	o.s.ServeHTTP(rec, req)
	if rec.Code != 401 || !strings.Contains(rec.Body.String(), "refused unread") {
		t.Errorf("a 1 MB token: %d %s", rec.Code, rec.Body)
	}

	// A flood of unknown kids fetches the keys at most once more.
	before := p.fetches(t)
	for i := range 20 {
		if code, _, _ := o.do(t, "GET", "/api/roles/reader/tools", mint(t, newSigningKey(t, fmt.Sprintf("flood-%d", i)), accessClaims(p.issuer, o.url)), ""); code != 401 {
			t.Fatalf("unknown kid %d: %d", i, code)
		}
	}
	if after := p.fetches(t); after > before+1 {
		t.Errorf("20 unknown kids fetched the provider's keys %d times, want at most 1", after-before)
	}

	// Unchanged: the good token still opens its role; no call ran.
	if code, _, body := o.do(t, "GET", "/api/roles/reader/tools", good, ""); code != 200 {
		t.Errorf("the good token after the attacks: %d %s", code, body)
	}
	if err := o.h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if events, err := o.h.Store().Events(context.Background(), store.EventFilter{Type: "tool_call."}); err != nil || len(events) != 0 {
		t.Errorf("tool_call events after the attacks: %v %v", events, err)
	}
}

// TestOIDCProviderDown: a provider that is down at start leaves the host
// serving (the admin token works) while its tokens are refused, /readyz
// and the log saying why; once it comes up, its tokens are accepted.
func TestOIDCProviderDown(t *testing.T) {
	port, err := proctest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	issuer := fmt.Sprintf("http://127.0.0.1:%d", port)
	o := serveOIDC(t, issuer)
	proctest.Eventually(t, "the log says the provider cannot be used", func() bool {
		return strings.Contains(o.log.String(), "the OpenID provider cannot be used")
	})
	var ready struct {
		Status   string
		Degraded map[string]string
	}
	if code := get(t, o.url+"/readyz", &ready); code != 200 || !strings.Contains(ready.Degraded["oidc"], issuer) {
		t.Errorf("readyz = %d %+v, want ready and degraded oidc naming %s", code, ready, issuer)
	}
	key := newSigningKey(t, "k1")
	code, _, body := o.do(t, "GET", "/api/roles/reader/tools", mint(t, key, accessClaims(issuer, o.url)), "")
	if code != 401 || !strings.Contains(body, "refused until it answers") {
		t.Errorf("a token while the provider is down: %d %s", code, body)
	}
	if code, _, body := o.do(t, "GET", "/api/groups", testToken, ""); code != 200 {
		t.Errorf("the admin token while the provider is down: %d %s", code, body)
	}

	p := startProvider(t, port)
	o.ready(t)
	if code, _, body := o.do(t, "GET", "/api/roles/reader/tools", p.token(t, "reader-bot", o.url), ""); code != 200 {
		t.Errorf("a token once the provider is up: %d %s", code, body)
	}
	var up map[string]any
	if code := get(t, o.url+"/readyz", &up); code != 200 || up["degraded"] != nil {
		t.Errorf("readyz once the provider is up = %d %+v", code, up)
	}
}

// TestOIDCKeyRotation: the provider's tokens keep working when it rotates
// its signing key: the first token under the new kid fetches the new key
// set; the old key's tokens are refused once it is gone.
func TestOIDCKeyRotation(t *testing.T) {
	p := startProvider(t, 0)
	o := serveOIDC(t, p.issuer)
	o.ready(t)
	o.s.auth.oidc.minRefresh = 0 // the test's rotation comes sooner than minRefresh
	old := p.token(t, "reader-bot", o.url)
	if code, _, body := o.do(t, "GET", "/api/roles/reader/tools", old, ""); code != 200 {
		t.Fatalf("before the rotation: %d %s", code, body)
	}
	p.rotate(t)
	if code, _, body := o.do(t, "GET", "/api/roles/reader/tools", p.token(t, "reader-bot", o.url), ""); code != 200 {
		t.Errorf("a token of the new key: %d %s", code, body)
	}
	if code, _, body := o.do(t, "GET", "/api/roles/reader/tools", old, ""); code != 401 {
		t.Errorf("the old key's token once the new key set is fetched: %d %s", code, body)
	}
}

// TestOIDCTypeScriptClient: the official TypeScript SDK's client
// (testdata/oidc/client.mjs), given only the MCP endpoint and its client
// credentials, discovers the resource metadata from the 401, gets a token
// from the provider for this server and lists the role's tools.
func TestOIDCTypeScriptClient(t *testing.T) {
	mcptest.NPMPackage(t, "@modelcontextprotocol/sdk")
	p := startProvider(t, 0)
	o := serveOIDC(t, p.issuer)
	o.ready(t)
	node := mcptest.NPMNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "oidc", "client.mjs"), o.url+"/mcp/reader", "reader-bot", oidcSecret)
	cmd.Env = append(os.Environ(), "TOOLHOST_NPM_DIR="+mcptest.NPMDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var got struct {
		Tools []string
		Error string
	}
	if jerr := json.Unmarshal(out, &got); err != nil || jerr != nil || got.Error != "" {
		t.Fatalf("the client: %v %s", err, out)
	}
	if strings.Join(got.Tools, ",") != "read_note" {
		t.Errorf("the client lists %v, want [read_note]", got.Tools)
	}
}

// TestOIDCScopes: with required_scopes, a valid token without them opens
// nothing (403 insufficient_scope, the challenge naming the scope), one
// with them opens its roles; admin_scope makes a token the admin's, a
// nested roles claim (realm_access.roles) is read.
func TestOIDCScopes(t *testing.T) {
	p := startProvider(t, 0)
	o := serveOIDC(t, p.issuer, func(c *config.OIDC) {
		c.RequiredScopes, c.AdminScope, c.RolesClaim = []string{"toolhost:tools"}, "toolhost:admin", "realm_access.roles"
	})
	o.ready(t)
	token := func(scope string, roles ...string) string {
		c := accessClaims(p.issuer, o.url)
		c["scope"], c["realm_access"] = scope, map[string]any{"roles": roles}
		return mint(t, p.key, c)
	}
	top := accessClaims(p.issuer, o.url)
	top["scope"], top["roles"] = "toolhost:tools", []string{"reader"}
	topLevel := mint(t, p.key, top)
	for _, c := range []struct {
		name, token, path string
		want              int
		challenge         string
	}{
		{"the provider's token, without the required scope", p.token(t, "reader-bot", o.url), "/api/roles/reader/tools", 403, `error="insufficient_scope", scope="toolhost:tools"`},
		{"with the required scope", token("toolhost toolhost:tools", "reader"), "/api/roles/reader/tools", 200, ""},
		{"with the required scope, another role", token("toolhost:tools", "reader"), "/api/roles/writer/tools", 403, ""},
		{"the admin scope without the required one", token("toolhost:admin"), "/api/groups", 403, `error="insufficient_scope"`},
		{"the admin scope", token("toolhost:tools toolhost:admin"), "/api/groups", 200, ""},
		{"the roles at the top level, not in realm_access", topLevel, "/api/roles/reader/tools", 403, ""},
	} {
		code, challenge, body := o.do(t, "GET", c.path, c.token, "")
		if code != c.want || !strings.Contains(challenge, c.challenge) {
			t.Errorf("%s: %d %q, want %d %q: %s", c.name, code, challenge, c.want, c.challenge, body)
		}
	}
}
