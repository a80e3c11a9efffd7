package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		wantErr string
	}{
		{
			name: "syntax error",
			script: `{"roles": {
  "root": [
    {"final_answer": "x",}
  ]}}`,
			wantErr: `s.json:3,26: invalid character '}' looking for beginning of object key string`,
		},
		{
			name:    "unexpected end",
			script:  "{\"roles\": {\n",
			wantErr: `s.json:2,1: unexpected end of JSON input`,
		},
		{
			name:    "data after the script",
			script:  `{"roles": {}} []`,
			wantErr: `s.json:1,15: invalid character '[' after top-level value`,
		},
		{
			name:    "empty file",
			script:  ``,
			wantErr: `s.json:1,1: unexpected end of JSON input`,
		},
		{
			name:    "not an object",
			script:  `  [1]`,
			wantErr: `s.json:1,3: the script must be an object, not an array`,
		},
		{
			name:    "unknown top-level field",
			script:  "{\n  \"roles\": {},\n  \"sumary\": \"x\"\n}",
			wantErr: `s.json:3,3: unknown field "sumary" in the script (known: roles, summary)`,
		},
		{
			name:    "roles of the wrong type",
			script:  `{"roles": ["root"]}`,
			wantErr: `s.json:1,11: "roles" must be an object, not an array`,
		},
		{
			name:    "turns of the wrong type",
			script:  `{"roles": {"root": {"final_answer": "x"}}}`,
			wantErr: `s.json:1,20: the turns of role "root" must be an array, not an object`,
		},
		{
			name: "unknown turn field",
			script: `{"roles": {"root": [
  {"final_answer": "a"},
  {"final_answer": "b", "tool_call": []}
]}}`,
			wantErr: `s.json:3,25: unknown field "tool_call" in turn 2 of role "root" (known: tool_calls, final_answer, content, usage, repeat, if)`,
		},
		{
			name: "wrong type",
			script: `{"roles": {"root": [
  {"final_answer": "a", "repeat": "3"}
]}}`,
			wantErr: `s.json:2,35: "repeat" of turn 1 of role "root" must be a number, not a string`,
		},
		{
			name:    "repeat 0",
			script:  `{"roles": {"w": [{}, {"repeat": 0}]}}`,
			wantErr: `s.json:1,33: "repeat" of turn 2 of role "w" is 0: want -1 (forever) or at least 1`,
		},
		{
			name:    "repeat below -1",
			script:  `{"roles": {"w": [{"repeat": -2}]}}`,
			wantErr: `s.json:1,29: "repeat" of turn 1 of role "w" is -2: want -1 (forever) or at least 1`,
		},
		{
			name:    "unknown if",
			script:  `{"roles": {"w": [{"if": "maybe"}]}}`,
			wantErr: `s.json:1,25: "if" of turn 1 of role "w" is "maybe": want "ok", "failed" or "any"`,
		},
		{
			name:    "if of the wrong type",
			script:  `{"roles": {"w": [{"if": true}]}}`,
			wantErr: `s.json:1,25: "if" of turn 1 of role "w" must be a string, not a boolean`,
		},
		{
			name:    "fractional repeat",
			script:  `{"roles": {"w": [{"repeat": 1.5}]}}`,
			wantErr: `s.json:1,29: "repeat" of turn 1 of role "w" must be a whole number, not 1.5`,
		},
		{
			name: "bad template",
			script: `{"roles": {"root": [
  {"final_answer": "done by {{.Agent"}
]}}`,
			wantErr: `s.json:2,20: bad template in "final_answer" of turn 1 of role "root": template: script:1: unclosed action`,
		},
		{
			name:    "unknown template field",
			script:  `{"roles": {"root": [{"content": "{{.Agnet}}"}]}}`,
			wantErr: `s.json:1,33: bad template in "content" of turn 1 of role "root": template: script:1:2: executing "script" at <.Agnet>: map has no entry for key "Agnet"`,
		},
		{
			name:    "Count outside summary",
			script:  `{"roles": {"root": [{"final_answer": "{{.Count}}"}]}}`,
			wantErr: `s.json:1,38: bad template in "final_answer" of turn 1 of role "root": template: script:1:2: executing "script" at <.Count>: map has no entry for key "Count"`,
		},
		{
			name: "bad template in nested arguments",
			script: `{"roles": {"root": [{"tool_calls": [
  {"name": "ls", "arguments": {"dirs": ["a", "{{end}}"]}}
]}]}}`,
			wantErr: `s.json:2,46: bad template in the arguments of tool call 1 of "tool_calls" of turn 1 of role "root": template: script:1: unexpected {{end}}`,
		},
		{
			name:    "bad summary template",
			script:  `{"roles": {}, "summary": "{{.Count"}`,
			wantErr: `s.json:1,26: bad template in "summary": template: script:1: unclosed action`,
		},
		{
			name:    "final_answer and content",
			script:  `{"roles": {"r": [{"final_answer": "a", "content": "b"}]}}`,
			wantErr: `s.json:1,40: turn 1 of role "r" has both "final_answer" and "content"`,
		},
		{
			name:    "tool call without a name",
			script:  `{"roles": {"r": [{"tool_calls": [{"name": "ls"}, {"arguments": {}}]}]}}`,
			wantErr: `s.json:1,50: tool call 2 of "tool_calls" of turn 1 of role "r" has no name`,
		},
		{
			name:    "negative usage",
			script:  `{"roles": {"r": [{"usage": {"prompt_tokens": -1}}]}}`,
			wantErr: `s.json:1,46: "prompt_tokens" of "usage" of turn 1 of role "r" is -1: want at least 0`,
		},
		{
			name:    "duplicate key",
			script:  "{\"roles\": {\"r\": []},\n \"roles\": {}}",
			wantErr: `s.json:2,2: duplicate key "roles"`,
		},
		{
			name:    "columns count characters",
			script:  `{"roles": {"é": [{"repeat": true}]}}`,
			wantErr: `s.json:1,29: "repeat" of turn 1 of role "é" must be a number, not a boolean`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseScript([]byte(tt.script), "s.json")
			if want := "model: scripted: " + tt.wantErr; err == nil || err.Error() != want {
				t.Errorf("err = %v\nwant  %s", err, want)
			}
		})
	}
}

