package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// JSONProtocol wraps a provider whose model has no native tool calling in
// a JSON protocol: the tools travel in the system prompt, and the
// model replies with one JSON object {"tool_calls": [...], "final_answer":
// "..."} that is turned back into tool calls or an answer. Summary requests
// pass through untouched.
func JSONProtocol(p Provider) Provider { return &jsonProtocol{inner: p} }

// jsonProtocol is the Provider JSONProtocol returns.
type jsonProtocol struct{ inner Provider }

// protocolInstruction is appended to the system prompt of every turn.
const protocolInstruction = `Reply with exactly one JSON object and nothing else:
{"tool_calls":[{"name":"TOOL_NAME","arguments":{...}}],"final_answer":""}
To call tools, list them in "tool_calls", each with the tool's name and an "arguments" object matching the tool's parameters; "final_answer" is then ignored.
To finish, leave "tool_calls" empty ([]) and put your answer in "final_answer".`

// jsonCall is a tool call in the protocol's object.
type jsonCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// jsonReply is the protocol's object.
type jsonReply struct {
	ToolCalls   []jsonCall `json:"tool_calls"`
	FinalAnswer string     `json:"final_answer"`
}

// Complete asks the inner provider in the JSON protocol and parses its reply.
func (j *jsonProtocol) Complete(ctx context.Context, req *Request) (*Response, error) {
	if req.Purpose == PurposeSummary {
		return j.inner.Complete(ctx, req)
	}
	inner := &Request{
		Purpose:  req.Purpose,
		Agent:    req.Agent,
		System:   protocolSystem(req.System, req.Tools),
		Messages: protocolHistory(req.Messages),
	}
	resp, err := j.inner.Complete(ctx, inner)
	if err != nil || len(resp.Message.ToolCalls) > 0 {
		return resp, err
	}
	msg, err := parseReply(resp.Message.Content, req.Agent.Turn)
	if err != nil {
		return &Response{
			Message: Message{Role: RoleAssistant, Content: resp.Message.Content},
			Usage:   resp.Usage,
			Invalid: "reply is not the JSON object {tool_calls, final_answer}: " + err.Error(),
		}, nil
	}
	return &Response{Message: msg, Usage: resp.Usage}, nil
}

// protocolSystem is the system prompt followed by the protocol's
// instruction and the tools.
func protocolSystem(system string, tools []Tool) string {
	var b strings.Builder
	if system != "" {
		b.WriteString(system)
		b.WriteString("\n\n")
	}
	b.WriteString(protocolInstruction)
	if len(tools) == 0 {
		b.WriteString("\n\nYou have no tools: always finish with final_answer.")
		return b.String()
	}
	b.WriteString("\n\nTools:")
	for _, t := range tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		fmt.Fprintf(&b, "\n- name: %s\n  description: %s\n  parameters: %s", t.Name, t.Description, compact(params))
	}
	return b.String()
}

// compact is JSON text without insignificant space (the text as is when it
// is not JSON).
func compact(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// protocolHistory rewrites a conversation for a model that knows no tool
// messages: an assistant's tool calls become its JSON object, and a tool's
// result becomes a user message.
func protocolHistory(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			reply := jsonReply{ToolCalls: make([]jsonCall, 0, len(m.ToolCalls))}
			for _, tc := range m.ToolCalls {
				args, _ := json.Marshal(tc.Arguments) // a string always marshals
				if json.Valid([]byte(tc.Arguments)) {
					args = []byte(compact([]byte(tc.Arguments)))
				}
				reply.ToolCalls = append(reply.ToolCalls, jsonCall{Name: tc.Name, Arguments: args})
			}
			text, _ := json.Marshal(reply) // only valid JSON inside
			out = append(out, Message{Role: RoleAssistant, Content: string(text)})
		case m.Role == RoleTool:
			out = append(out, Message{Role: RoleUser, Content: fmt.Sprintf("Result of %s (call %s):\n%s", m.Name, m.ToolCallID, m.Content)})
		default:
			out = append(out, m)
		}
	}
	return out
}

// parseReply reads the protocol's object from a reply; the calls get ids
// call_<turn>_<i>, i from 1.
func parseReply(content string, turn int) (Message, error) {
	// The object runs from the first { to the last }: that drops a ``` or
	// ```json fence around it as well as any prose.
	start, end := strings.IndexByte(content, '{'), strings.LastIndexByte(content, '}')
	if start < 0 || end < start {
		return Message{}, errors.New("it holds no JSON object")
	}
	text := content[start : end+1]
	var reply struct {
		ToolCalls   *[]jsonCall `json:"tool_calls"`
		FinalAnswer *string     `json:"final_answer"`
	}
	if err := json.Unmarshal([]byte(text), &reply); err != nil {
		return Message{}, err
	}
	if reply.ToolCalls == nil && reply.FinalAnswer == nil {
		return Message{}, errors.New(`it has neither "tool_calls" nor "final_answer"`)
	}
	msg := Message{Role: RoleAssistant}
	var calls []jsonCall
	if reply.ToolCalls != nil {
		calls = *reply.ToolCalls
	}
	for i, c := range calls {
		if c.Name == "" {
			return Message{}, fmt.Errorf("tool call %d has no name", i+1)
		}
		args, err := replyArguments(c.Arguments)
		if err != nil {
			return Message{}, fmt.Errorf("tool call %d (%s): %w", i+1, c.Name, err)
		}
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: fmt.Sprintf("call_%d_%d", turn, i+1), Name: c.Name, Arguments: args})
	}
	if len(msg.ToolCalls) == 0 && reply.FinalAnswer != nil {
		msg.Content = *reply.FinalAnswer
	}
	return msg, nil
}

// replyArguments is a call's arguments as text: an object's JSON, or the
// content of a JSON string (left for the runtime to validate).
func replyArguments(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "{}", nil
	case raw[0] == '{':
		return string(raw), nil
	case raw[0] == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	return "", fmt.Errorf("arguments must be an object or a JSON string, not %s", prefix(raw))
}
