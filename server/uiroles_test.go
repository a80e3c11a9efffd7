package server

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/store"
)

// TestUIRoleLifecycle: in the page, the operator makes a role (refused
// first for a bad name, a taken one and a group gone, each time the field
// at fault marked), makes its token, which is shown once, copies it, and
// the token then opens that role and nothing else, over the API and MCP;
// a second token is revoked; deleting the role (asked first) ends both.
func TestUIRoleLifecycle(t *testing.T) {
	srv, h := uiHost(t, &config.Config{})
	ctx := context.Background()
	b := newBrowser(t, srv.URL)
	b.click("#new-role")
	b.ready("new-role")
	if !b.visible("#all-groups-notice") {
		t.Error("no group ticked, and no notice that the role would see every group")
	}
	b.click(`input.group[data-group="console"]`)
	b.click(`input.group[data-group="artifact"]`)
	b.wait("artifact's toggle", `(e => !e.hidden && e.getClientRects().length > 0)(document.querySelector('label.group-defer[data-group="artifact"]'))`)
	b.click(`input.defer[data-group="artifact"]`)
	b.do("the description", chromedp.SendKeys(chromedp.CSS("#role-description"), "Audits reports."))
	b.do("the prompt", chromedp.SendKeys(chromedp.CSS("#role-prompt"), "You audit reports."))

	// Refused: the page says why and marks the field; nothing is stored.
	before := len(h.Roles().List())
	refuse := func(name, field, want string) {
		t.Helper()
		b.do("the name", chromedp.SetValue(chromedp.CSS("#role-name"), name))
		b.click("#save")
		b.wait("the refusal", fmt.Sprintf(`(e => !e.hidden && e.textContent.includes(%q))(document.querySelector('#error'))`, want))
		if !eval[bool](b, fmt.Sprintf(`document.querySelector(%q).getAttribute('aria-invalid') === 'true' && document.querySelectorAll('[aria-invalid]').length === 1`, field)) {
			t.Errorf("%q refused, but %s is not the one field marked", name, field)
		}
		if n := len(h.Roles().List()); n != before {
			t.Fatalf("%q refused, yet %d roles, was %d", name, n, before)
		}
	}
	refuse("bad name", "#role-name", `name: role name "bad name"`)
	refuse("writer", "#role-name", `name: a role named "writer" already exists`)
	if err := h.Modules().Unload("artifact"); err != nil {
		t.Fatal(err)
	}
	refuse("auditor", "#group-list", "toolGroups: unknown tool group(s) artifact")
	if err := h.Modules().Register(ctx, group("artifact", "put_artifact", "get_artifact")); err != nil {
		t.Fatal(err)
	}

	// Made: the page opens the role's page.
	b.click("#save")
	b.ready("role")
	r, err := h.Roles().Get("auditor")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.ToolGroups, []string{"artifact", "console"}) || !slices.Equal(r.Deferred, []string{"artifact"}) || r.Description != "Audits reports." ||
		r.Prompt != "You audit reports." || r.CreatedBy != "api" || r.Source != store.SourceStore || r.ReadOnlyTools {
		t.Fatalf("stored role = %+v", r)
	}
	if got := eval[string](b, `location.hash`); got != "#/roles/auditor" {
		t.Errorf("after Create role the page is at %s", got)
	}
	if b.visible("#readonly-reason") || !b.visible("#delete-role") || !b.visible("#no-access-tokens") {
		t.Errorf("the new role's page = %q", b.text("#main"))
	}
	if got := b.text("#saved-notice"); !b.visible("#saved-notice") || !strings.HasPrefix(got, "Role auditor created at ") ||
		!strings.Contains(got, ": 2 tool groups (artifact, console), 1 loaded on demand, 0 rules, 0 limits.") {
		t.Errorf("the creation's confirmation = %q", got)
	}

	// A token, shown once, kept nowhere but on the page and as a hash.
	b.do("the token's name", chromedp.SendKeys(chromedp.CSS("#token-name"), "ci"))
	b.do("its lifetime", chromedp.SetValue(chromedp.CSS("#token-expires"), "720h"))
	b.click("#make-token")
	b.wait("the secret", `(e => !!e && e.value.startsWith('thk_'))(document.querySelector('#new-token-secret'))`)
	secret := eval[string](b, `document.querySelector('#new-token-secret').value`)
	b.wait("the token's row", `document.querySelector('tr[data-token="ci"]') !== null`)
	if row := b.text(`tr[data-token="ci"]`); strings.Contains(row, secret) || !strings.Contains(b.text("#new-token"), "/mcp/auditor") {
		t.Errorf("row %q, shown %q", row, b.text("#new-token"))
	}
	if eval[bool](b, fmt.Sprintf(`(s => JSON.stringify(sessionStorage).includes(s) || JSON.stringify(localStorage).includes(s) || location.href.includes(s) || document.documentElement.outerHTML.includes(s))(%q)`, secret)) {
		t.Error("the page keeps the secret beyond its input")
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	notInFiles(t, h.Store().Dir(), secret)
	tokens, err := h.Store().Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(tokens, func(t store.Token) bool { return t.Name == "ci" }); i < 0 || tokens[i].Role != "auditor" || tokens[i].ExpiresAt.IsZero() {
		t.Fatalf("stored tokens = %+v", tokens)
	}

	// Copy puts it on the clipboard.
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: srv.URL}); err != nil {
			t.Fatal(err)
		}
	}
	b.click("#copy-token")
	b.wait("copied", `document.querySelector('#copy-status').textContent === 'Copied'`)
	if got := eval[string](b, `navigator.clipboard.readText()`, chromedp.EvalAwaitPromise); got != secret {
		t.Errorf("the clipboard holds %q", got)
	}
	b.click("#new-token-done")
	b.wait("the secret gone", `document.querySelector('#new-token').hidden && document.querySelector('#new-token-secret') === null`)

	// The token opens auditor, and nothing else.
	callAs := func(role string) string {
		return `{"role":"` + role + `","tool":"console_print","arguments":{"text":"hi"}}`
	}
	for _, a := range []attack{
		{name: "its tools", method: "GET", path: "/api/roles/auditor/tools", status: 200},
		{name: "a call as auditor", method: "POST", path: "/api/call", body: callAs("auditor"), status: 200},
		{name: "a call as writer", method: "POST", path: "/api/call", body: callAs("writer"), status: 403, code: toolhost.CodePolicy},
		{name: "another role", method: "GET", path: "/api/roles/writer", status: 403, code: toolhost.CodePolicy},
		{name: "the role list", method: "GET", path: "/api/roles", status: 403, code: toolhost.CodePolicy},
		{name: "a role", method: "POST", path: "/api/roles", body: `{"name":"mine"}`, status: 403, code: toolhost.CodePolicy},
		{name: "a token", method: "POST", path: "/api/auth/tokens", body: `{"role":"auditor"}`, status: 403, code: toolhost.CodePolicy},
	} {
		a.token = secret
		a.send(t, srv)
	}
	var rt host.ToolList
	if code := get(t, srv.URL+"/api/roles/auditor/tools", &rt); code != 200 {
		t.Fatalf("auditor's tools = %d", code)
	}
	var offered []string
	for _, d := range rt.Tools {
		if !slices.Contains(rt.Deferred, d.Function.Name) {
			offered = append(offered, d.Function.Name)
		}
	}
	slices.Sort(offered)
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/auditor", HTTPClient: bearerClient(secret)})
	if got := mcptest.ToolNames(t, cs); !slices.Equal(got, offered) || !slices.Contains(got, "console_print") {
		t.Fatalf("/mcp/auditor offers %v, the role's tools (not deferred) are %v", got, offered)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "console_print", Arguments: map[string]any{"text": "hi"}}); err != nil || res.IsError {
		t.Fatalf("console_print over MCP = %+v, %v", res, err)
	}
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/writer", HTTPClient: bearerClient(secret)}, nil); err == nil {
		t.Fatal("auditor's token connected to /mcp/writer")
	}

	// A second token, named by the host, revoked in the page (asked first).
	b.click("#make-token")
	b.wait("the second secret", fmt.Sprintf(`(e => !!e && e.value.startsWith('thk_') && e.value !== %q)(document.querySelector('#new-token-secret'))`, secret))
	second := eval[string](b, `document.querySelector('#new-token-secret').value`)
	b.wait("its row", `document.querySelectorAll('#access-tokens tbody tr').length === 2`)
	name := eval[string](b, `[...document.querySelectorAll('#access-tokens tbody tr')].map(r => r.dataset.token).find(n => n !== 'ci')`)
	if !strings.HasPrefix(name, "auditor-") {
		t.Errorf("the unnamed token is named %q", name)
	}
	b.click(fmt.Sprintf(`tr[data-token=%q] button.revoke`, name))
	b.click(`.confirm .confirm-yes`)
	b.wait("its row gone", `document.querySelectorAll('#access-tokens tbody tr').length === 1 && document.querySelector('tr[data-token="ci"]') !== null`)
	attack{name: "the revoked token", method: "GET", path: "/api/roles/auditor/tools", token: second, status: 401, code: toolhost.CodePolicy, message: "revoked"}.send(t, srv)

	// Delete: asked first; Cancel keeps it; then it, its tokens and its
	// endpoint are gone.
	b.click("#delete-role")
	if !strings.Contains(b.text(".confirm"), "Delete role auditor?") {
		t.Errorf("the question = %q", b.text(".confirm"))
	}
	b.click(".confirm .confirm-no")
	b.wait("the question gone", `document.querySelector('.confirm') === null && !document.querySelector('#delete-role').hidden`)
	if _, err := h.Roles().Get("auditor"); err != nil {
		t.Fatalf("Cancel deleted the role: %v", err)
	}
	b.click("#delete-role")
	b.click(".confirm .confirm-yes")
	b.ready("roles")
	if b.visible(`tr[data-role="auditor"]`) || !b.visible(`tr[data-role="writer"]`) {
		t.Errorf("roles after the delete = %q", b.text("#roles"))
	}
	if _, err := h.Roles().Get("auditor"); err == nil {
		t.Fatal("the role is still stored")
	}
	attack{name: "the deleted role's token", method: "GET", path: "/api/roles/auditor/tools", token: secret, status: 401, code: toolhost.CodePolicy}.send(t, srv)
	resp, err := bearerClient(secret).Post(srv.URL+"/mcp/auditor", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/mcp/auditor with the deleted role's token = %d", resp.StatusCode)
	}
}