// step is a request to a scripted provider and what it should answer.
type step struct {
	agent    Agent
	messages []Message
	want     Message
	wantErr  string
}

// play runs the steps in order against the provider.
func play(t *testing.T, s *Scripted, steps []step) {
	t.Helper()
	for i, st := range steps {
		resp, err := s.Complete(context.Background(), &Request{Purpose: PurposeTurn, Agent: st.agent, Messages: st.messages})
		if st.wantErr != "" {
			if err == nil || err.Error() != st.wantErr {
				t.Errorf("step %d: err = %v, want %s", i+1, err, st.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("step %d: %v", i+1, err)
			continue
		}
		if !reflect.DeepEqual(resp.Message, st.want) {
			t.Errorf("step %d: message = %+v\nwant %+v", i+1, resp.Message, st.want)
		}
	}
}

// answer is an assistant's answer.
func answer(text string) Message { return Message{Role: RoleAssistant, Content: text} }

func mustParse(t *testing.T, script string) *Scripted {
	t.Helper()
	s, err := parseScript([]byte(script), "s.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScriptedTurns(t *testing.T) {
	const script = `{
  "roles": {
    "root": [
      {"tool_calls": [
        {"name": "write_file", "arguments": {"path": "{{.Agent}}.txt", "content": "task: {{.Task}}", "n": 3, "tags": ["{{.Role}}", true, null]}},
        {"name": "ls"}
      ]},
      {"final_answer": "turn {{.Turn}} after {{.Last}}", "repeat": 2},
      {"content": "{\"tool_calls\":[],\"final_answer\":\"raw\"}"},
      {}
    ],
    "worker": [{"final_answer": "forever, for {{.Parent}}", "repeat": -1}],
    "*": [{"tool_calls": [{"name": "edit", "arguments": "{\"path\": "}]}]
  }
}`
	task := []Message{{Role: RoleUser, Content: "do <it> & more"}}
	later := append(task,
		Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "x", Name: "ls", Arguments: "{}"}}},
		Message{Role: RoleTool, ToolCallID: "x", Name: "ls", Content: "a.txt"},
	)
	root := Agent{ID: "r1", Role: "root"}
	at := func(a Agent, turn int) Agent { a.Turn = turn; return a }
	worker := Agent{ID: "w1", Role: "worker", ParentID: "r1"}
	other := Agent{ID: "o1", Role: "reviewer", Turn: 1}

	tests := []struct {
		name   string
		script string
		steps  []step
	}{
		{
			name:   "a role's turns in order",
			script: script,
			steps: []step{
				{agent: at(root, 1), messages: task, want: Message{Role: RoleAssistant, ToolCalls: []ToolCall{
					{ID: "call_r1_1_1", Name: "write_file", Arguments: `{"content":"task: do <it> & more","n":3,"path":"r1.txt","tags":["root",true,null]}`},
					{ID: "call_r1_1_2", Name: "ls", Arguments: "{}"},
				}}},
				{agent: at(root, 2), messages: later, want: answer("turn 2 after a.txt")},
				{agent: at(root, 3), messages: task, want: answer("turn 3 after do <it> & more")},
				{agent: at(root, 4), want: answer(`{"tool_calls":[],"final_answer":"raw"}`)},
				{agent: at(root, 5), want: Message{Role: RoleAssistant}},
				{agent: at(root, 6), wantErr: `model: scripted: role "root" has no turn 5 (the script has 4)`},
				{agent: at(root, 7), wantErr: `model: scripted: role "root" has no turn 5 (the script has 4)`},
			},
		},
		{
			name:   "repeat forever",
			script: script,
			steps: []step{
				{agent: at(worker, 1), want: answer("forever, for r1")},
				{agent: at(worker, 2), want: answer("forever, for r1")},
				{agent: at(worker, 3), want: answer("forever, for r1")},
			},
		},
		{
			name:   "the * fallback, with arguments as text",
			script: script,
			steps: []step{
				{agent: other, want: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_o1_1_1", Name: "edit", Arguments: `{"path": `}}}},
				{agent: other, wantErr: `model: scripted: role "reviewer" has no turn 2 (the script has 1)`},
			},
		},
		{
			name:   "two agents of a role progress independently",
			script: `{"roles": {"w": [{"final_answer": "one {{.Agent}}"}, {"final_answer": "two {{.Agent}}"}]}}`,
			steps: []step{
				{agent: Agent{ID: "a", Role: "w"}, want: answer("one a")},
				{agent: Agent{ID: "b", Role: "w"}, want: answer("one b")},
				{agent: Agent{ID: "b", Role: "w"}, want: answer("two b")},
				{agent: Agent{ID: "a", Role: "w"}, want: answer("two a")},
				{agent: Agent{ID: "a", Role: "w"}, wantErr: `model: scripted: role "w" has no turn 3 (the script has 2)`},
			},
		},
		{
			name:   "null arguments",
			script: `{"roles": {"w": [{"tool_calls": [{"name": "ls", "arguments": null}]}]}}`,
			steps: []step{
				{agent: Agent{ID: "a", Role: "w", Turn: 1}, want: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_a_1_1", Name: "ls", Arguments: "{}"}}}},
			},
		},
		{
			name:   "unknown role without *",
			script: `{"roles": {"w": [{}]}}`,
			steps: []step{
				{agent: Agent{ID: "a", Role: "boss"}, wantErr: `model: scripted: the script has no turns for role "boss" and no "*" list`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			play(t, mustParse(t, tt.script), tt.steps)
		})
	}
}

// TestScriptedNeverReportsAFailedStepAsDone: after failed calls only a
// turn for failures is played; any other stops the agent with an answer
// naming what failed, and the script goes on at that turn with the next
// input.
func TestScriptedNeverReportsAFailedStepAsDone(t *testing.T) {
	const script = `{"roles": {"w": [
  {"tool_calls": [{"name": "write_file"}, {"name": "ls"}]},
  {"tool_calls": [{"name": "console_print"}]},
  {"final_answer": "wrote it"}
], "h": [
  {"tool_calls": [{"name": "create_role"}]},
  {"tool_calls": [{"name": "find_role_by_name"}], "if": "failed"},
  {"tool_calls": [{"name": "spawn"}]},
  {"final_answer": "anyway", "if": "any"}
]}}`
	task := []Message{{Role: RoleUser, Content: "go"}}
	after := func(results ...string) []Message {
		msgs := append(slices.Clone(task), Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "x", Name: "write_file", Arguments: "{}"}}})
		for i, r := range results {
			msgs = append(msgs, Message{Role: RoleTool, ToolCallID: fmt.Sprint(i), Name: []string{"write_file", "ls"}[i], Content: r})
		}
		return msgs
	}
	const (
		ok      = `{"ok":true,"exit_code":0,"stdout":"done","stderr":"","truncated_lines":false,"truncated_bytes":false}`
		refused = `{"ok":false,"exit_code":0,"stdout":"","stderr":"","truncated_lines":false,"truncated_bytes":false,"error":{"code":"policy","message":"path \"data/x\" is in the host's data directory: refused"}}`
		exited  = `{"ok":false,"exit_code":1,"stdout":"","stderr":"","truncated_lines":false,"truncated_bytes":false,"error":{"code":"plugin_exited","message":"gone"}}`
	)
	calls := func(a Agent, names ...string) Message {
		m := Message{Role: RoleAssistant}
		for i, n := range names {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: fmt.Sprintf("call_%s_%d_%d", a.ID, a.Turn, i+1), Name: n, Arguments: "{}"})
		}
		return m
	}
	w := func(turn int) Agent { return Agent{ID: "w1", Role: "w", Turn: turn} }
	h := func(id string, turn int) Agent { return Agent{ID: id, Role: "h", Turn: turn} }
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "a failed call stops the script with what failed",
		steps: []step{
			{agent: w(1), messages: task, want: calls(w(1), "write_file", "ls")},
			{agent: w(2), messages: after(refused, ok), want: answer(`Not done: write_file failed (policy): path "data/x" is in the host's data directory: refused`)},
			// The next input resumes the script at the turn it stopped at.
			{agent: w(3), messages: append(after(refused, ok), answer("x"), Message{Role: RoleUser, Content: "try again"}), want: calls(w(3), "console_print")},
		},
	}, {
		name: "every failed call is named",
		steps: []step{
			{agent: w(1), messages: task, want: calls(w(1), "write_file", "ls")},
			{agent: w(2), messages: after(refused, exited), want: answer(`Not done: write_file failed (policy): path "data/x" is in the host's data directory: refused; ls failed (plugin_exited): gone`)},
		},
	}, {
		name: "calls that succeeded go on",
		steps: []step{
			{agent: w(1), messages: task, want: calls(w(1), "write_file", "ls")},
			{agent: w(2), messages: after(ok, ok), want: calls(w(2), "console_print")},
			{agent: w(3), messages: after(ok), want: answer("wrote it")},
		},
	}, {
		name: "a turn for failures is skipped after success",
		steps: []step{
			{agent: h("a", 1), messages: task, want: calls(h("a", 1), "create_role")},
			{agent: h("a", 2), messages: after(ok), want: calls(h("a", 2), "spawn")},
			{agent: h("a", 3), messages: after(refused), want: answer("anyway")},
		},
	}, {
		name: "and played after a failure",
		steps: []step{
			{agent: h("b", 1), messages: task, want: calls(h("b", 1), "create_role")},
			{agent: h("b", 2), messages: after(refused), want: calls(h("b", 2), "find_role_by_name")},
			{agent: h("b", 3), messages: after(refused), want: answer(`Not done: write_file failed (policy): path "data/x" is in the host's data directory: refused`)},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			play(t, mustParse(t, script), tt.steps)
		})
	}
}

