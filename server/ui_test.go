package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
)

// The web UI's tests run the page in a real, headless Chromium.

const uiWait = 15 * time.Second

// browser is one headless Chromium with one tab, on the page at base.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string // the directory of its screenshots
}

// newBrowser starts a browser whose tab holds testToken, passed to the page
// in the address's fragment as `toolhost token -url` prints it, which opens
// the overview; the tab is then on the roles.
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	b := startBrowser(t, base)
	b.open("#token="+testToken, "overview")
	b.route("#/roles", "roles")
	return b
}

// startBrowser starts Chromium (flags as the chrome plugin's, a fresh
// profile) and stops it when the test ends, saving a screenshot first if the
// test failed: to $TOOLHOST_UI_SHOTS when set, else to a temporary directory.
func startBrowser(t *testing.T, base string) *browser {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("Chromium not found: scripts/test installs it")
	}
	shots := os.Getenv("TOOLHOST_UI_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], // headless, no first run, no background networking, no sync
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 800),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	b := &browser{t: t, ctx: ctx, base: base, shots: shots}
	t.Cleanup(func() {
		if t.Failed() {
			name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_") + ".png"
			if err := b.screenshot(filepath.Join(b.shots, name)); err != nil {
				t.Logf("no screenshot: %v", err)
			} else {
				t.Logf("screenshot of the failure: %s", filepath.Join(b.shots, name))
			}
		}
		cancelTab()
		cancelAlloc()
	})
	// The first action starts the browser, on a context that lives as long
	// as the test; a timer bounds the wait.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800)) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting Chromium (%s): %v", path, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Chromium (%s) did not start in 30s", path)
	}
	return b
}

// shot saves a screenshot of the whole page, beyond the window, as name in
// the browser's directory of screenshots ($TOOLHOST_UI_SHOTS when set), and
// logs where.
func (b *browser) shot(name string) {
	b.t.Helper()
	path := filepath.Join(b.shots, name)
	if err := b.capture(path, chromedp.FullScreenshot(100)); err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	b.t.Logf("screenshot: %s", path)
}

// screenshot saves a screenshot of the window as path.
func (b *browser) screenshot(path string) error { return b.capture(path, chromedp.CaptureScreenshot()) }

// capture saves the PNG that shoot takes as path.
func (b *browser) capture(path string, shoot chromedp.Action[[]byte]) error {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, shoot)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// keep saves a screenshot of the page as it is, named after the test and
// name, where failures' go ($TOOLHOST_UI_SHOTS or a temporary directory).
func (b *browser) keep(name string) {
	b.t.Helper()
	path := filepath.Join(b.shots, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(b.t.Name(), "_")+"-"+name+".png")
	if err := b.screenshot(path); err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	b.t.Logf("screenshot: %s", path)
}

// do runs steps, failing the test on an error.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiWait)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// wait waits until the expression is truthy.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiWait+time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(uiWait))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// open loads the page at the hash route and waits for the view to be ready.
func (b *browser) open(hash, view string) {
	b.t.Helper()
	b.do("open "+hash, chromedp.Navigate(b.base+"/"+hash))
	b.ready(view)
}

// route changes the hash route in the loaded page and waits for the view.
func (b *browser) route(hash, view string) {
	b.t.Helper()
	eval[any](b, "location.hash = "+strconv.Quote(hash))
	b.ready(view)
}

func (b *browser) ready(view string) {
	b.t.Helper()
	b.wait("the "+view+" view", fmt.Sprintf(`document.querySelector('#main').dataset.ready === %q`, view))
	if msg := eval[string](b, `document.querySelector('#main > h1') && document.querySelector('#main > h1').textContent === 'Error' ? document.querySelector('#main').textContent : ''`); msg != "" {
		b.t.Fatalf("the %s view failed: %s", view, msg)
	}
	if txt := b.text("#main"); strings.Contains(txt, "[object ") || strings.Contains(txt, "undefined") {
		b.t.Errorf("the %s view shows a value it did not format: %q", view, txt)
	}
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel))
}

// visible reports whether the element exists and is laid out.
func (b *browser) visible(sel string) bool {
	b.t.Helper()
	return eval[bool](b, fmt.Sprintf(`(e => !!e && !e.hidden && e.getClientRects().length > 0)(document.querySelector(%q))`, sel))
}

