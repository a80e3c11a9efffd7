package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/rules"
)

// guardedHCL declares a role with rule and limit blocks, their lines known.
const guardedHCL = `role "guarded" {
  tool_groups = ["console"]
  rule "no_sudo" {
    tools  = ["console_print"]
    when   = "args.text.contains('sudo')"
    action = "deny"
    reason = "no sudo here"
  }
  rule "ask" {
    action = "approve"
  }
  limit "console_print" {
    calls = 5
    per   = "1m"
  }
}
`

// TestUIRoleRules: on a role's page the operator adds a rule whose
// condition does not compile: the save is refused, the CEL error (its line
// and column, a caret under them) shown under that rule's when, and the
// form kept; fixed, it is saved, with a second rule moved above it; the
// rule that denies put_artifact whatever its arguments marks it as not
// offered; a limit with a bad period is refused at its per, then saved;
// the API returns both exactly, and a reload shows them in order. A config
// role shows its rules and limits read-only, each with its file:line.
func TestUIRoleRules(t *testing.T) {
	parsed, err := config.Parse([]byte(guardedHCL), "config.hcl", nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, h := uiHost(t, &config.Config{Roles: parsed.Roles})
	b := newBrowser(t, srv.URL)
	b.open("#/roles/writer", "role")
	if !b.visible("#no-rules") || !b.visible("#no-limits") || !strings.Contains(b.text("#role-rules"), "the first that matches decides") {
		t.Fatalf("writer's rules = %q", b.text("#role-rules"))
	}
	card := func(i int, field string) string {
		return fmt.Sprintf("#rule-list li.rule-card:nth-child(%d) .rule-%s", i, field)
	}
	typeIn := func(sel, text string) {
		t.Helper()
		eval[any](b, fmt.Sprintf(`document.querySelector(%q).value = ''`, sel))
		b.do("type into "+sel, chromedp.SendKeys(chromedp.CSS(sel), text))
	}

	// A rule whose condition does not compile: refused at its when.
	b.click("#add-rule")
	typeIn(card(1, "name"), "no_sudo")
	typeIn(card(1, "tools"), "console_print")
	typeIn(card(1, "when"), "args.text.contains('sudo'")
	typeIn(card(1, "reason"), "no sudo here")
	b.click(`input.group[data-group="artifact"]`)
	form := `JSON.stringify([...document.querySelectorAll('#rule-list input, #rule-list textarea, #rule-list select, #limit-list input')].map(e => e.value))`
	before := eval[string](b, form)
	b.click("#save")
	whenErr := card(1, "when") + " ~ .field-error"
	b.wait("the error under when", fmt.Sprintf(`(e => !!e && !e.hidden && e.textContent.includes('line 1, column'))(document.querySelector(%q))`, whenErr))
	if msg := b.text(whenErr); !strings.Contains(msg, "of the expression") || !strings.Contains(b.text(whenErr+" pre.caret"), "args.text.contains('sudo'\n") {
		t.Errorf("the error under when = %q", msg)
	}
	if !eval[bool](b, fmt.Sprintf(`document.querySelector(%q).getAttribute('aria-invalid') === 'true' && document.activeElement === document.querySelector(%[1]q)`, card(1, "when"))) {
		t.Error("the when at fault is not marked and focused")
	}
	if after := eval[string](b, form); after != before || !eval[bool](b, `document.querySelector('input.group[data-group="artifact"]').checked`) {
		t.Errorf("the refused save changed the form: %s, was %s", after, before)
	}
	if r, _ := h.Roles().Get("writer"); len(r.Rules) != 0 || len(r.ToolGroups) != 1 {
		t.Fatalf("a refused save stored %+v", r)
	}

	// Fixed, and a rule that hides put_artifact moved above it: saved.
	typeIn(card(1, "when"), "args.text.contains('sudo')")
	b.click("#add-rule")
	typeIn(card(2, "name"), "hide_put")
	typeIn(card(2, "tools"), "put_artifact")
	b.click(`#rule-list li.rule-card:nth-child(2) .move-up`)
	if !b.visible(card(1, "name")) || eval[string](b, fmt.Sprintf(`document.querySelector(%q).value`, card(1, "name"))) != "hide_put" {
		t.Fatal("Move up did not move the rule up")
	}
	b.click("#save")
	b.wait("saved", `document.querySelector('#status').textContent === 'Saved'`)
	if b.visible(whenErr) {
		t.Error("the fixed rule still shows its error")
	}
	want := []rules.Rule{
		{Name: "hide_put", Tools: []string{"put_artifact"}, Action: rules.Deny},
		{Name: "no_sudo", Tools: []string{"console_print"}, When: "args.text.contains('sudo')", Action: rules.Deny, Reason: "no sudo here"},
	}
	if r, err := h.Roles().Get("writer"); err != nil || !reflect.DeepEqual(r.Rules, want) {
		t.Fatalf("stored rules = %+v, %v", r.Rules, err)
	}

	// The tool denied whatever its arguments is not offered, on the page
	// as through the API.
	b.wait("put_artifact marked", `(e => !!e && e.classList.contains('denied') && e.textContent.includes('rule hide_put'))(document.querySelector('li[data-tool="put_artifact"]'))`)
	if eval[bool](b, `document.querySelectorAll('li[data-tool].denied').length !== 1`) {
		t.Errorf("tools marked: %s", eval[string](b, `[...document.querySelectorAll('li[data-tool].denied')].map(e => e.textContent).join('; ')`))
	}
	var rt host.ToolList
	if code := get(t, srv.URL+"/api/roles/writer/tools", &rt); code != 200 ||
		slices.ContainsFunc(rt.Tools, func(d host.ToolDefinition) bool { return d.Function.Name == "put_artifact" }) ||
		!slices.ContainsFunc(rt.Tools, func(d host.ToolDefinition) bool { return d.Function.Name == "get_artifact" }) {
		t.Fatalf("writer's tools = %d %+v", code, rt.Tools)
	}

	// A limit whose period is not a duration: refused at its per.
	b.click("#add-limit")
	typeIn("#limit-list li.limit-row .limit-target", "console_print")
	typeIn("#limit-list li.limit-row .limit-calls", "5")
	typeIn("#limit-list li.limit-row .limit-per", "a minute")
	b.click("#save")
	perErr := "#limit-list li.limit-row .limit-per ~ .field-error"
	b.wait("the error under per", fmt.Sprintf(`(e => !!e && !e.hidden && e.textContent.includes('not a duration'))(document.querySelector(%q))`, perErr))
	if r, _ := h.Roles().Get("writer"); len(r.Limits) != 0 {
		t.Fatalf("a refused save stored limits %+v", r.Limits)
	}
	typeIn("#limit-list li.limit-row .limit-per", "1m")
	b.click("#save")
	b.wait("saved", `document.querySelector('#status').textContent === 'Saved' && document.querySelector('#limit-list .limit-per').value === '1m'`)

	// Through the API: both, exactly.
	var got apiRole
	if code := get(t, srv.URL+"/api/roles/writer", &got); code != 200 || !reflect.DeepEqual(got.Rules, want) ||
		!reflect.DeepEqual(got.Limits, []rules.Limit{{Target: "console_print", Calls: 5, Per: time.Minute}}) ||
		!slices.Equal(got.ToolGroups, []string{"console", "artifact"}) && !slices.Equal(got.ToolGroups, []string{"artifact", "console"}) {
		t.Fatalf("GET writer = %d %+v", code, got)
	}

	// Reloaded: the rules in their order, the limit.
	b.do("reload", chromedp.Reload())
	b.ready("role")
	values := eval[string](b, form)
	var fields []string
	if err := json.Unmarshal([]byte(values), &fields); err != nil {
		t.Fatal(err)
	}
	if wantFields := []string{"hide_put", "put_artifact", "", "deny", "", "no_sudo", "console_print", "args.text.contains('sudo')", "deny", "no sudo here",
		"console_print", "5", "1m"}; !slices.Equal(fields, wantFields) {
		t.Errorf("after a reload the form holds %q, want %q", fields, wantFields)
	}
	if b.visible("#no-rules") || b.visible("#no-limits") || b.text("#status") != "" {
		t.Errorf("after a reload: status %q", b.text("#status"))
	}

	// A config role: read-only, each block's line.
	b.route("#/roles/guarded", "role")
	if n := eval[int](b, `document.querySelectorAll('#role-rules input, #role-rules textarea, #role-rules select, #role-limits input, #add-rule, #add-limit').length`); n != 0 {
		t.Errorf("a config role's rules offer %d inputs", n)
	}
	rows := eval[[]string](b, `[...document.querySelectorAll('#rules tbody tr, #limits tbody tr')].map(r => [...r.cells].map(c => c.textContent).join('|'))`)
	if wantRows := []string{
		"1.|no_sudo|console_print|args.text.contains('sudo')|deny|no sudo here|config.hcl:3",
		"2.|ask|every tool|always|approve|—|config.hcl:9",
		"console_print|5|1m|config.hcl:12",
	}; !slices.Equal(rows, wantRows) {
		t.Errorf("guarded's rules and limits = %q, want %q", rows, wantRows)
	}
	if !strings.Contains(b.text("#role-rules"), "Declared in the role block at config.hcl:1") {
		t.Errorf("guarded's rules = %q", b.text("#role-rules"))
	}
	var guarded apiRole
	if code := get(t, srv.URL+"/api/roles/guarded", &guarded); code != 200 || guarded.DeclaredIn == nil ||
		!slices.Equal(guarded.DeclaredIn.Rules, []int{3, 9}) || !slices.Equal(guarded.DeclaredIn.Limits, []int{12}) {
		t.Fatalf("GET guarded = %d, declared in %+v", code, guarded.DeclaredIn)
	}
}