func TestScriptedUsage(t *testing.T) {
	s := mustParse(t, `{"roles": {"r": [
		{"final_answer": "hello world!", "repeat": 2},
		{"final_answer": "x", "usage": {"prompt_tokens": 10, "completion_tokens": 5}},
		{"tool_calls": [{"name": "a", "arguments": {"k": "12345678"}}, {"name": "b"}]},
		{}
	]}}`)
	// The prompt: 8 (system) + 8 + 7 + 4 (messages) + 30 (tools' JSON) = 57 bytes.
	big := &Request{
		Purpose: PurposeTurn, Agent: Agent{ID: "a", Role: "r"}, System: "be brief",
		Messages: []Message{
			{Role: RoleUser, Content: "12345678"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "t", Arguments: `{"a":1}`}}},
			{Role: RoleTool, ToolCallID: "1", Content: "xxxx"},
		},
		Tools: []Tool{{Name: "t", Parameters: json.RawMessage(`{}`)}},
	}
	small := &Request{Purpose: PurposeTurn, Agent: Agent{ID: "a", Role: "r"}}
	tests := []struct {
		name string
		req  *Request
		want Usage
	}{
		{name: "estimated", req: big, want: Usage{PromptTokens: 57 / 4, CompletionTokens: 12 / 4}},
		{name: "estimated, prompt at least 1", req: small, want: Usage{PromptTokens: 1, CompletionTokens: 12 / 4}},
		{name: "given", req: small, want: Usage{PromptTokens: 10, CompletionTokens: 5}},
		// {"k":"12345678"} and {} are 18 bytes.
		{name: "estimated from arguments", req: small, want: Usage{PromptTokens: 1, CompletionTokens: 18 / 4}},
		{name: "empty turn, completion at least 1", req: small, want: Usage{PromptTokens: 1, CompletionTokens: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.Complete(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != tt.want {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tt.want)
			}
		})
	}
}

