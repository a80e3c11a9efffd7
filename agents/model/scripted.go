package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"text/template"
)

// Scripted is a [Provider] that replays a script, a JSON file of turns per
// role, for tests and offline demos:
//
//	{
//	  "roles": {
//	    "root": [TURN, ...],
//	    "*":    [TURN, ...]
//	  },
//	  "summary": "optional template for summary requests"
//	}
//
// where a TURN is an object with the optional fields
//
//	"tool_calls":   [{"name": "write_file", "arguments": {"path": "a.txt"}}],
//	"final_answer": "text",
//	"content":      "raw assistant text (for example for the JSON protocol)",
//	"usage":        {"prompt_tokens": 10, "completion_tokens": 5},
//	"repeat":       3,
//	"if":           "failed"
//
// The list "*" serves the roles the script does not name. Each agent (by
// [Agent.ID]) walks its role's list on its own: every turn request plays the
// agent's current turn once, and a turn is played repeat times (default 1;
// -1: forever) before the next. A turn may be empty (an answer with neither
// tool calls nor text, a bad output); final_answer and content exclude each
// other. Arguments that are a JSON string are sent as the call's arguments
// text as is (to script arguments that are not JSON); absent or null ones
// are "{}".
//
// A script never reports a step as done after its tool call failed. A
// turn's "if" says when it is played: "ok" (the default) unless the tool
// calls just before it failed, "failed" only right after failed calls
// (skipped otherwise: a script's way to handle a failure), "any" either
// way. Calls failed when the request's last messages are their results and
// one of them is not ok. A turn not played after failed calls stops the
// agent there instead, with the final answer "Not done: TOOL failed (CODE):
// MESSAGE" (each failed call, joined by "; "); the turn waits for the
// agent's next input.
//
// final_answer, content, summary and every string inside arguments are
// text/template templates (missingkey=error) over the fields .Agent (the
// agent's id), .Parent (its parent's id), .Role, .Turn ([Agent.Turn]), .Task
// (the first user message), .Last (the last user or tool message) and, in
// summary only, .Count (the number of messages to summarize).
//
// A Scripted is safe for concurrent use.
type Scripted struct {
	roles   map[string][]*scriptTurn
	summary *scriptTemplate // nil: the default summary

	mu       sync.Mutex
	cursors  map[string]*cursor // by agent id
	requests []Request
}

// scriptTurn is one TURN of a script.
type scriptTurn struct {
	calls  []scriptCall
	text   *scriptTemplate // final_answer or content; nil: none
	usage  *Usage          // nil: estimated
	repeat int             // -1: forever
	when   string          // its "if": playIfOK, playIfFailed or playAlways
}

// The values of a turn's "if".
const (
	playIfOK     = "ok"
	playIfFailed = "failed"
	playAlways   = "any"
)

// scriptCall is a tool call of a turn.
type scriptCall struct {
	name string
	args *node // its strings compiled; nil: "{}"
}

// scriptTemplate is a parsed template and where the script declares it.
type scriptTemplate struct {
	t   *template.Template
	pos string
}

// cursor is an agent's place in its role's list.
type cursor struct {
	index  int // the current turn
	played int // how many times it was played
}

// The template data a script's templates are tried with at load time, to
// catch unknown fields then rather than in the middle of a run.
var (
	sampleTurnData    = map[string]any{"Agent": "a", "Parent": "p", "Role": "r", "Turn": 1, "Task": "t", "Last": "l"}
	sampleSummaryData = map[string]any{"Agent": "a", "Parent": "p", "Role": "r", "Turn": 0, "Task": "t", "Last": "l", "Count": 1}
)

// NewScripted loads the script in the file at path.
func NewScripted(path string) (*Scripted, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: scripted: %w", err)
	}
	return parseScript(data, path)
}

