package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
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
	var role RoleJSON
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
	var roles []RoleJSON
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
	var tools host.RoleTools
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
