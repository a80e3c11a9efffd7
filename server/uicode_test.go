package server

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/rules"
)

// scriptsHCL sets the config's script calls, and declares a role with the
// code group and a timeout of its own.
const scriptsHCL = `code {
  calls = 20
}
role "scriptcfg" {
  tool_groups = ["console", "code"]
  code {
    timeout = "30s"
  }
}
`

// TestUIRoleScripts: a role's page shows its script bounds, each the
// role's own or the default (the config's code block, else the built-in)
// marked as such; the operator sets two, saved with the role and read
// back through the API, then clears one, which returns to the default; a
// bad value is refused at its bound and saves nothing; a role without the
// code group says so until code is ticked; a config role shows its bounds
// read-only; a role token cannot send the page's save.
func TestUIRoleScripts(t *testing.T) {
	parsed, err := config.Parse([]byte(scriptsHCL), "config.hcl", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, h := uiHost(t, &config.Config{Roles: parsed.Roles, Code: parsed.Code})
	rt := agents.New(h, &agents.Options{Console: io.Discard})
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	if _, err := h.Roles().Create(context.Background(), host.RoleSpec{Name: "scripter", ToolGroups: []string{"console", "code"}}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, srv.URL)
	b.open("#/roles/scripter", "role")

	// shown is each bound's row: its name, its own value, what is in effect.
	shown := func() []string {
		t.Helper()
		return eval[[]string](b, `[...document.querySelectorAll('#code-bounds tbody tr')].map(r =>
			[r.dataset.bound, r.querySelector('.code-own input') ? r.querySelector('.code-own input').value : r.cells[1].textContent, r.cells[2].textContent].join('|'))`)
	}
	check := func(what string, want ...string) {
		t.Helper()
		if got := shown(); !slices.Equal(got, want) {
			t.Errorf("%s: the bounds show\n%q\nwant\n%q", what, got, want)
		}
	}
	defaults := []string{"steps||1,000,000 default: built in", "timeout||1m default: built in", "memory||256 MiB default: built in",
		"calls||20 default: config", "output||32 KiB default: built in", "parallel||4 default: built in"}
	check("at first", defaults...)
	if b.visible("#code-off") {
		t.Error("a role with the code group is told it has none")
	}
	input := func(bound string) string { return fmt.Sprintf(`#code-bounds input[data-bound=%q]`, bound) }
	typeIn := func(bound, text string) {
		t.Helper()
		eval[any](b, fmt.Sprintf(`document.querySelector(%q).value = ''`, input(bound)))
		if text != "" {
			b.do("type into "+bound, chromedp.SendKeys(chromedp.CSS(input(bound)), text))
		} else {
			eval[any](b, fmt.Sprintf(`document.querySelector(%q).dispatchEvent(new Event('input'))`, input(bound)))
		}
	}
	stored := func() rules.CodeBounds {
		t.Helper()
		r, err := h.Roles().Get("scripter")
		if err != nil {
			t.Fatal(err)
		}
		return r.Code
	}
	save := func() {
		t.Helper()
		b.click("#save")
		b.wait("saved", `document.querySelector('#status').textContent === 'Saved'`)
	}

	// Two bounds of its own: saved, and read back through the API.
	typeIn("calls", "5")
	typeIn("timeout", "30s")
	if b.text("#status") != "Unsaved changes" {
		t.Errorf("after an edit the status says %q", b.text("#status"))
	}
	save()
	if got, want := stored(), (rules.CodeBounds{Calls: 5, Timeout: 30 * time.Second}); got != want {
		t.Fatalf("stored bounds = %+v, want %+v", got, want)
	}
	var got apiRole
	if code := get(t, srv.URL+"/api/roles/scripter", &got); code != 200 || got.Code != (rules.CodeBounds{Calls: 5, Timeout: 30 * time.Second}) ||
		got.CodeDefaults.Config != (rules.CodeBounds{Calls: 20}) || got.CodeDefaults.BuiltIn != rules.DefaultCodeBounds() {
		t.Fatalf("GET scripter = %d, code %+v, defaults %+v", code, got.Code, got.CodeDefaults)
	}
	check("saved", "steps||1,000,000 default: built in", "timeout|30s|30s this role", "memory||256 MiB default: built in",
		"calls|5|5 this role", "output||32 KiB default: built in", "parallel||4 default: built in")
	if !strings.Contains(b.text("#saved-notice"), "2 script bounds of its own") {
		t.Errorf("the saved notice = %q", b.text("#saved-notice"))
	}

	// Cleared, calls is the config's again.
	typeIn("calls", "")
	save()
	if got := stored(); got != (rules.CodeBounds{Timeout: 30 * time.Second}) {
		t.Fatalf("after clearing calls the stored bounds = %+v", got)
	}
	check("calls cleared", "steps||1,000,000 default: built in", "timeout|30s|30s this role", "memory||256 MiB default: built in",
		"calls||20 default: config", "output||32 KiB default: built in", "parallel||4 default: built in")

	// Bad values: refused at their bound, nothing saved, the form kept.
	for _, tt := range []struct{ bound, value, msg string }{
		{"timeout", "soon", `"soon" is not a duration`},
		{"timeout", "2h", "2h0m0s is not from 0 (the default) to 1h0m0s"},
		{"steps", "-1", "-1 is not from 0 (the default) to 1000000000000"},
		// Above 2^53 the page's number is not the one typed: the API's
		// bounds are below it, so the server refuses what the page sent.
		{"calls", "9007199254740993", "9007199254740992 is not from 0 (the default) to 1000000"},
		{"parallel", "65", "65 is not from 0 (the default) to 64"},
		{"memory", "1GiB", "a JSON string is not a whole number"},
		{"output", "1.5", "a JSON number 1.5 is not a whole number"},
	} {
		old := eval[string](b, fmt.Sprintf(`document.querySelector(%q).value`, input(tt.bound)))
		typeIn(tt.bound, tt.value)
		b.click("#save")
		errBox := input(tt.bound) + " ~ .field-error"
		b.wait("the error under "+tt.bound, fmt.Sprintf(`(e => !!e && !e.hidden && e.textContent.includes(%q))(document.querySelector(%q))`, tt.msg, errBox))
		if !eval[bool](b, fmt.Sprintf(`document.querySelector(%q).getAttribute('aria-invalid') === 'true' && document.activeElement === document.querySelector(%[1]q)`, input(tt.bound))) {
			t.Errorf("%s %q: the bound at fault is not marked and focused", tt.bound, tt.value)
		}
		if n := eval[int](b, `[...document.querySelectorAll('#code-bounds .field-error')].filter(e => !e.hidden).length`); n != 1 {
			t.Errorf("%s %q: %d errors shown", tt.bound, tt.value, n)
		}
		if v := eval[string](b, fmt.Sprintf(`document.querySelector(%q).value`, input(tt.bound))); v != tt.value || b.text("#status") != "Not saved" {
			t.Errorf("%s %q: after the refusal the input holds %q, the status says %q", tt.bound, tt.value, v, b.text("#status"))
		}
		if got := stored(); got != (rules.CodeBounds{Timeout: 30 * time.Second}) {
			t.Fatalf("%s %q: a refused save stored %+v", tt.bound, tt.value, got)
		}
		typeIn(tt.bound, old)
	}
	save()
	if b.visible("#code-bounds .field-error") {
		t.Error("an error is still shown after a save")
	}

	// A role token cannot send what the page sends.
	tok, _, err := h.Store().CreateToken(context.Background(), "cursor", "scripter", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	attack{name: "a role token: the page's save", method: "PUT", path: "/api/roles/scripter", token: tok,
		body:   `{"toolGroups":["console","code"],"deferredGroups":[],"readOnlyTools":false,"rules":[],"limits":[],"code":{"calls":1000000}}`,
		status: 403, code: toolhost.CodePolicy}.send(t, srv)
	if got := stored(); got != (rules.CodeBounds{Timeout: 30 * time.Second}) {
		t.Fatalf("after a role token's save the stored bounds = %+v", got)
	}

	// A role without the code group says so, until code is ticked.
	b.route("#/roles/writer", "role")
	if !b.visible("#code-off") {
		t.Error("writer, without the code group, does not say so")
	}
	b.click(`input.group[data-group="code"]`)
	if b.visible("#code-off") {
		t.Error("with code ticked, the page still says the role has no code group")
	}

	// A config role: read-only, its own timeout, the rest defaults.
	b.route("#/roles/scriptcfg", "role")
	if n := eval[int](b, `document.querySelectorAll('#role-code input').length`); n != 0 {
		t.Errorf("a config role's bounds offer %d inputs", n)
	}
	check("a config role", "steps|—|1,000,000 default: built in", "timeout|30s|30s this role", "memory|—|256 MiB default: built in",
		"calls|—|20 default: config", "output|—|32 KiB default: built in", "parallel|—|4 default: built in")
	if !strings.Contains(b.text("#role-code"), "config.hcl:4; change them there") || b.visible("#code-off") {
		t.Errorf("scriptcfg's scripts = %q", b.text("#role-code"))
	}
}