// uiHost serves a host with two groups, a config role ("declared",
// read-only, its console group loaded on demand) and a stored role
// ("writer") with the console group.
func uiHost(t *testing.T, cfg *config.Config) (*httptest.Server, *host.Host) {
	t.Helper()
	cfg.Roles = append(cfg.Roles, config.Role{Name: "declared", Description: "Declared in the file.", ToolGroups: []string{"console"},
		DeferredGroups: []string{"console"}, Pos: "config.hcl:1,1"})
	srv, h := serve(t, cfg, group("console", "console_print"), group("artifact", "put_artifact", "get_artifact"))
	if _, err := h.Roles().Create(context.Background(), host.RoleSpec{Name: "writer", Description: "Writes reports.",
		Prompt: "You write reports.", ToolGroups: []string{"console"}}); err != nil {
		t.Fatal(err)
	}
	return srv, h
}

func storedGroups(t *testing.T, h *host.Host, name string) []string {
	t.Helper()
	r, err := h.Roles().Get(name)
	if err != nil {
		t.Fatal(err)
	}
	if r.ToolGroups == nil {
		return nil
	}
	return slices.Sorted(slices.Values(r.ToolGroups))
}

func TestUIFiles(t *testing.T) {
	srv := newServer(t)
	for path, want := range map[string]string{"/": "text/html", "/ui/app.js": "text/javascript", "/ui/agents.js": "text/javascript", "/ui/roles.js": "text/javascript", "/ui/rules.js": "text/javascript", "/ui/code.js": "text/javascript", "/ui/overview.js": "text/javascript", "/ui/events.js": "text/javascript", "/ui/app.css": "text/css"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) || resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s = %d %q, want 200 %s with a CSP", path, resp.StatusCode, resp.Header.Get("Content-Type"), want)
		}
	}
	var e apiError
	if code := get(t, srv.URL+"/ui/nope.js", &e); code != 404 || e.Error.Code != toolhost.CodeValidation {
		t.Errorf("GET /ui/nope.js = %d %+v", code, e)
	}
}

