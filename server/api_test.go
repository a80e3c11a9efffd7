package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

type textArgs struct {
	Text string `json:"text"`
}

func group(id string, tools ...string) *sdk.Group {
	g := &sdk.Group{ID: id, Description: "The " + id + " group."}
	for _, name := range tools {
		g.Tools = append(g.Tools, sdk.NewTool(name, "Tool "+name+".", func(_ context.Context, r *sdk.Request[textArgs]) (*sdk.Result, error) {
			return sdk.Text(name + ":" + r.Args.Text), nil
		}))
	}
	return g
}

// apiServer serves a host with two in-process groups and a config role.
func apiServer(t *testing.T) *httptest.Server {
	srv, _ := serve(t, &config.Config{Roles: []config.Role{{Name: "declared", ToolGroups: []string{"console"}, Pos: "config.hcl:1,1"}}},
		group("console", "console_print"), group("artifact", "put_artifact", "get_artifact"))
	return srv
}

// do sends a request with a JSON body (nil for none) and decodes the answer
// into v (nil to skip); it returns the status.
func do(t *testing.T, method, url string, body any, v any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.(string)
		if !ok {
			raw, _ := json.Marshal(body)
			b = string(raw)
		}
		rd = strings.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s %s: %d: %v", method, url, resp.StatusCode, err)
		}
	}
	return resp.StatusCode
}

type apiError struct {
	Error toolhost.ErrorInfo `json:"error"`
}

func TestRolesAPI(t *testing.T) {
	srv := apiServer(t)
	var role apiRole
	if code := do(t, "POST", srv.URL+"/api/roles", map[string]any{"name": "writer", "description": "Writes.", "prompt": "Write.", "toolGroups": []string{"console"}}, &role); code != 201 {
		t.Fatalf("create = %d", code)
	}
	if role.Name != "writer" || role.Source != "store" || role.ReadOnly || role.CreatedBy != "api" || len(role.ToolGroups) != 1 {
		t.Fatalf("created %+v", role)
	}
	var e apiError
	if code := do(t, "POST", srv.URL+"/api/roles", map[string]any{"name": "writer"}, &e); code != 400 || e.Error.Code != toolhost.CodeValidation {
		t.Fatalf("duplicate = %d %+v", code, e)
	}
	if code := do(t, "POST", srv.URL+"/api/roles", map[string]any{"name": "x", "toolGroups": []string{"nope"}}, &e); code != 400 || !strings.Contains(e.Error.Message, "unknown tool group(s) nope") {
		t.Fatalf("unknown group = %d %+v", code, e)
	}
	// PUT with toolGroups alone changes only them; null clears them.
	if code := do(t, "PUT", srv.URL+"/api/roles/writer", `{"toolGroups":["artifact","console"]}`, &role); code != 200 || len(role.ToolGroups) != 2 || role.Prompt != "Write." {
		t.Fatalf("set groups = %d %+v", code, role)
	}
	if code := do(t, "PUT", srv.URL+"/api/roles/writer", `{"toolGroups":null}`, &role); code != 200 || role.ToolGroups != nil {
		t.Fatalf("clear groups = %d %+v", code, role)
	}
	if code := do(t, "PUT", srv.URL+"/api/roles/writer", `{"name":"other"}`, &e); code != 400 || !strings.Contains(e.Error.Message, "name: not a field") {
		t.Fatalf("rename = %d %+v", code, e)
	}
	for _, name := range []string{"root", "declared"} {
		if code := do(t, "PUT", srv.URL+"/api/roles/"+name, `{"toolGroups":["console"]}`, &e); code != 403 || e.Error.Code != toolhost.CodePolicy || !strings.Contains(e.Error.Message, "read-only") {
			t.Fatalf("edit %s = %d %+v", name, code, e)
		}
	}
	var roles []apiRole
	do(t, "GET", srv.URL+"/api/roles", nil, &roles)
	if len(roles) != 3 || roles[0].Name != "root" || !roles[0].ReadOnly || roles[0].ReadOnlyReason == "" || roles[1].Source != "config" {
		t.Fatalf("roles = %+v", roles)
	}
	if code := do(t, "DELETE", srv.URL+"/api/roles/writer", nil, nil); code != 204 {
		t.Fatalf("delete = %d", code)
	}
	if code := do(t, "GET", srv.URL+"/api/roles/writer", nil, &e); code != 404 || e.Error.Code != toolhost.CodeValidation {
		t.Fatalf("get deleted = %d %+v", code, e)
	}
}