// notInFiles fails the test if a file under dir holds s.
func notInFiles(t *testing.T, dir, s string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(s)) {
			t.Errorf("%s holds the secret", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUIConfigRoleTokens: a role from the config file says where it is
// declared and how to change it, cannot be deleted, and its tokens are made
// in the page all the same; root is built in, and its token section says
// what a root token can do.
func TestUIConfigRoleTokens(t *testing.T) {
	srv, h := uiHost(t, &config.Config{})
	b := newBrowser(t, srv.URL)
	if badge := b.text(`tr[data-role="root"] td:nth-child(2)`); !strings.Contains(badge, "built in") || strings.Contains(badge, "store") {
		t.Errorf("root's source = %q", badge)
	}
	b.open("#/roles/declared", "role")
	if at := b.text("#declared-in"); at != "config.hcl:1" {
		t.Errorf("declared in %q", at)
	}
	if reason := b.text("#readonly-reason"); !strings.Contains(reason, "restart toolhost serve") || !strings.Contains(reason, "reads the file at start only") {
		t.Errorf("reason = %q", reason)
	}
	if b.visible("#delete-role") || !b.visible("#make-token") {
		t.Fatalf("a config role's page = %q", b.text("#main"))
	}
	b.click("#make-token")
	b.wait("the secret", `(e => !!e && e.value.startsWith('thk_'))(document.querySelector('#new-token-secret'))`)
	secret := eval[string](b, `document.querySelector('#new-token-secret').value`)
	attack{name: "the config role's token", method: "GET", path: "/api/roles/declared/tools", token: secret, status: 200}.send(t, srv)
	// With a token made, the page still shows how a client connects, with
	// a placeholder for the token it no longer knows once Done.
	b.click("#new-token-done")
	if !b.visible("#mcp-client") || b.text("#mcp-url") != srv.URL+"/mcp/declared" ||
		!eval[bool](b, fmt.Sprintf(`(c => c.includes('"Bearer <TOKEN>"') && !c.includes(%q))(document.querySelector('#mcp-config').value)`, secret)) {
		t.Errorf("the MCP client section = %q", b.text("#mcp-client"))
	}
	if tokens, err := h.Store().Tokens(context.Background()); err != nil || len(tokens) != 1 || tokens[0].Role != "declared" {
		t.Fatalf("tokens = %+v, %v", tokens, err)
	}

	b.route("#/roles/root", "role")
	if !strings.Contains(b.text("#main h1"), "built in") || b.visible("#delete-role") || !strings.Contains(b.text("#role-tokens"), "A root token can create roles") {
		t.Errorf("root's page = %q", b.text("#main"))
	}
}