func TestUIRolePage(t *testing.T) {
	srv, h := uiHost(t, &config.Config{})
	b := newBrowser(t, srv.URL)

	b.open("#/roles", "roles")
	for _, name := range []string{"root", "declared", "writer"} {
		if !b.visible(fmt.Sprintf(`a[href="#/roles/%s"]`, name)) {
			t.Fatalf("role %s not listed: %s", name, b.text("#roles"))
		}
	}
	if row := b.text(`tr[data-role="writer"]`); !strings.Contains(row, "console") || !strings.Contains(row, "Writes reports.") {
		t.Errorf("writer row = %q", row)
	}
	b.click(`a[href="#/roles/writer"]`)
	b.ready("role")
	if !strings.Contains(b.text("#main"), "Writes reports.") || b.visible("#readonly-reason") {
		t.Errorf("role page = %q", b.text("#main"))
	}
	if !eval[bool](b, `document.querySelector('input.group[data-group="console"]').checked && !document.querySelector('input.group[data-group="artifact"]').checked`) {
		t.Fatal("the saved selection is not ticked")
	}

	// How an MCP client reaches the role, though it has no token: its
	// endpoint, and a configuration whose token is a placeholder.
	if got := b.text("#mcp-url"); got != srv.URL+"/mcp/writer" {
		t.Errorf("the MCP URL shown = %q", got)
	}
	var client struct {
		MCPServers map[string]struct {
			Type, URL string
			Headers   map[string]string
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(eval[string](b, `document.querySelector('#mcp-config').value`)), &client); err != nil {
		t.Fatalf("the MCP client configuration is not JSON: %v", err)
	}
	if c := client.MCPServers["toolhost-writer"]; c.Type != "http" || c.URL != srv.URL+"/mcp/writer" || c.Headers["Authorization"] != "Bearer <TOKEN>" {
		t.Errorf("the MCP client configuration = %+v", client)
	}

	// Ticking a group changes the cost.
	b.wait("the token cost", `document.querySelector('#tokens').dataset.state === 'ready'`)
	before := b.text("#tokens")
	b.click(`input.group[data-group="artifact"]`)
	b.wait("a new token cost", fmt.Sprintf(`document.querySelector('#tokens').dataset.state === 'ready' && document.querySelector('#tokens').textContent !== %q`, before))
	after := b.text("#tokens")
	if n, m := leadingInt(before), leadingInt(after); n <= 0 || m <= n {
		t.Errorf("tokens %q → %q, want more", before, after)
	}

	// Save, reload: still ticked, and stored.
	b.click("#save")
	b.wait("saved", `document.querySelector('#status').textContent === 'Saved'`)
	if got := storedGroups(t, h, "writer"); !slices.Equal(got, []string{"artifact", "console"}) {
		t.Fatalf("stored groups = %v", got)
	}
	// The save is confirmed, with what the role now holds.
	if got := b.text("#saved-notice"); !b.visible("#saved-notice") || !strings.HasPrefix(got, "Role writer saved at ") ||
		!strings.Contains(got, ": 2 tool groups (artifact, console), 0 rules, 0 limits.") {
		t.Errorf("the save's confirmation = %q (visible %v)", got, b.visible("#saved-notice"))
	}
	b.do("reload", chromedp.Reload())
	b.ready("role")
	if !eval[bool](b, `document.querySelector('input.group[data-group="artifact"]').checked && document.querySelector('input.group[data-group="console"]').checked`) {
		t.Fatal("after reload the saved groups are not ticked")
	}

	// Untick everything: every group will be available; Save stores null.
	if b.visible("#all-groups-notice") {
		t.Error("the all-groups notice shows while groups are ticked")
	}
	b.click(`input.group[data-group="artifact"]`)
	b.click(`input.group[data-group="console"]`)
	if b.visible("#saved-notice") {
		t.Error("the last save's confirmation still shows after a change")
	}
	b.wait("the token cost", `document.querySelector('#tokens').dataset.state !== 'loading'`)
	b.wait("the all-groups notice", `(e => !e.hidden && e.getClientRects().length > 0)(document.querySelector('#all-groups-notice'))`)
	b.click("#save")
	b.wait("saved", `document.querySelector('#status').textContent === 'Saved'`)
	if r, _ := h.Roles().Get("writer"); r.ToolGroups != nil {
		t.Fatalf("stored groups = %#v, want nil", r.ToolGroups)
	}
	if got := b.text("#saved-notice"); !strings.Contains(got, ": all tool groups,") {
		t.Errorf("the save's confirmation = %q", got)
	}
	if !strings.Contains(b.text("#current-groups"), "all groups") {
		t.Errorf("current groups = %q", b.text("#current-groups"))
	}

	// A group that went away is refused by the API; the page says why.
	if err := h.Modules().Unload("artifact"); err != nil {
		t.Fatal(err)
	}
	b.click(`input.group[data-group="artifact"]`)
	b.wait("the token cost", `document.querySelector('#tokens').dataset.state !== 'loading'`)
	b.click("#save")
	b.wait("the error", `(e => !e.hidden && e.textContent.length > 0)(document.querySelector('#error'))`)
	if msg := b.text("#error"); !strings.Contains(msg, "artifact") {
		t.Errorf("error = %q", msg)
	}
	if r, _ := h.Roles().Get("writer"); r.ToolGroups != nil {
		t.Errorf("stored groups = %#v after a refused save", r.ToolGroups)
	}
}

func leadingInt(s string) int {
	s = strings.ReplaceAll(s, ",", "")
	end := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(s)
	}
	n, _ := strconv.Atoi(s[:end])
	return n
}

func TestUIReadOnlyRoles(t *testing.T) {
	srv, _ := uiHost(t, &config.Config{})
	b := newBrowser(t, srv.URL)
	for i, c := range []struct{ name, reason string }{{"root", "built in"}, {"declared", "config file"}} {
		name, reason := c.name, c.reason
		if i == 0 {
			b.open("#/roles/"+name, "role")
		} else {
			b.route("#/roles/"+name, "role")
		}
		b.wait("the "+name+" page", fmt.Sprintf(`document.querySelector('#main h1').textContent.startsWith(%q)`, name))
		if n := eval[int](b, `document.querySelectorAll('input.group').length`); n < 2 {
			t.Fatalf("%s: %d group boxes", name, n)
		}
		if !eval[bool](b, `[...document.querySelectorAll('input.group, input.defer')].every(c => c.disabled) && document.querySelector('#save').disabled`) {
			t.Errorf("%s: boxes, load-on-demand toggles or Save enabled", name)
		}
		if name == "declared" && !eval[bool](b, `document.querySelector('input.defer[data-group="console"]').checked`) {
			t.Errorf("declared: its deferred group's toggle is off")
		}
		if !b.visible("#readonly-reason") || !strings.Contains(b.text("#readonly-reason"), reason) {
			t.Errorf("%s: reason = %q, want %q", name, b.text("#readonly-reason"), reason)
		}
		// The badge that says the role is not edited here is worded apart
		// from the tool policy "reads only" under it.
		head, policy := b.text("#main h1"), b.text("label.reads-only-toggle")
		if strings.Contains(head, "read") || !strings.HasPrefix(policy, "Tool policy: reads only") {
			t.Errorf("%s: heading %q, policy %q", name, head, policy)
		}
		if lock := strings.Contains(head, "from config.hcl, edit the file"); lock != (name == "declared") {
			t.Errorf("%s: heading %q", name, head)
		}
	}
	b.route("#/roles", "roles")
	if row := b.text(`tr[data-role="declared"] td:nth-child(2)`); !strings.Contains(row, "from config.hcl, edit the file") || strings.Contains(row, "read") {
		t.Errorf("declared's source in the list = %q", row)
	}
}

