package model

import (
	"regexp"
	"testing"
)

// FuzzParseReply: whatever a model replies, parsing it never panics, and a
// reply understood is either tool calls, each named, or an answer.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		`{"tool_calls": [{"name": "a", "arguments": {"x": 1}}], "final_answer": ""}`,
		"```json\n{\"tool_calls\": [], \"final_answer\": \"done\"}\n```",
		`prose {"tool_calls": [{"name": "b", "arguments": "{\"y\": 2}"}]} more prose`,
		`{"final_answer": null}`, `}{`, `{"tool_calls": [{"arguments": 3}]}`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		msg, err := parseReply(content, 1)
		if err != nil {
			return
		}
		for _, c := range msg.ToolCalls {
			if c.Name == "" || c.ID == "" {
				t.Fatalf("call without a name or id: %+v", c)
			}
		}
		if len(msg.ToolCalls) > 0 && msg.Content != "" {
			t.Fatalf("both calls and an answer: %+v", msg)
		}
	})
}

// positionRE is the file:line,col every script load error starts with.
var positionRE = regexp.MustCompile(`^model: scripted: s\.json:\d+,\d+: `)

// FuzzParseScript: a script that does not load says where the problem is.
func FuzzParseScript(f *testing.F) {
	for _, s := range []string{
		`{"roles": {"r": [{"final_answer": "{{.Task}}"}]}}`,
		`{"roles": {"r": [{"tool_calls": [{"name": "x", "arguments": {"a": "{{.Last}}"}}], "repeat": -1}]}, "summary": "{{.Count}}"}`,
		`{"roles": {"r": [{"repeat": 0}]}}`, `{"roles": {"r": [{"final_answer": "{{.Nope}}"}]}}`, `{"roles": [`, `[]`, `{"roles": {"r": [{"x": 1}]}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		_, err := parseScript([]byte(src), "s.json")
		if err != nil && !positionRE.MatchString(err.Error()) {
			t.Fatalf("error without a position: %v", err)
		}
	})
}
