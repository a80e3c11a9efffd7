package redact

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestValue(t *testing.T) {
	in := map[string]any{
		"tool": "bash",
		"arguments": map[string]any{
			"cmd": "curl -H 'Authorization: Bearer abcdefgh12345678' https://api.example.com",
			"env": []any{"A=1", "GITHUB_TOKEN=" + githubPAT},
		},
		"api_key":  "plain-looking",
		"password": "",
		"Token":    mask,
		"headers":  map[string]any{"Authorization": "Basic Y2k6aHVudGVy", "X-Api-Key": "k-123", "Accept": "*/*"},
		"results":  []any{map[string]any{"client_secret": "s3cr3t", "id": "c-1"}, 3.5, true, nil, json.Number("12345678901234567890")},
		"token":    42.0, // not a string: kept
		"keys":     []any{"sort", "key"},
	}
	want := map[string]any{
		"tool": "bash",
		"arguments": map[string]any{
			"cmd": "curl -H 'Authorization: Bearer ***REDACTED***' https://api.example.com",
			"env": []any{"A=1", "GITHUB_TOKEN=***REDACTED***"},
		},
		"api_key":  mask,
		"password": "",
		"Token":    mask,
		"headers":  map[string]any{"Authorization": mask, "X-Api-Key": mask, "Accept": "*/*"},
		"results":  []any{map[string]any{"client_secret": mask, "id": "c-1"}, 3.5, true, nil, json.Number("12345678901234567890")},
		"token":    42.0,
		"keys":     []any{"sort", "key"},
	}
	got, changed := Value(in)
	if !changed || !reflect.DeepEqual(got, want) {
		t.Fatalf("Value = %#v, %v\nwant %#v", got, changed, want)
	}
	if in["api_key"] != "plain-looking" || in["arguments"].(map[string]any)["env"].([]any)[1] != "GITHUB_TOKEN="+githubPAT {
		t.Errorf("Value changed its argument: %#v", in)
	}
	got.(map[string]any)["results"].([]any)[1] = "changed"
	if in["results"].([]any)[1] != 3.5 {
		t.Errorf("Value returned the argument's slice, not a copy")
	}
	if again, changed := Value(got); changed || !reflect.DeepEqual(again, got) {
		t.Errorf("not idempotent: Value(%#v) = %#v, %v", got, again, changed)
	}
}

func TestValueKeepsOtherValues(t *testing.T) {
	for _, v := range []any{nil, true, 3.5, json.Number("1e400"), 7, map[string]string{"token": "t"}} {
		got, changed := Value(v)
		if changed || !reflect.DeepEqual(got, v) {
			t.Errorf("Value(%#v) = %#v, %v", v, got, changed)
		}
	}
	got, changed := Value(map[string]any{"user": "bob", "list": []any{}})
	if changed || !reflect.DeepEqual(got, map[string]any{"user": "bob", "list": []any{}}) {
		t.Errorf("Value changed a map without secrets: %#v, %v", got, changed)
	}
}

func TestValueRedactsKeys(t *testing.T) {
	// Both keys become the mask; the entry of the key that sorts first
	// (ghp_ before ghs_) stays, whatever the order of iteration.
	in := map[string]any{githubApp: "b", githubPAT: "a", "name": "n"}
	mixed := map[string]any{githubPAT: "dropped", mask: "kept"}
	for range 20 {
		if got, changed := Value(in); !changed || !reflect.DeepEqual(got, map[string]any{mask: "a", "name": "n"}) {
			t.Fatalf("Value(%v) = %v, %v", in, got, changed)
		}
		if got, changed := Value(mixed); !changed || !reflect.DeepEqual(got, map[string]any{mask: "kept"}) {
			t.Fatalf("Value(%v) = %v, %v", mixed, got, changed)
		}
	}
}

func TestJSON(t *testing.T) {
	cases := []struct {
		name, in, want string
		changed        bool
	}{
		{"secrets are redacted and the document re-encoded",
			`{"tool": "bash", "arguments": {"cmd": "export OPENAI_API_KEY=` + openAIKey + ` && run <x> & y"}, "password": "hunter2", "n": 12345678901234567890, "f": 1.50}`,
			`{"arguments":{"cmd":"export OPENAI_API_KEY=***REDACTED*** && run <x> & y"},"f":1.50,"n":12345678901234567890,"password":"***REDACTED***","tool":"bash"}`, true},
		{"nested arrays", `[[{"secret": "x"}], ["` + jwtToken + `"], 1, true, null]`, `[[{"secret":"***REDACTED***"}],["***REDACTED***"],1,true,null]`, true},
		{"a document without secrets is returned as it is", "{\n  \"user\": \"bob\",\n  \"n\": 1.0\n}", "{\n  \"user\": \"bob\",\n  \"n\": 1.0\n}", false},
		{"escapes are decoded first", `{"tok\u0065n": "abc", "cmd": "ghp_\u0061BcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"}`, `{"cmd":"***REDACTED***","token":"***REDACTED***"}`, true},
		{"a top-level string", `"Bearer abcdefgh12345678"`, `"Bearer ***REDACTED***"`, true},
		{"invalid JSON is redacted as text", `{"password": "hunter2", oops}`, `{"password": "***REDACTED***", oops}`, true},
		{"trailing data makes it invalid", `{"a": 1} {"token": "t0k3n"}`, `{"a": 1} {"token": "***REDACTED***"}`, true},
		{"invalid JSON without secrets", `{"a": `, `{"a": `, false},
		{"empty", ``, ``, false},
		{"a document without strings", ` [ {}, 1.50, true, null, [] ] `, ` [ {}, 1.50, true, null, [] ] `, false},
		{"invalid text without quotes is still redacted as text", `{token=t0k3n}`, `{token=***REDACTED***}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := JSON([]byte(tc.in))
			if string(got) != tc.want || changed != tc.changed {
				t.Errorf("JSON(%s)\n got %s, %v\nwant %s, %v", tc.in, got, changed, tc.want, tc.changed)
			}
			if again, changed := JSON(got); string(again) != string(got) || changed {
				t.Errorf("not idempotent: JSON(%s) = %s, %v", got, again, changed)
			}
		})
	}
}

// TestJSONWithoutStringsDoesNotAllocate: most calls' arguments are "{}",
// which is checked, not decoded, before its call's started event is written.
func TestJSONWithoutStringsDoesNotAllocate(t *testing.T) {
	for _, doc := range [][]byte{[]byte(`{}`), []byte(`[1, 2.5, true, null, {}]`)} {
		if n := testing.AllocsPerRun(10, func() { JSON(doc) }); n != 0 {
			t.Errorf("JSON(%s) allocates %v times", doc, n)
		}
	}
}