// TestUIDeferredGroups: a ticked group's "load on demand" toggle is saved
// as the role's deferredGroups, is still on after a reload, and the cost
// card then shows what an agent starts with; unticking the group drops it
// from both lists in one save.
func TestUIDeferredGroups(t *testing.T) {
	srv, h := uiHost(t, &config.Config{})
	b := newBrowser(t, srv.URL)
	b.open("#/roles/writer", "role")
	toggle := func(group string) string { return fmt.Sprintf(`label.group-defer[data-group=%q]`, group) }
	if !b.visible(toggle("console")) || b.visible(toggle("artifact")) {
		t.Fatal(`"load on demand" is not offered for the ticked group only`)
	}
	if b.visible("#eager") {
		t.Errorf("the start cost shows for a role that defers nothing: %q", b.text("#eager"))
	}

	b.click(`input.group[data-group="artifact"]`)
	b.wait("artifact's toggle", fmt.Sprintf(`(e => !e.hidden && e.getClientRects().length > 0)(document.querySelector(%q))`, toggle("artifact")))
	b.click(`input.defer[data-group="artifact"]`)
	b.wait("unsaved", `document.querySelector('#status').textContent === 'Unsaved changes'`)
	b.click("#save")
	b.wait("saved", `document.querySelector('#status').textContent === 'Saved'`)
	if r, _ := h.Roles().Get("writer"); !slices.Equal(r.Deferred, []string{"artifact"}) {
		t.Fatalf("stored deferred = %v", r.Deferred)
	}

	b.do("reload", chromedp.Reload())
	b.ready("role")
	if !eval[bool](b, `document.querySelector('input.defer[data-group="artifact"]').checked && !document.querySelector('input.defer[data-group="console"]').checked`) {
		t.Fatal("after reload the load-on-demand toggles are not as saved")
	}
	var role apiRole
	if code := get(t, srv.URL+"/api/roles/writer", &role); code != 200 || !slices.Equal(role.Deferred, []string{"artifact"}) {
		t.Fatalf("GET /api/roles/writer = %d %+v", code, role)
	}
	if cur := b.text("#current-groups"); !strings.Contains(cur, "artifact (on demand)") || strings.Contains(cur, "console (on demand)") {
		t.Errorf("current groups = %q", cur)
	}
	b.wait("the start cost", `(e => !e.hidden && e.getClientRects().length > 0)(document.querySelector('#eager'))`)
	b.wait("the token cost", `document.querySelector('#tokens').dataset.state === 'ready'`)
	eager, all := eval[string](b, `document.querySelector('#eager-tokens').dataset.tokens`), leadingInt(b.text("#tokens"))
	if n, _ := strconv.Atoi(eager); n <= 0 || n >= all {
		t.Errorf("an agent starts with %q tokens, the role's tools are %d", eager, all)
	}
	var rt host.ToolList
	if get(t, srv.URL+"/api/roles/writer/tools", &rt); strconv.Itoa(rt.EagerTokens) != eager {
		t.Errorf("the page's start cost %s, the API's %d", eager, rt.EagerTokens)
	}
	b.route("#/roles", "roles")
	if row := b.text(`tr[data-role="writer"]`); !strings.Contains(row, "artifact (on demand)") {
		t.Errorf("writer row = %q", row)
	}

	// Unticking the deferred group takes it out of deferredGroups too.
	b.route("#/roles/writer", "role")
	b.click(`input.group[data-group="artifact"]`)
	b.wait("artifact's toggle hidden", fmt.Sprintf(`document.querySelector(%q).hidden`, toggle("artifact")))
	b.click("#save")
	b.wait("saved", `document.querySelector('#status').textContent === 'Saved'`)
	if r, _ := h.Roles().Get("writer"); !slices.Equal(r.ToolGroups, []string{"console"}) || len(r.Deferred) != 0 {
		t.Fatalf("stored groups %v, deferred %v", r.ToolGroups, r.Deferred)
	}
	b.wait("the start cost hidden", `document.querySelector('#eager').hidden`)
}