// parseScript loads a script from data; filename names it in errors, which
// all read "model: scripted: FILE:LINE,COL: message".
func parseScript(data []byte, filename string) (*Scripted, error) {
	l := &loader{file: filename, data: data}
	root, err := l.tree()
	if err != nil {
		return nil, err
	}
	if err := l.fields(root, "the script", "roles", "summary"); err != nil {
		return nil, err
	}
	s := &Scripted{roles: map[string][]*scriptTurn{}, cursors: map[string]*cursor{}}
	if roles := root.member("roles"); roles != nil {
		if err := l.expect(roles, '{', `"roles"`); err != nil {
			return nil, err
		}
		for _, list := range roles.children {
			if err := l.expect(list, '[', fmt.Sprintf("the turns of role %q", list.key)); err != nil {
				return nil, err
			}
			turns := make([]*scriptTurn, 0, len(list.children))
			for i, n := range list.children {
				t, err := l.turn(n, fmt.Sprintf("turn %d of role %q", i+1, list.key))
				if err != nil {
					return nil, err
				}
				turns = append(turns, t)
			}
			s.roles[list.key] = turns
		}
	}
	if n := root.member("summary"); n != nil {
		if s.summary, err = l.template(n, `"summary"`, sampleSummaryData); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Complete plays the agent's next turn, or answers a summary request.
func (s *Scripted) Complete(ctx context.Context, req *Request) (*Response, error) {
	s.mu.Lock()
	s.requests = append(s.requests, copyRequest(req))
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("model: scripted: %w", err)
	}
	data := templateData(req)
	var msg Message
	var usage *Usage
	var err error
	switch req.Purpose {
	case PurposeSummary:
		msg, err = s.summarize(req, data)
	case PurposeTurn:
		failed := failedCalls(req.Messages)
		var t *scriptTurn
		switch t, err = s.next(req.Agent, len(failed) > 0); {
		case err != nil:
		case t == nil:
			msg = Message{Role: RoleAssistant, Content: notDone(failed)}
		default:
			msg, err = t.play(req.Agent, data)
			usage = t.usage
		}
	default:
		err = fmt.Errorf("model: scripted: unknown purpose %q", req.Purpose)
	}
	if err != nil {
		return nil, err
	}
	if usage == nil {
		usage = estimateUsage(req, msg)
	}
	return &Response{Message: msg, Usage: *usage}, nil
}

// Requests returns copies of the requests received so far, oldest first.
func (s *Scripted) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i := range s.requests {
		out[i] = copyRequest(&s.requests[i])
	}
	return out
}

// copyRequest copies a request deeply enough that neither copy's slices
// change with the other's.
func copyRequest(req *Request) Request {
	c := *req
	c.Messages = slices.Clone(req.Messages)
	for i := range c.Messages {
		c.Messages[i].ToolCalls = slices.Clone(c.Messages[i].ToolCalls)
	}
	c.Tools = slices.Clone(req.Tools)
	for i := range c.Tools {
		c.Tools[i].Parameters = slices.Clone(c.Tools[i].Parameters)
	}
	return c
}

// next consumes one play of the agent's current turn, skipping the turns
// for failures when the calls just before did not fail. It returns nil,
// and leaves the turn for the next input, when the calls failed and the
// turn is not for that.
func (s *Scripted) next(a Agent, afterFailure bool) (*scriptTurn, error) {
	list, ok := s.roles[a.Role]
	if !ok {
		if list, ok = s.roles["*"]; !ok {
			return nil, fmt.Errorf(`model: scripted: the script has no turns for role %q and no "*" list`, a.Role)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cursors[a.ID]
	if c == nil {
		c = &cursor{}
		s.cursors[a.ID] = c
	}
	for c.index < len(list) && !afterFailure && list[c.index].when == playIfFailed {
		c.index, c.played = c.index+1, 0
	}
	if c.index >= len(list) {
		return nil, fmt.Errorf("model: scripted: role %q has no turn %d (the script has %d)", a.Role, c.index+1, len(list))
	}
	t := list[c.index]
	if afterFailure && t.when == playIfOK {
		return nil, nil
	}
	c.played++
	if t.repeat > 0 && c.played >= t.repeat {
		c.index, c.played = c.index+1, 0
	}
	return t, nil
}

// callFailure is a failed tool call, as its result tells it.
type callFailure struct {
	tool, code, message string
}

// failedCalls returns the failed calls among the results that end msgs:
// tool messages holding a result envelope whose ok is false.
func failedCalls(msgs []Message) []callFailure {
	i := len(msgs)
	for i > 0 && msgs[i-1].Role == RoleTool {
		i--
	}
	var out []callFailure
	for _, m := range msgs[i:] {
		var r struct {
			OK    *bool `json:"ok"`
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(m.Content), &r) != nil || r.OK == nil || *r.OK {
			continue
		}
		f := callFailure{tool: m.Name}
		if r.Error != nil {
			f.code, f.message = r.Error.Code, r.Error.Message
		}
		out = append(out, f)
	}
	return out
}

// notDone is the answer of an agent whose script stops at failed calls.
func notDone(failed []callFailure) string {
	parts := make([]string, len(failed))
	for i, f := range failed {
		parts[i] = f.tool + " failed"
		if f.code != "" {
			parts[i] += " (" + f.code + ")"
		}
		if f.message != "" {
			parts[i] += ": " + f.message
		}
	}
	return "Not done: " + strings.Join(parts, "; ")
}

// play renders the turn for an agent.
func (t *scriptTurn) play(a Agent, data map[string]any) (Message, error) {
	msg := Message{Role: RoleAssistant}
	if t.text != nil {
		text, err := t.text.render(data)
		if err != nil {
			return Message{}, err
		}
		msg.Content = text
	}
	for i, c := range t.calls {
		args, err := c.arguments(data)
		if err != nil {
			return Message{}, err
		}
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: fmt.Sprintf("call_%s_%d_%d", a.ID, a.Turn, i+1), Name: c.name, Arguments: args})
	}
	return msg, nil
}