func TestScriptedSummary(t *testing.T) {
	long := strings.Repeat("0123456789", 9)
	msgs := []Message{
		{Role: RoleUser, Content: long},
		{Role: RoleAssistant, Content: "let me see", ToolCalls: []ToolCall{{ID: "1", Name: "ls"}, {ID: "2", Name: "read_file"}}},
		{Role: RoleTool, ToolCallID: "1", Content: "a.txt\n  b.txt"},
		{Role: RoleAssistant, Content: "Résumé: ok"},
	}
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{
			name:   "default",
			script: `{"roles": {"r": [{"final_answer": "only turn"}]}}`,
			want: "Summary of the 4 earlier messages:\n- user: " + long[:80] +
				"\n- assistant: called ls, read_file\n- tool: a.txt b.txt\n- assistant: Résumé: ok",
		},
		{
			name:   "templated",
			script: `{"roles": {"r": [{"final_answer": "only turn"}]}, "summary": "{{.Count}} messages of {{.Agent}} ({{.Role}}), task {{len .Task}} long"}`,
			want:   "4 messages of a1 (r), task 90 long",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.script)
			agent := Agent{ID: "a1", Role: "r"}
			resp, err := s.Complete(context.Background(), &Request{Purpose: PurposeSummary, Agent: agent, Messages: msgs})
			if err != nil {
				t.Fatal(err)
			}
			if want := answer(tt.want); !reflect.DeepEqual(resp.Message, want) {
				t.Errorf("message = %q\nwant %q", resp.Message.Content, tt.want)
			}
			if resp.Usage.CompletionTokens != len(tt.want)/4 {
				t.Errorf("completion tokens = %d, want %d", resp.Usage.CompletionTokens, len(tt.want)/4)
			}
			// A summary does not consume the agent's turn.
			play(t, s, []step{{agent: agent, want: answer("only turn")}})
		})
	}
}