func TestUIApprovals(t *testing.T) {
	srv, h := approvalServer(t)
	b := newBrowser(t, srv.URL)
	b.open("#/approvals", "approvals")

	type answer struct {
		res *toolhost.Result
		err error
	}
	call := func(text string) chan answer {
		done := make(chan answer, 1)
		go func() {
			res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "guarded", Arguments: json.RawMessage(`{"text":"` + text + `"}`)})
			done <- answer{res, err}
		}()
		return done
	}
	wait := func(done chan answer) answer {
		t.Helper()
		select {
		case a := <-done:
			return a
		case <-time.After(uiWait):
			t.Fatal("the call did not return")
		}
		return answer{}
	}

	done := call("a")
	b.wait("the pending call", `document.querySelector('button.approve') !== null`)
	if card := b.text(".approval"); !strings.Contains(card, "guarded") || !strings.Contains(card, `"text": "a"`) {
		t.Errorf("card = %q", card)
	}
	b.click("button.approve")
	if a := wait(done); a.err != nil || !a.res.OK || a.res.Stdout != "guarded:a" {
		t.Fatalf("approved call = %+v, %v", a.res, a.err)
	}
	b.wait("the card to go", `document.querySelector('.approval') === null`)

	done = call("b")
	b.wait("the pending call", `document.querySelector('button.deny') !== null`)
	b.do("reason", chromedp.SendKeys(chromedp.CSS("input.reason"), "not now"))
	b.click("button.deny")
	if a := wait(done); toolhost.CodeOf(a.err) != toolhost.CodeApprovalDenied || !strings.Contains(a.err.Error(), "not now") {
		t.Fatalf("denied call = %+v, %v", a.res, a.err)
	}
}