func TestRoleToolsAndCallAPI(t *testing.T) {
	srv := apiServer(t)
	var tools host.ToolList
	if code := do(t, "GET", srv.URL+"/api/roles/declared/tools", nil, &tools); code != 200 {
		t.Fatalf("tools = %d", code)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Function.Name != "console_print" || tools.Tools[0].Type != "function" ||
		tools.Meta["console_print"].Group != "console" || tools.Tokens <= 0 || tools.AllTokens <= tools.Tokens {
		t.Fatalf("tools = %+v", tools)
	}
	var res toolhost.Result
	if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"role": "declared", "tool": "console_print", "arguments": map[string]string{"text": "hi"}}, &res); code != 200 || !res.OK || res.Stdout != "console_print:hi" {
		t.Fatalf("call = %d %+v", code, res)
	}
	var invalid apiError
	if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"role": "declared", "tool": "console_print", "arguments": map[string]any{"text": 1}}, &invalid); code != 400 ||
		invalid.Error.Code != toolhost.CodeValidation || !strings.Contains(invalid.Error.Message, "field text") {
		t.Fatalf("invalid arguments = %d %+v", code, invalid)
	}
	cases := []struct {
		body any
		code int
		want toolhost.Code
	}{
		{map[string]any{"role": "declared", "tool": "get_artifact"}, 403, toolhost.CodeToolNotAvailable},
		{map[string]any{"role": "declared", "tool": "nope"}, 404, toolhost.CodeUnknownTool},
		{map[string]any{"role": "ghost", "tool": "console_print"}, 404, toolhost.CodeValidation},
		{map[string]any{"role": "declared"}, 400, toolhost.CodeValidation},
		{`{"role": `, 400, toolhost.CodeValidation},
		{`{"tool":"console_print","arguments":{"text":"` + strings.Repeat("x", maxCallBody) + `"}}`, 413, toolhost.CodeValidation},
	}
	for _, c := range cases {
		var e apiError
		if code := do(t, "POST", srv.URL+"/api/call", c.body, &e); code != c.code || e.Error.Code != c.want {
			t.Errorf("call %.60v = %d %+v, want %d %s", c.body, code, e, c.code, c.want)
		}
	}
	var diags []host.Diagnostic
	if code := do(t, "GET", srv.URL+"/api/diagnostics", nil, &diags); code != 200 || diags == nil {
		t.Fatalf("diagnostics = %d %v", code, diags)
	}
}

