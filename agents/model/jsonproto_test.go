package model

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// fakeProvider records the request it gets and answers with resp, err.
type fakeProvider struct {
	got  *Request
	resp *Response
	err  error
}

func (f *fakeProvider) Complete(_ context.Context, req *Request) (*Response, error) {
	f.got = req
	return f.resp, f.err
}

func TestJSONProtocolRequest(t *testing.T) {
	req := &Request{
		Purpose: PurposeTurn,
		Agent:   Agent{ID: "a1", Role: "root", Turn: 3},
		System:  "Be brief.",
		Messages: []Message{
			{Role: RoleUser, Content: "write a.txt"},
			{Role: RoleAssistant, Content: "thinking", ToolCalls: []ToolCall{
				{ID: "c1", Name: "write_file", Arguments: `{"path": "a.txt"}`},
				{ID: "c2", Name: "ls", Arguments: `not json`},
			}},
			{Role: RoleTool, ToolCallID: "c1", Name: "write_file", Content: `{"ok":true}`},
			{Role: RoleTool, ToolCallID: "c2", Name: "ls", Content: "bad arguments"},
			{Role: RoleAssistant, Content: "Done."},
		},
		Tools: []Tool{
			{Name: "write_file", Description: "Writes a file.", Parameters: json.RawMessage(`{"type": "object",
				"properties": {"path": {"type": "string"}}}`)},
			{Name: "ls", Description: "Lists."},
		},
	}
	wantSystem := "Be brief.\n\n" + protocolInstruction + `

Tools:
- name: write_file
  description: Writes a file.
  parameters: {"type":"object","properties":{"path":{"type":"string"}}}
- name: ls
  description: Lists.
  parameters: {"type":"object"}`
	wantMessages := []Message{
		{Role: RoleUser, Content: "write a.txt"},
		{Role: RoleAssistant, Content: `{"tool_calls":[{"name":"write_file","arguments":{"path":"a.txt"}},{"name":"ls","arguments":"not json"}],"final_answer":""}`},
		{Role: RoleUser, Content: "Result of write_file (call c1):\n{\"ok\":true}"},
		{Role: RoleUser, Content: "Result of ls (call c2):\nbad arguments"},
		{Role: RoleAssistant, Content: "Done."},
	}
	tests := []struct {
		name       string
		system     string
		tools      []Tool
		wantSystem string
	}{
		{name: "system and tools", system: req.System, tools: req.Tools, wantSystem: wantSystem},
		{name: "no system, no tools", wantSystem: protocolInstruction + "\n\nYou have no tools: always finish with final_answer."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := *req
			in.System, in.Tools = tt.system, tt.tools
			inner := &fakeProvider{resp: &Response{Message: Message{Role: RoleAssistant, Content: `{"tool_calls":[],"final_answer":"ok"}`}}}
			if _, err := JSONProtocol(inner).Complete(context.Background(), &in); err != nil {
				t.Fatal(err)
			}
			if inner.got.System != tt.wantSystem {
				t.Errorf("system:\n%s\nwant:\n%s", inner.got.System, tt.wantSystem)
			}
			if inner.got.Tools != nil {
				t.Errorf("tools sent: %v", inner.got.Tools)
			}
			if inner.got.Agent != req.Agent || inner.got.Purpose != PurposeTurn {
				t.Errorf("agent, purpose = %+v, %q", inner.got.Agent, inner.got.Purpose)
			}
			if !reflect.DeepEqual(inner.got.Messages, wantMessages) {
				t.Errorf("messages:\n%q\nwant:\n%q", inner.got.Messages, wantMessages)
			}
			if len(in.Messages[1].ToolCalls) != 2 {
				t.Error("the caller's messages were changed")
			}
		})
	}
}