func TestUIEvents(t *testing.T) {
	srv, h := serve(t, &config.Config{Executor: config.Executor{IdempotencyWindow: time.Hour}}, group("console", "console_print"))
	b := newBrowser(t, srv.URL)
	b.open("#/events", "events")
	b.wait("the stream", `document.querySelector('#stream-status').textContent === 'live'`)
	if _, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "console_print", Arguments: json.RawMessage(`{"text":"hi"}`), Context: toolhost.CallContext{CallID: "c-ui"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.wait("the call's events", `[...document.querySelectorAll('#events tbody tr')].some(r => r.textContent.includes('console_print') && r.textContent.includes('c-ui'))`)
	// A repeat of the call id replays the outcome; its row says so, and the
	// first run's does not.
	if _, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "console_print", Arguments: json.RawMessage(`{"text":"hi"}`), Context: toolhost.CallContext{CallID: "c-ui"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.wait("the replay's mark", `[...document.querySelectorAll('#events tbody tr')].filter(r => r.textContent.includes('c-ui') && r.querySelector('.replay')).length === 1`)
}

func TestUIToken(t *testing.T) {
	const token = "s3cret-token-asked-for-in-the-page"
	srv, _ := serve(t, &config.Config{Auth: config.Auth{Token: token}}, group("console", "console_print"))
	b := startBrowser(t, srv.URL)

	b.do("open", chromedp.Navigate(srv.URL+"/#/roles"))
	b.do("the token form", chromedp.WaitVisible(chromedp.CSS("#auth-token")))
	b.do("a wrong token", chromedp.SendKeys(chromedp.CSS("#auth-token"), "wrong"))
	b.click("#auth-submit")
	b.wait("the refusal", `(e => !e.hidden && e.textContent.includes('refused'))(document.querySelector('#auth-error'))`)
	b.do("the token", chromedp.SendKeys(chromedp.CSS("#auth-token"), token))
	b.click("#auth-submit")
	b.ready("roles")
	if !b.visible(`a[href="#/roles/root"]`) || b.visible("#auth") {
		t.Fatalf("roles = %q", b.text("#main"))
	}
	if got := eval[string](b, `sessionStorage.getItem('toolhost.token')`); got != token {
		t.Errorf("sessionStorage token = %q", got)
	}
	b.do("reload", chromedp.Reload())
	b.ready("roles")
	if b.visible("#auth") || !b.visible(`a[href="#/roles/root"]`) {
		t.Error("after reload the token was asked again")
	}
}

// TestUIFragmentToken: the address `toolhost token -url` prints opens the
// page without asking, and the token leaves the address bar and the history.
func TestUIFragmentToken(t *testing.T) {
	srv, _ := serve(t, &config.Config{}, group("console", "console_print"))
	b := startBrowser(t, srv.URL)
	b.open("#token="+testToken, "overview")
	if b.visible("#auth") || !b.visible("#counters") {
		t.Fatalf("overview = %q", b.text("#main"))
	}
	if got := eval[string](b, `location.href`); strings.Contains(got, "token") || !strings.HasSuffix(got, "#/overview") {
		t.Errorf("the address still holds the token: %s", got)
	}
	if got := eval[int](b, `history.length`); got != 2 { // about:blank, then the page: the token's entry was replaced
		t.Errorf("history.length = %d", got)
	}
	if got := eval[string](b, `sessionStorage.getItem('toolhost.token')`); got != testToken {
		t.Errorf("sessionStorage token = %q", got)
	}
}

// TestUIDocShot writes docs/role-page.png, and docs/role-tokens.png (the
// role page's tokens, one just made), when TOOLHOST_UI_DOC_SHOT is set.
func TestUIDocShot(t *testing.T) {
	if os.Getenv("TOOLHOST_UI_DOC_SHOT") == "" {
		t.Skip("set TOOLHOST_UI_DOC_SHOT=1 to write docs/role-page.png and docs/role-tokens.png")
	}
	ws := group("workspace", "read_file", "write_file", "list_dir", "search_files")
	ws.Description = "Read, write and search files under the workspace root."
	art := group("artifact", "put_artifact", "get_artifact")
	art.Description = "Store and fetch artifacts shared between agents."
	con := group("console", "console_print")
	con.Description = "Print to the operator's console."
	netg := group("network", "http_request")
	netg.Description = "HTTP requests to allowed hosts, with size and redirect limits."
	srv, h := serve(t, &config.Config{}, ws, art, con, netg)
	if _, err := h.Roles().Create(context.Background(), host.RoleSpec{Name: "researcher", Description: "Finds and summarises sources; keeps notes as artifacts.",
		Prompt: "You research questions and store what you find as artifacts.", ToolGroups: []string{"workspace", "artifact"}}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, srv.URL)
	b.open("#/roles/researcher", "role")
	b.wait("the token cost", `document.querySelector('#tokens').dataset.state === 'ready'`)
	eval[any](b, `document.querySelector('li[data-group="workspace"] details').open = true`)
	if err := b.screenshot(filepath.Join("..", "docs", "role-page.png")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Tokens().Create(context.Background(), "ci", "researcher", time.Time{}, "api"); err != nil {
		t.Fatal(err)
	}
	b.do("the token's name", chromedp.SendKeys(chromedp.CSS("#token-name"), "cursor"))
	b.click("#make-token")
	b.wait("the secret", `(e => !!e && e.value.startsWith('thk_'))(document.querySelector('#new-token-secret'))`)
	eval[any](b, `document.querySelector('#role-tokens').scrollIntoView()`)
	if err := b.screenshot(filepath.Join("..", "docs", "role-tokens.png")); err != nil {
		t.Fatal(err)
	}
}

func TestUIAgents(t *testing.T) {
	srv, h, rt := agentServer(t)
	b := newBrowser(t, srv.URL)
	b.open("#/agents", "agents")
	b.wait("the stream", `document.querySelector('#stream-status').textContent === 'live'`)

	// Start an agent from the form; the table follows it until it waits
	// with its answer.
	b.do("the role", chromedp.SetValue(chromedp.CSS("#spawn-role"), "helper"))
	b.do("the task", chromedp.SendKeys(chromedp.CSS("#spawn-task"), "sum"))
	b.click("#spawn-start")
	b.wait("the new agent", `document.querySelector('#spawn-status').textContent.startsWith('Started ')`)
	id := strings.TrimPrefix(b.text("#spawn-status"), "Started ")
	row := fmt.Sprintf(`document.querySelector('tr[data-agent=%q]')`, id)
	b.wait("the agent waiting with its answer", fmt.Sprintf(`(r => !!r && r.querySelector('.state').textContent === 'waiting' && r.textContent.includes('done: sum'))(%s)`, row))
	if txt := eval[string](b, row+`.textContent`); !strings.Contains(txt, "helper") || !strings.Contains(txt, "sum") {
		t.Errorf("row = %q", txt)
	}
	// A change made elsewhere shows without reloading the page.
	if _, err := rt.Send(context.Background(), "", id, "from elsewhere"); err != nil {
		t.Fatal(err)
	}
	b.wait("the answer to a message sent elsewhere", fmt.Sprintf(`(r => r.querySelector('.state').textContent === 'waiting' && r.textContent.includes('reply: from elsewhere'))(%s)`, row))

	// Its page: the event tree with the console_print call, the conversation.
	// Clicked in the page, in one step: the live list may redraw the row
	// between chromedp finding the link and clicking it.
	eval[bool](b, fmt.Sprintf(`(document.querySelector('tr[data-agent=%q] a.agent-link').click(), true)`, id))
	b.ready("agent")
	b.wait("the console_print call", `[...document.querySelectorAll('#tree li.node[data-kind="call"]')].some(n => n.dataset.status === 'ok' && n.querySelector('.node-title').textContent.startsWith('console_print'))`)
	if c := b.text("#conversation"); !strings.Contains(c, "console_print(") || !strings.Contains(c, "done: sum") {
		t.Errorf("conversation = %q", c)
	}

	// A message wakes it; the page shows the new answer.
	b.do("the message", chromedp.SendKeys(chromedp.CSS("#message"), "and twice"))
	b.click("#send")
	b.wait("the reply", `(e => !!e && e.textContent === 'reply: and twice')(document.querySelector('#answer'))`)

	// Terminate it: the page and the store say so, and it takes no more
	// messages.
	b.click("#terminate")
	b.wait("terminated", `document.querySelector('#main h1 .state').textContent === 'terminated'`)
	if !eval[bool](b, `document.querySelector('#send').disabled && document.querySelector('#terminate').disabled && document.querySelector('#tree li.node.bad') !== null`) {
		t.Errorf("after terminate: controls enabled or no failed node marked: %q", b.text("#main"))
	}
	if a, err := h.Store().Agent(context.Background(), id); err != nil || a.Status != "terminated" {
		t.Fatalf("stored agent = %+v, %v", a, err)
	}
	b.route("#/agents", "agents")
	b.wait("the terminated row", fmt.Sprintf(`(r => !!r && r.querySelector('.state').textContent === 'terminated')(%s)`, row))
}

// TestUIAgentsPages: the Agents view shows the list a page at a time, the
// agents not ended first: Next follows the server's pages to the last,
// whose Next is disabled, and Previous comes back.
func TestUIAgentsPages(t *testing.T) {
	srv, h := serve(t, &config.Config{})
	makeAgents(t, h, 60)
	b := newBrowser(t, srv.URL)
	b.open("#/agents", "agents")
	states := func(want int) []string {
		t.Helper()
		b.wait(fmt.Sprintf("a page of %d agents", want), fmt.Sprintf(`document.querySelectorAll('#agents tbody tr[data-agent]').length === %d`, want))
		return eval[[]string](b, `[...document.querySelectorAll('#agents tbody tr[data-agent] .state')].map(s => s.textContent)`)
	}
	first := states(50)
	want := append(slices.Repeat([]string{"active"}, 31), slices.Repeat([]string{"terminated"}, 19)...) // the root agent among the active
	if !slices.Equal(first, want) || b.text("#agents-page") != "page 1" || !eval[bool](b, `document.querySelector('#agents-prev').disabled`) {
		t.Errorf("the first page: %v, %q", first, b.text("#agents-page"))
	}
	b.click("#agents-next")
	if last := states(11); !slices.Equal(last, slices.Repeat([]string{"terminated"}, 11)) || b.text("#agents-page") != "page 2" ||
		!eval[bool](b, `document.querySelector('#agents-next').disabled`) {
		t.Errorf("the last page: %v, %q", last, b.text("#agents-page"))
	}
	b.click("#agents-prev")
	if again := states(50); !slices.Equal(again, first) {
		t.Errorf("back to the first page: %v", again)
	}
}
