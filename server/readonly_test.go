package server

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
)

// notesGroup has a tool that reads and one that writes, each saying so.
func notesGroup() *sdk.Group {
	run := func(context.Context, *sdk.Request[textArgs]) (*sdk.Result, error) { return sdk.Text("ok"), nil }
	return &sdk.Group{ID: "notes", Description: "The notes group.", Tools: []sdk.Tool{
		sdk.NewTool("get_note", "Read a note.", run, sdk.ReadOnly()),
		sdk.NewTool("add_note", "Add a note.", run, sdk.Destructive()),
	}}
}

// toolNames are the names of a role's tools, sorted.
func toolNames(rt host.ToolList) []string {
	var out []string
	for _, d := range rt.Tools {
		out = append(out, d.Function.Name)
	}
	slices.Sort(out)
	return out
}

// TestRolesAPIReadOnlyTools: readOnlyTools is created, shown and changed
// through the API; a read-only role's tools are its read-only ones, and a
// call of another is refused with tool_not_available, as one outside the
// role is.
func TestRolesAPIReadOnlyTools(t *testing.T) {
	srv, _ := serve(t, &config.Config{}, notesGroup(), group("console", "console_print"))
	var role apiRole
	if code := do(t, "POST", srv.URL+"/api/roles", map[string]any{"name": "reader", "toolGroups": []string{"notes", "console"}, "readOnlyTools": true}, &role); code != 201 || !role.ReadOnlyTools || role.ReadOnly {
		t.Fatalf("create = %d %+v", code, role)
	}
	var tools host.ToolList
	if code := do(t, "GET", srv.URL+"/api/roles/reader/tools", nil, &tools); code != 200 || !slices.Equal(toolNames(tools), []string{"get_note"}) {
		t.Fatalf("tools = %d %v", code, toolNames(tools))
	}
	for _, tool := range []string{"add_note", "console_print"} {
		var e apiError
		if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"role": "reader", "tool": tool, "arguments": map[string]string{"text": "x"}}, &e); code != 403 ||
			e.Error.Code != toolhost.CodeToolNotAvailable || !strings.Contains(e.Error.Message, `"`+tool+`"`) {
			t.Errorf("call %s = %d %+v, want 403 tool_not_available", tool, code, e)
		}
	}
	var res toolhost.Result
	if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"role": "reader", "tool": "get_note", "arguments": map[string]string{"text": "x"}}, &res); code != 200 || !res.OK {
		t.Fatalf("get_note = %d %+v", code, res)
	}

	// Changed alone, it leaves the rest; a value that is not a boolean is
	// refused and changes nothing.
	if code := do(t, "PUT", srv.URL+"/api/roles/reader", `{"readOnlyTools":false}`, &role); code != 200 || role.ReadOnlyTools || len(role.ToolGroups) != 2 {
		t.Fatalf("update = %d %+v", code, role)
	}
	if do(t, "GET", srv.URL+"/api/roles/reader/tools", nil, &tools); !slices.Equal(toolNames(tools), []string{"add_note", "console_print", "get_note"}) {
		t.Fatalf("tools after read_only off = %v", toolNames(tools))
	}
	var e apiError
	if code := do(t, "PUT", srv.URL+"/api/roles/reader", `{"readOnlyTools":"yes"}`, &e); code != 400 || e.Error.Code != toolhost.CodeValidation || !strings.Contains(e.Error.Message, "readOnlyTools:") {
		t.Fatalf("not a boolean = %d %+v", code, e)
	}
	if code := do(t, "GET", srv.URL+"/api/roles/reader", nil, &role); code != 200 || role.ReadOnlyTools {
		t.Fatalf("after the refusal = %d %+v", code, role)
	}
}

// TestUIReadsOnly: the role page's "reads only" box is saved as the role's
// readOnlyTools, the cost card then shows what an agent of it has, the box
// is still ticked after a reload, and the roles list marks the role; a
// config role's box is disabled.
func TestUIReadsOnly(t *testing.T) {
	srv, h := uiHost(t, &config.Config{})
	b := newBrowser(t, srv.URL)
	b.open("#/roles/writer", "role")
	if eval[bool](b, `document.querySelector('#reads-only').checked`) {
		t.Fatal("reads only is ticked for a role that writes")
	}
	b.click("#reads-only")
	b.wait("unsaved", `document.querySelector('#status').textContent === 'Unsaved changes'`)
	b.click("#save")
	b.wait("saved", `document.querySelector('#status').textContent === 'Saved'`)
	if r, _ := h.Roles().Get("writer"); !r.ReadOnlyTools || !slices.Equal(r.ToolGroups, []string{"console"}) {
		t.Fatalf("stored role = %+v", r)
	}
	if !strings.Contains(b.text("#current-groups"), "reads only") {
		t.Errorf("current groups = %q", b.text("#current-groups"))
	}
	b.wait("what an agent of it starts with", `(e => !e.hidden && e.textContent.includes('(as saved: reads only)'))(document.querySelector('#eager'))`)
	b.do("reload", chromedp.Reload())
	b.ready("role")
	if !eval[bool](b, `document.querySelector('#reads-only').checked`) {
		t.Fatal("after reload reads only is not ticked")
	}
	b.route("#/roles", "roles")
	if row := b.text(`tr[data-role="writer"]`); !strings.Contains(row, "reads only") {
		t.Errorf("writer row = %q", row)
	}
	if row := b.text(`tr[data-role="declared"]`); strings.Contains(row, "reads only") {
		t.Errorf("declared row = %q", row)
	}
	b.route("#/roles/declared", "role")
	b.wait("the declared page", `document.querySelector('#main h1').textContent.startsWith('declared')`)
	if !eval[bool](b, `document.querySelector('#reads-only').disabled`) {
		t.Error("a config role's reads-only box is enabled")
	}
}