// arguments renders a call's arguments to their text.
func (c scriptCall) arguments(data map[string]any) (string, error) {
	if c.args == nil {
		return "{}", nil
	}
	v, err := c.args.render(data)
	if err != nil {
		return "", err
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("model: scripted: encoding the arguments of %s: %w", c.name, err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// render executes the template.
func (t *scriptTemplate) render(data map[string]any) (string, error) {
	var b strings.Builder
	if err := t.t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("model: scripted: %s: %w", t.pos, err)
	}
	return b.String(), nil
}

// templateData is the data of a request's templates.
func templateData(req *Request) map[string]any {
	data := map[string]any{
		"Agent": req.Agent.ID, "Parent": req.Agent.ParentID, "Role": req.Agent.Role, "Turn": req.Agent.Turn,
		"Task": "", "Last": "",
	}
	task := false
	for _, m := range req.Messages {
		if m.Role == RoleUser && !task {
			data["Task"], task = m.Content, true
		}
		if m.Role == RoleUser || m.Role == RoleTool {
			data["Last"] = m.Content
		}
	}
	return data
}

// summarize answers a summary request with the script's template, else a
// line per message.
func (s *Scripted) summarize(req *Request, data map[string]any) (Message, error) {
	msg := Message{Role: RoleAssistant}
	if s.summary != nil {
		data["Count"] = len(req.Messages)
		text, err := s.summary.render(data)
		msg.Content = text
		return msg, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Summary of the %d earlier messages:", len(req.Messages))
	for _, m := range req.Messages {
		what := m.Content
		if len(m.ToolCalls) > 0 {
			names := make([]string, len(m.ToolCalls))
			for i, tc := range m.ToolCalls {
				names[i] = tc.Name
			}
			what = "called " + strings.Join(names, ", ")
		}
		fmt.Fprintf(&b, "\n- %s: %s", m.Role, clip(strings.Join(strings.Fields(what), " "), 80))
	}
	msg.Content = b.String()
	return msg, nil
}

// clip is the first n characters of s.
func clip(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// estimateUsage counts about four bytes a token: the prompt is the system
// prompt, the messages' contents and arguments and the tools' JSON; the
// completion is the answer's content and arguments. Each is at least 1.
func estimateUsage(req *Request, msg Message) *Usage {
	prompt := len(req.System)
	for _, m := range req.Messages {
		prompt += len(m.Content)
		for _, tc := range m.ToolCalls {
			prompt += len(tc.Arguments)
		}
	}
	if len(req.Tools) > 0 {
		tools, _ := json.Marshal(req.Tools) // strings and valid raw JSON
		prompt += len(tools)
	}
	completion := len(msg.Content)
	for _, tc := range msg.ToolCalls {
		completion += len(tc.Arguments)
	}
	return &Usage{PromptTokens: max(1, prompt/4), CompletionTokens: max(1, completion/4)}
}
