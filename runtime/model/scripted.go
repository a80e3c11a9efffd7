package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"unicode/utf8"
)

// Scripted is a Provider that replays a script, a JSON file of turns per
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
//	"repeat":       3
//
// The list "*" serves the roles the script does not name. Each agent (by
// Agent.ID) walks its role's list on its own: every turn request plays the
// agent's current turn once, and a turn is played repeat times (default 1;
// -1: forever) before the next. A turn may be empty (an answer with neither
// tool calls nor text, a bad output); final_answer and content exclude each
// other. Arguments that are a JSON string are sent as the call's arguments
// text as is (to script arguments that are not JSON); absent or null ones
// are "{}".
//
// final_answer, content, summary and every string inside arguments are
// text/template templates (missingkey=error) over the fields .Agent (the
// agent's id), .Parent (its parent's id), .Role, .Turn (Agent.Turn), .Task
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
}

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
	return ParseScript(data, path)
}

// ParseScript loads a script from data; filename names it in errors, which
// all read "model: scripted: FILE:LINE,COL: message".
func ParseScript(data []byte, filename string) (*Scripted, error) {
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
		var t *scriptTurn
		if t, err = s.next(req.Agent); err == nil {
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

// next consumes one play of the agent's current turn.
func (s *Scripted) next(a Agent) (*scriptTurn, error) {
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
	if c.index >= len(list) {
		return nil, fmt.Errorf("model: scripted: role %q has no turn %d (the script has %d)", a.Role, c.index+1, len(list))
	}
	t := list[c.index]
	c.played++
	if t.repeat > 0 && c.played >= t.repeat {
		c.index, c.played = c.index+1, 0
	}
	return t, nil
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

// loader reads a script, reporting errors at their position in the file.
type loader struct {
	file string
	data []byte
}

// node is a JSON value of a script with its position.
type node struct {
	off    int    // where the value starts
	key    string // in an object, the value's key
	keyOff int    // in an object, where the key starts
	// kind is '{' (object), '[' (array), '"' (string), '0' (number), 't'
	// (boolean) or 'n' (null).
	kind     byte
	value    any     // a string (a *scriptTemplate in arguments), json.Number or bool
	children []*node // an object's members or an array's items
}

// kindNames name the kinds of nodes in errors.
var kindNames = map[byte]string{'{': "an object", '[': "an array", '"': "a string", '0': "a number", 't': "a boolean", 'n': "null"}

// member is an object's member with the key, or nil.
func (n *node) member(key string) *node {
	for _, c := range n.children {
		if c.key == key {
			return c
		}
	}
	return nil
}

// errorf is an error at the offset.
func (l *loader) errorf(off int, format string, args ...any) error {
	return fmt.Errorf("model: scripted: %s: %s", l.pos(off), fmt.Sprintf(format, args...))
}

// pos is "file:line,col" of the offset (columns count characters).
func (l *loader) pos(off int) string {
	off = min(off, len(l.data))
	lineStart := bytes.LastIndexByte(l.data[:off], '\n') + 1
	line := 1 + bytes.Count(l.data[:off], []byte("\n"))
	return fmt.Sprintf("%s:%d,%d", l.file, line, 1+utf8.RuneCount(l.data[lineStart:off]))
}

// tree parses the file into nodes.
func (l *loader) tree() (*node, error) {
	// Unmarshal reports only syntax errors here, at an offset just past the
	// bad character or at the end of the input.
	var syntax *json.SyntaxError
	if err := json.Unmarshal(l.data, new(any)); errors.As(err, &syntax) {
		off := int(syntax.Offset)
		if off < len(l.data) {
			off--
		}
		return nil, l.errorf(max(off, 0), "%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(l.data))
	dec.UseNumber()
	return l.value(dec)
}

// value reads the next value of a valid document.
func (l *loader) value(dec *json.Decoder) (*node, error) {
	n := &node{off: l.skip(dec.InputOffset())}
	tok, err := dec.Token()
	if err != nil {
		return nil, l.errorf(n.off, "%v", err)
	}
	switch tok := tok.(type) {
	case json.Delim:
		n.kind = byte(tok)
		for dec.More() {
			keyOff := l.skip(dec.InputOffset())
			var key string
			if n.kind == '{' {
				tok, _ := dec.Token() // a string key: the document is valid
				if key, _ = tok.(string); n.member(key) != nil {
					return nil, l.errorf(keyOff, "duplicate key %q", key)
				}
			}
			c, err := l.value(dec)
			if err != nil {
				return nil, err
			}
			c.key, c.keyOff = key, keyOff
			n.children = append(n.children, c)
		}
		_, err = dec.Token() // the closing delimiter
	case string:
		n.kind, n.value = '"', tok
	case json.Number:
		n.kind, n.value = '0', tok
	case bool:
		n.kind, n.value = 't', tok
	default:
		n.kind = 'n'
	}
	return n, err
}

// skip is the offset of the next token at or after off: past space and the
// separators the decoder has not consumed.
func (l *loader) skip(off int64) int {
	i := int(off)
	for i < len(l.data) && strings.IndexByte(" \t\r\n,:", l.data[i]) >= 0 {
		i++
	}
	return i
}

// expect refuses a node not of the kind.
func (l *loader) expect(n *node, kind byte, what string) error {
	if n.kind != kind {
		return l.errorf(n.off, "%s must be %s, not %s", what, kindNames[kind], kindNames[n.kind])
	}
	return nil
}

// fields refuses a node that is not an object of the known fields.
func (l *loader) fields(n *node, what string, known ...string) error {
	if err := l.expect(n, '{', what); err != nil {
		return err
	}
	for _, c := range n.children {
		if !slices.Contains(known, c.key) {
			return l.errorf(c.keyOff, "unknown field %q in %s (known: %s)", c.key, what, strings.Join(known, ", "))
		}
	}
	return nil
}

// integer reads a whole number.
func (l *loader) integer(n *node, what string) (int, error) {
	if err := l.expect(n, '0', what); err != nil {
		return 0, err
	}
	i, err := strconv.Atoi(string(n.value.(json.Number)))
	if err != nil {
		return 0, l.errorf(n.off, "%s must be a whole number, not %s", what, n.value)
	}
	return i, nil
}

// template parses a string node as a template and tries it on sample data.
func (l *loader) template(n *node, what string, sample map[string]any) (*scriptTemplate, error) {
	if err := l.expect(n, '"', what); err != nil {
		return nil, err
	}
	t, err := template.New("script").Option("missingkey=error").Parse(n.value.(string))
	if err == nil {
		err = t.Execute(io.Discard, sample)
	}
	if err != nil {
		return nil, l.errorf(n.off, "bad template in %s: %v", what, err)
	}
	return &scriptTemplate{t: t, pos: l.pos(n.off)}, nil
}

// turn reads a TURN object.
func (l *loader) turn(n *node, what string) (*scriptTurn, error) {
	if err := l.fields(n, what, "tool_calls", "final_answer", "content", "usage", "repeat"); err != nil {
		return nil, err
	}
	t := &scriptTurn{repeat: 1}
	var err error
	for _, c := range n.children {
		field := fmt.Sprintf("%q of %s", c.key, what)
		switch c.key {
		case "tool_calls":
			t.calls, err = l.calls(c, field)
		case "final_answer", "content":
			if t.text != nil {
				return nil, l.errorf(c.keyOff, `%s has both "final_answer" and "content"`, what)
			}
			t.text, err = l.template(c, field, sampleTurnData)
		case "usage":
			t.usage, err = l.usage(c, field)
		case "repeat":
			if t.repeat, err = l.integer(c, field); err == nil && (t.repeat == 0 || t.repeat < -1) {
				err = l.errorf(c.off, "%s is %d: want -1 (forever) or at least 1", field, t.repeat)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// calls reads a turn's tool_calls.
func (l *loader) calls(n *node, what string) ([]scriptCall, error) {
	if err := l.expect(n, '[', what); err != nil {
		return nil, err
	}
	calls := make([]scriptCall, 0, len(n.children))
	for i, c := range n.children {
		call := fmt.Sprintf("tool call %d of %s", i+1, what)
		if err := l.fields(c, call, "name", "arguments"); err != nil {
			return nil, err
		}
		name := c.member("name")
		if name == nil {
			return nil, l.errorf(c.off, "%s has no name", call)
		}
		if err := l.expect(name, '"', "the name of "+call); err != nil {
			return nil, err
		}
		sc := scriptCall{name: name.value.(string)}
		if args := c.member("arguments"); args != nil && args.kind != 'n' {
			if err := l.compile(args, "the arguments of "+call); err != nil {
				return nil, err
			}
			sc.args = args
		}
		calls = append(calls, sc)
	}
	return calls, nil
}

// compile parses every string inside a JSON value as a template, in place.
func (l *loader) compile(n *node, what string) error {
	if n.kind == '"' {
		t, err := l.template(n, what, sampleTurnData)
		n.value = t
		return err
	}
	for _, c := range n.children {
		if err := l.compile(c, what); err != nil {
			return err
		}
	}
	return nil
}

// render is the JSON value of a compiled node, its templates executed.
func (n *node) render(data map[string]any) (any, error) {
	switch n.kind {
	case '"':
		return n.value.(*scriptTemplate).render(data)
	case '{', '[':
		items, obj := make([]any, len(n.children)), make(map[string]any, len(n.children))
		for i, c := range n.children {
			v, err := c.render(data)
			if err != nil {
				return nil, err
			}
			items[i], obj[c.key] = v, v
		}
		if n.kind == '[' {
			return items, nil
		}
		return obj, nil
	}
	return n.value, nil
}

// usage reads a turn's usage.
func (l *loader) usage(n *node, what string) (*Usage, error) {
	if err := l.fields(n, what, "prompt_tokens", "completion_tokens"); err != nil {
		return nil, err
	}
	u := &Usage{}
	counts := map[string]*int{"prompt_tokens": &u.PromptTokens, "completion_tokens": &u.CompletionTokens}
	for _, c := range n.children {
		v, err := l.integer(c, fmt.Sprintf("%q of %s", c.key, what))
		if err == nil && v < 0 {
			err = l.errorf(c.off, "%q of %s is %d: want at least 0", c.key, what, v)
		}
		if err != nil {
			return nil, err
		}
		*counts[c.key] = v
	}
	return u, nil
}
