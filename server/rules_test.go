package server

import (
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
)

// TestRolesAPIRules: rules and limits are created, returned and replaced
// through the API; a rule whose condition does not compile is refused with
// 400 validation naming the rule, and the role is left as it was.
func TestRolesAPIRules(t *testing.T) {
	srv := apiServer(t)
	var role apiRole
	body := map[string]any{"name": "dev", "toolGroups": []string{"console"},
		"rules":  []map[string]any{{"name": "no_sudo", "tools": []string{"group:console"}, "when": "args.text.contains('sudo')", "action": "deny", "reason": "no sudo here"}},
		"limits": []map[string]any{{"target": "*", "calls": 5, "per": "1m"}}}
	if code := do(t, "POST", srv.URL+"/api/roles", body, &role); code != 201 || len(role.Rules) != 1 || role.Rules[0].Reason != "no sudo here" ||
		len(role.Limits) != 1 || role.Limits[0].Per.String() != "1m0s" {
		t.Fatalf("create = %d %+v", code, role)
	}
	var e apiError
	bad := map[string]any{"rules": []map[string]any{{"name": "ok", "action": "allow"}, {"name": "broken", "when": "args.text.contains(", "action": "deny"}}}
	if code := do(t, "PUT", srv.URL+"/api/roles/dev", bad, &e); code != 400 || e.Error.Code != toolhost.CodeValidation ||
		!strings.Contains(e.Error.Message, `rules[1] "broken": when:`) {
		t.Fatalf("bad rule = %d %+v", code, e)
	}
	if code := do(t, "GET", srv.URL+"/api/roles/dev", nil, &role); code != 200 || len(role.Rules) != 1 || role.Rules[0].Name != "no_sudo" {
		t.Fatalf("after the refused update = %d %+v", code, role.Rules)
	}
	var cleared apiRole
	if code := do(t, "PUT", srv.URL+"/api/roles/dev", map[string]any{"rules": nil, "limits": []any{}}, &cleared); code != 200 || len(cleared.Rules) != 0 || len(cleared.Limits) != 0 {
		t.Fatalf("cleared = %d %+v", code, cleared)
	}
}

// TestRolesAPICode: a role's code bounds are created, returned and
// replaced through the API, a duration as a string; a bound out of range
// is refused with 400 validation naming it, and the role is left as it
// was; null goes back to the config's.
func TestRolesAPICode(t *testing.T) {
	srv := apiServer(t)
	var role apiRole
	body := map[string]any{"name": "scripter", "toolGroups": []string{"console"}, "code": map[string]any{"calls": 5, "timeout": "30s"}}
	if code := do(t, "POST", srv.URL+"/api/roles", body, &role); code != 201 || role.Code.Calls != 5 || role.Code.Timeout.String() != "30s" {
		t.Fatalf("create = %d %+v", code, role.Code)
	}
	var e apiError
	for _, bad := range []map[string]any{{"parallel": 100}, {"timeout": "2h"}, {"timeout": "soon"}} {
		if code := do(t, "PUT", srv.URL+"/api/roles/scripter", map[string]any{"code": bad}, &e); code != 400 || e.Error.Code != toolhost.CodeValidation || !strings.Contains(e.Error.Message, "code: ") {
			t.Errorf("%v = %d %+v", bad, code, e)
		}
	}
	if code := do(t, "GET", srv.URL+"/api/roles/scripter", nil, &role); code != 200 || role.Code.Calls != 5 || role.Code.Parallel != 0 {
		t.Fatalf("after the refused updates = %d %+v", code, role.Code)
	}
	var cleared apiRole
	if code := do(t, "PUT", srv.URL+"/api/roles/scripter", map[string]any{"code": nil}, &cleared); code != 200 || cleared.Code.Calls != 0 || cleared.Code.Timeout != 0 {
		t.Fatalf("cleared = %d %+v", code, cleared.Code)
	}
}