// TestRolesAPIDeferred: deferredGroups is created, shown, changed and
// cleared through the API; a deferred group that is not one of the role's
// groups is refused with validation, and the role is left as it was.
func TestRolesAPIDeferred(t *testing.T) {
	srv := apiServer(t)
	var role apiRole
	if code := do(t, "POST", srv.URL+"/api/roles", map[string]any{"name": "lazy", "toolGroups": []string{"artifact", "console"}, "deferredGroups": []string{"artifact"}}, &role); code != 201 ||
		!slices.Equal(role.Deferred, []string{"artifact"}) {
		t.Fatalf("create = %d %+v", code, role)
	}
	if code := do(t, "GET", srv.URL+"/api/roles/lazy", nil, &role); code != 200 || !slices.Equal(role.Deferred, []string{"artifact"}) {
		t.Fatalf("get = %d %+v", code, role)
	}
	var tools host.ToolList
	if code := do(t, "GET", srv.URL+"/api/roles/lazy/tools", nil, &tools); code != 200 ||
		!slices.Equal(slices.Sorted(slices.Values(tools.Deferred)), []string{"get_artifact", "put_artifact"}) || tools.EagerTokens <= 0 || tools.EagerTokens >= tools.Tokens {
		t.Fatalf("tools = %d deferred %v eager %d of %d tokens", code, tools.Deferred, tools.EagerTokens, tools.Tokens)
	}

	refused := []struct {
		name, method, path, body, message string
	}{
		{"create: not among toolGroups", "POST", "/api/roles", `{"name":"other","toolGroups":["console"],"deferredGroups":["artifact"]}`, `deferred group "artifact" is not one of the role's tool groups`},
		{"create: unknown group", "POST", "/api/roles", `{"name":"other","deferredGroups":["nope"]}`, "unknown tool group(s) nope"},
		{"update: not among toolGroups", "PUT", "/api/roles/lazy", `{"toolGroups":["console"],"deferredGroups":["artifact"]}`, `deferred group "artifact" is not one of the role's tool groups`},
		{"update: groups dropped, deferred kept", "PUT", "/api/roles/lazy", `{"toolGroups":["console"]}`, `deferred group "artifact" is not one of the role's tool groups`},
		{"update: tool_search", "PUT", "/api/roles/lazy", `{"deferredGroups":["tool_search"]}`, "tool_search"},
		{"update: not a list", "PUT", "/api/roles/lazy", `{"deferredGroups":"artifact"}`, "deferredGroups:"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			var e apiError
			if code := do(t, c.method, srv.URL+c.path, c.body, &e); code != 400 || e.Error.Code != toolhost.CodeValidation || !strings.Contains(e.Error.Message, c.message) {
				t.Errorf("%s %s %s = %d %+v, want 400 validation %q", c.method, c.path, c.body, code, e, c.message)
			}
			var role apiRole
			if code := do(t, "GET", srv.URL+"/api/roles/lazy", nil, &role); code != 200 || len(role.ToolGroups) != 2 || !slices.Equal(role.Deferred, []string{"artifact"}) {
				t.Errorf("after the refusal: %d %+v", code, role)
			}
		})
	}
	if code := do(t, "GET", srv.URL+"/api/roles/other", nil, nil); code != 404 {
		t.Errorf("a refused create stored role other: %d", code)
	}

	// PUT with deferredGroups alone changes only them; [] and null clear them.
	if code := do(t, "PUT", srv.URL+"/api/roles/lazy", `{"deferredGroups":["console","artifact"]}`, &role); code != 200 ||
		!slices.Equal(role.Deferred, []string{"console", "artifact"}) || len(role.ToolGroups) != 2 {
		t.Fatalf("set deferred = %d %+v", code, role)
	}
	for _, clear := range []string{`[]`, `null`} {
		role = apiRole{} // an empty deferredGroups is left out of the answer
		if code := do(t, "PUT", srv.URL+"/api/roles/lazy", `{"deferredGroups":`+clear+`}`, &role); code != 200 || len(role.Deferred) != 0 || len(role.ToolGroups) != 2 {
			t.Fatalf("clear deferred with %s = %d %+v", clear, code, role)
		}
	}
	// A role of every group may defer any of them.
	if code := do(t, "PUT", srv.URL+"/api/roles/lazy", `{"toolGroups":null,"deferredGroups":["artifact"]}`, &role); code != 200 ||
		role.ToolGroups != nil || !slices.Equal(role.Deferred, []string{"artifact"}) {
		t.Fatalf("every group, one deferred = %d %+v", code, role)
	}
	var e apiError
	if code := do(t, "PUT", srv.URL+"/api/roles/declared", `{"deferredGroups":["console"]}`, &e); code != 403 || e.Error.Code != toolhost.CodePolicy {
		t.Errorf("defer in a config role = %d %+v", code, e)
	}
}