func TestJSONProtocolReply(t *testing.T) {
	usage := Usage{PromptTokens: 50, CompletionTokens: 7}
	call := func(i int, name, args string) ToolCall {
		return ToolCall{ID: "call_4_" + strconv.Itoa(i), Name: name, Arguments: args}
	}
	const invalid = "reply is not the JSON object {tool_calls, final_answer}: "
	tests := []struct {
		name        string
		content     string
		native      []ToolCall
		want        Message
		wantInvalid string // a prefix; empty: valid
	}{
		{
			name:    "tool calls",
			content: `{"tool_calls":[{"name":"read_file","arguments":{"path":"a"}},{"name":"ls"}],"final_answer":""}`,
			want:    Message{Role: RoleAssistant, ToolCalls: []ToolCall{call(1, "read_file", `{"path":"a"}`), call(2, "ls", "{}")}},
		},
		{
			name:    "json fence",
			content: "```json\n{\"tool_calls\":[{\"name\":\"ls\",\"arguments\":{}}],\"final_answer\":\"\"}\n```",
			want:    Message{Role: RoleAssistant, ToolCalls: []ToolCall{call(1, "ls", "{}")}},
		},
		{
			name:    "bare fence",
			content: "  ```\n{\"tool_calls\":[],\"final_answer\":\"42\"}\n```  ",
			want:    Message{Role: RoleAssistant, Content: "42"},
		},
		{
			name:    "prose around",
			content: "Sure! Here is my reply:\n{\"tool_calls\": [], \"final_answer\": \"The answer is {x}.\"}\nHope it helps.",
			want:    Message{Role: RoleAssistant, Content: "The answer is {x}."},
		},
		{
			name:    "string arguments",
			content: `{"tool_calls":[{"name":"grep","arguments":"{\"pattern\":\"TODO\"}"}]}`,
			want:    Message{Role: RoleAssistant, ToolCalls: []ToolCall{call(1, "grep", `{"pattern":"TODO"}`)}},
		},
		{
			name:    "both: the calls win",
			content: `{"tool_calls":[{"name":"ls","arguments":{}}],"final_answer":"done already"}`,
			want:    Message{Role: RoleAssistant, ToolCalls: []ToolCall{call(1, "ls", "{}")}},
		},
		{
			name:    "neither",
			content: `{"tool_calls":[],"final_answer":""}`,
			want:    Message{Role: RoleAssistant},
		},
		{
			name:        "invalid JSON",
			content:     `{"tool_calls":[{"name":"ls",}]}`,
			wantInvalid: invalid + "invalid character '}'",
		},
		{
			name:        "no object",
			content:     "I will list the files.",
			wantInvalid: invalid + "it holds no JSON object",
		},
		{
			name:        "another object",
			content:     `{"answer":"42"}`,
			wantInvalid: invalid + `it has neither "tool_calls" nor "final_answer"`,
		},
		{
			name:        "call without a name",
			content:     `{"tool_calls":[{"arguments":{}}]}`,
			wantInvalid: invalid + "tool call 1 has no name",
		},
		{
			name:        "array arguments",
			content:     `{"tool_calls":[{"name":"ls","arguments":[1]}]}`,
			wantInvalid: invalid + "tool call 1 (ls): arguments must be an object or a JSON string, not [1]",
		},
		{
			name:   "native tool calls pass through",
			native: []ToolCall{{ID: "x", Name: "ls", Arguments: "{}"}},
			want:   Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "x", Name: "ls", Arguments: "{}"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := &fakeProvider{resp: &Response{Message: Message{Role: RoleAssistant, Content: tt.content, ToolCalls: tt.native}, Usage: usage}}
			got, err := JSONProtocol(inner).Complete(context.Background(), &Request{Purpose: PurposeTurn, Agent: Agent{ID: "a", Turn: 4}})
			if err != nil {
				t.Fatal(err)
			}
			if got.Usage != usage {
				t.Errorf("usage = %+v, want %+v", got.Usage, usage)
			}
			if tt.wantInvalid != "" {
				if !strings.HasPrefix(got.Invalid, tt.wantInvalid) {
					t.Errorf("invalid = %q, want prefix %q", got.Invalid, tt.wantInvalid)
				}
				if want := (Message{Role: RoleAssistant, Content: tt.content}); !reflect.DeepEqual(got.Message, want) {
					t.Errorf("message = %+v, want the raw reply", got.Message)
				}
				return
			}
			if got.Invalid != "" {
				t.Errorf("invalid = %q", got.Invalid)
			}
			if !reflect.DeepEqual(got.Message, tt.want) {
				t.Errorf("message = %+v\nwant %+v", got.Message, tt.want)
			}
		})
	}
}

func TestJSONProtocolPassThrough(t *testing.T) {
	summary := &Request{Purpose: PurposeSummary, System: "Summarize.", Messages: []Message{{Role: RoleTool, Name: "ls", Content: "x"}}}
	boom := errors.New("boom")
	tests := []struct {
		name    string
		req     *Request
		resp    *Response
		err     error
		wantReq bool // the inner provider got the request itself
	}{
		{name: "summary", req: summary, resp: &Response{Message: Message{Role: RoleAssistant, Content: "not JSON"}}, wantReq: true},
		{name: "inner error", req: &Request{Purpose: PurposeTurn}, err: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner := &fakeProvider{resp: tt.resp, err: tt.err}
			got, err := JSONProtocol(inner).Complete(context.Background(), tt.req)
			if got != tt.resp || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Errorf("got %v, %v; want %v, %v", got, err, tt.resp, tt.err)
			}
			if (inner.got == tt.req) != tt.wantReq {
				t.Errorf("inner got the caller's request: %v, want %v", inner.got == tt.req, tt.wantReq)
			}
		})
	}
}
