package rules_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/rules"
)

func TestCodeBounds(t *testing.T) {
	role := rules.CodeBounds{Calls: 5, Timeout: 30 * time.Second}
	cfg := rules.CodeBounds{Calls: 20, Output: 100}
	got := role.Over(cfg).Over(rules.DefaultCodeBounds())
	want := rules.CodeBounds{Steps: 1_000_000, Timeout: 30 * time.Second, Memory: 256 << 20, Calls: 5, Output: 100, Parallel: 4}
	if got != want {
		t.Errorf("Over = %+v, want %+v", got, want)
	}
	b, err := json.Marshal(role)
	if err != nil || string(b) != `{"timeout":"30s","calls":5}` {
		t.Fatalf("JSON %s %v", b, err)
	}
	var back rules.CodeBounds
	if err := json.Unmarshal(b, &back); err != nil || back != role {
		t.Errorf("back from JSON: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"timeout":"soon"}`), &back); err == nil || !strings.Contains(err.Error(), `timeout: "soon" is not a duration`) {
		t.Errorf("a bad timeout: %v", err)
	}
	for body, msg := range map[string]string{
		`{"steps":1.5}`:     "steps: a JSON number 1.5 is not a whole number",
		`{"memory":"1GiB"}`: "memory: a JSON string is not a whole number",
		`{"timeout":30}`:    `timeout: a JSON number is not a duration such as "30s"`,
	} {
		if err := json.Unmarshal([]byte(body), &back); err == nil || err.Error() != msg {
			t.Errorf("%s: %v, want %s", body, err, msg)
		}
	}
	for _, tt := range []struct {
		b   rules.CodeBounds
		msg string
	}{
		{rules.CodeBounds{}, ""},
		{rules.DefaultCodeBounds(), ""},
		{rules.CodeBounds{Steps: rules.MaxCodeSteps, Timeout: time.Hour, Memory: 1 << 40, Calls: rules.MaxCodeCalls, Output: 1 << 40, Parallel: 64}, ""},
		{rules.CodeBounds{Steps: -1}, "steps: -1 is not from 0 (the default) to 1000000000000"},
		{rules.CodeBounds{Steps: 1<<63 - 1}, "steps: 9223372036854775807 is not from 0 (the default) to 1000000000000"},
		{rules.CodeBounds{Timeout: 2 * time.Hour}, "timeout: 2h0m0s is not from 0 (the default) to 1h0m0s"},
		{rules.CodeBounds{Memory: -1}, "memory: -1 is not from 0 (the default) to 1099511627776"},
		{rules.CodeBounds{Memory: 1<<40 + 1}, "memory: 1099511627777 is not from 0 (the default) to 1099511627776"},
		{rules.CodeBounds{Calls: -1}, "calls: -1 is not from 0 (the default) to 1000000"},
		{rules.CodeBounds{Calls: 1_000_001}, "calls: 1000001 is not from 0 (the default) to 1000000"},
		{rules.CodeBounds{Output: -1}, "output: -1 is not from 0 (the default) to 1099511627776"},
		{rules.CodeBounds{Output: 1<<63 - 1}, "output: 9223372036854775807 is not from 0 (the default) to 1099511627776"},
		{rules.CodeBounds{Parallel: 65}, "parallel: 65 is not from 0 (the default) to 64"},
	} {
		err := tt.b.Check()
		if (err == nil) != (tt.msg == "") || err != nil && err.Error() != tt.msg {
			t.Errorf("Check(%+v) = %v, want %q", tt.b, err, tt.msg)
		}
	}
}