// TestCreateRoleRefused: a new role with a taken or invalid name, or groups
// no module provides, is refused with validation, the message starting with
// the body's field at fault, and nothing is stored.
func TestCreateRoleRefused(t *testing.T) {
	srv := apiServer(t)
	var before []apiRole
	do(t, "GET", srv.URL+"/api/roles", nil, &before)
	for _, c := range []struct {
		name, body, field, message string
	}{
		{"a config role's name", `{"name":"declared"}`, "name", `a role named "declared" already exists`},
		{"root's name", `{"name":"root","toolGroups":["console"]}`, "name", `a role named "root" already exists`},
		{"no name", `{"toolGroups":["console"]}`, "name", `role name "": must start with a letter or digit`},
		{"a space", `{"name":"bad name"}`, "name", `role name "bad name"`},
		{"a path", `{"name":"../x"}`, "name", `role name "../x"`},
		{"a slash", `{"name":"a/b"}`, "name", `role name "a/b"`},
		{"65 characters", `{"name":"` + strings.Repeat("r", 65) + `"}`, "name", "up to 63"},
		{"an unknown group", `{"name":"new","toolGroups":["console","nope"]}`, "toolGroups", "unknown tool group(s) nope; the groups are: artifact, console"},
		{"an unknown deferred group", `{"name":"new","deferredGroups":["nope"]}`, "deferredGroups", "unknown tool group(s) nope"},
		{"a deferred group not the role's", `{"name":"new","toolGroups":["console"],"deferredGroups":["artifact"]}`, "deferredGroups", `deferred group "artifact" is not one of the role's tool groups`},
		{"groups not a list", `{"name":"new","toolGroups":"console"}`, "request body", `field "toolGroups": a JSON string cannot be a []string`},
		{"an unknown field", `{"name":"new","groups":["console"]}`, "request body", `unknown field "groups"`},
		{"an unknown field of code", `{"name":"new","code":{"bogus":1}}`, "request body", `code: unknown field "bogus"`},
		{"an output bound above the config's most", `{"name":"new","code":{"output":9223372036854775807}}`, "code", `output: 9223372036854775807 is not from 0 (the default) to 1099511627776`},
		{"a memory bound above the config's most", `{"name":"new","code":{"memory":1099511627777}}`, "code", `memory: 1099511627777 is not from 0 (the default) to 1099511627776`},
		{"a steps bound a browser cannot hold", `{"name":"new","code":{"steps":9007199254740993}}`, "code", `steps: 9007199254740993 is not from 0 (the default) to 1000000000000`},
		{"a field of code spelled otherwise", `{"name":"new","code":{"calls":5,"Calls":7,"CALLS":9}}`, "request body", `code: unknown field "CALLS"`},
		{"an unknown field of a limit", `{"name":"new","limits":[{"target":"*","calls":1,"per":"1m","bogus":2}]}`, "request body", `limit: unknown field "bogus"`},
		{"a field of a limit spelled otherwise", `{"name":"new","limits":[{"target":"*","Calls":1,"per":"1m"}]}`, "request body", `limit: unknown field "Calls"`},
		{"an unknown field of a rule", `{"name":"new","rules":[{"name":"r","action":"deny","bogus":1}]}`, "request body", `rule: unknown field "bogus"`},
		{"a field of a rule spelled otherwise", `{"name":"new","rules":[{"name":"r","Action":"deny"}]}`, "request body", `rule: unknown field "Action"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e apiError
			if code := do(t, "POST", srv.URL+"/api/roles", c.body, &e); code != 400 || e.Error.Code != toolhost.CodeValidation ||
				!strings.HasPrefix(e.Error.Message, c.field+": ") || !strings.Contains(e.Error.Message, c.message) {
				t.Errorf("POST /api/roles %s = %d %+v, want 400 validation %q naming %s", c.body, code, e, c.message, c.field)
			}
		})
	}
	var after []apiRole
	if do(t, "GET", srv.URL+"/api/roles", nil, &after); !reflect.DeepEqual(after, before) {
		t.Errorf("the roles changed:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestRoleDeclaredIn: a config role names the file and line of its block,
// and says that a restart takes the file's changes; root is built in; a
// role made at run time is neither.
func TestRoleDeclaredIn(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.hcl")
	src := fmt.Sprintf("data_dir = %q\n\nrole \"developer\" {\n  tool_groups = [\"console\"]\n}\n\nrole \"reader\" {}\n", filepath.Join(dir, "data"))
	cfg, err := config.Parse([]byte(src), file, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, h := serve(t, cfg, group("console", "console_print"))
	if _, err := h.Roles().Create(context.Background(), host.RoleSpec{Name: "made"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		source store.Source
		line   int
	}{"developer": {store.SourceConfig, 3}, "reader": {store.SourceConfig, 7}} {
		var r apiRole
		if code := do(t, "GET", srv.URL+"/api/roles/"+name, nil, &r); code != 200 || r.Source != want.source || !r.ReadOnly || r.BuiltIn ||
			r.DeclaredIn == nil || r.DeclaredIn.File != file || r.DeclaredIn.Line != want.line {
			t.Fatalf("GET %s = %d %+v (declared in %+v)", name, code, r, r.DeclaredIn)
		}
		at := fmt.Sprintf("%s:%d", file, want.line)
		if !strings.Contains(r.ReadOnlyReason, at) || !strings.Contains(r.ReadOnlyReason, "restart toolhost serve") {
			t.Errorf("%s: reason %q, want %s and the restart", name, r.ReadOnlyReason, at)
		}
		for _, req := range []struct {
			method string
			body   any
		}{{"PUT", `{"description":"x"}`}, {"DELETE", nil}} {
			var e apiError
			if code := do(t, req.method, srv.URL+"/api/roles/"+name, req.body, &e); code != 403 ||
				e.Error.Code != toolhost.CodePolicy || !strings.Contains(e.Error.Message, at) {
				t.Errorf("%s %s = %d %+v, want 403 policy naming %s", req.method, name, code, e, at)
			}
		}
	}
	var root, made apiRole
	if do(t, "GET", srv.URL+"/api/roles/root", nil, &root); !root.BuiltIn || !root.ReadOnly || root.DeclaredIn != nil || !strings.Contains(root.ReadOnlyReason, "built in") {
		t.Errorf("root = %+v", root)
	}
	if do(t, "GET", srv.URL+"/api/roles/made", nil, &made); made.BuiltIn || made.ReadOnly || made.DeclaredIn != nil || made.ReadOnlyReason != "" {
		t.Errorf("made = %+v", made)
	}
}