func TestScriptedRequests(t *testing.T) {
	s := mustParse(t, `{"roles": {"*": [{"repeat": -1}]}}`)
	req := &Request{
		Purpose:  PurposeTurn,
		Agent:    Agent{ID: "a", Role: "r", Turn: 1},
		Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "ls"}}}},
		Tools:    []Tool{{Name: "ls", Parameters: json.RawMessage(`{"type":"object"}`)}},
	}
	want := []Request{copyRequest(req), {Purpose: PurposeSummary, Agent: Agent{ID: "a", Role: "r"}}}
	for _, r := range []*Request{req, &want[1]} {
		if _, err := s.Complete(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	// Neither the caller's later changes nor changes to a returned copy
	// reach what the provider recorded.
	req.Messages[0].ToolCalls[0].Name = "changed"
	req.Tools[0].Parameters[2] = 'X'
	got := s.Requests()
	got[0].Tools[0].Name = "changed"
	if got := s.Requests(); !reflect.DeepEqual(got, want) {
		t.Errorf("requests = %+v\nwant %+v", got, want)
	}
}

func TestScriptedConcurrent(t *testing.T) {
	s := mustParse(t, `{"roles": {"w": [{"final_answer": "{{.Agent}} {{.Turn}}", "repeat": 3}]}}`)
	const agents, turns = 16, 3
	var wg sync.WaitGroup
	errs := make(chan error, agents*(turns+1))
	for i := range agents {
		wg.Go(func() {
			id := fmt.Sprintf("a%d", i)
			for turn := 1; turn <= turns+1; turn++ {
				resp, err := s.Complete(context.Background(), &Request{Purpose: PurposeTurn, Agent: Agent{ID: id, Role: "w", Turn: turn}})
				switch {
				case turn > turns && err == nil:
					errs <- fmt.Errorf("%s turn %d: no error after the script's end", id, turn)
				case turn <= turns && err != nil:
					errs <- err
				case turn <= turns && resp.Message.Content != fmt.Sprintf("%s %d", id, turn):
					errs <- fmt.Errorf("%s turn %d: got %q", id, turn, resp.Message.Content)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(s.Requests()); got != agents*(turns+1) {
		t.Errorf("%d requests recorded, want %d", got, agents*(turns+1))
	}
}

func TestScriptedCancelledAndBadPurpose(t *testing.T) {
	s := mustParse(t, `{"roles": {"*": [{"final_answer": "one"}]}}`)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		purpose string
		wantErr string
	}{
		{name: "cancelled", ctx: cancelled, purpose: PurposeTurn, wantErr: "model: scripted: context canceled"},
		{name: "unknown purpose", ctx: context.Background(), purpose: "chat", wantErr: `model: scripted: unknown purpose "chat"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Complete(tt.ctx, &Request{Purpose: tt.purpose, Agent: Agent{ID: "a"}})
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("err = %v, want %s", err, tt.wantErr)
			}
		})
	}
	// Neither consumed the turn.
	play(t, s, []step{{agent: Agent{ID: "a"}, want: answer("one")}})
}

func TestNewScripted(t *testing.T) {
	s, err := NewScripted("testdata/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	play(t, s, []step{
		{agent: Agent{ID: "root", Role: "root", Turn: 1}, messages: []Message{{Role: RoleUser, Content: "note this"}}, want: Message{
			Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_root_1_1", Name: "write_file", Arguments: `{"content":"note this","path":"notes.txt"}`}},
		}},
		{agent: Agent{ID: "root", Role: "root", Turn: 2}, want: answer("Wrote notes.txt for root.")},
	})
	_, err = NewScripted("testdata/missing.json")
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "model: scripted: ") {
		t.Errorf("err = %v, want a model: scripted: not-exist error", err)
	}
}
