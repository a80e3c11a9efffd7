// Package model is the agent runtime's view of a language model: one
// [Provider] interface, an OpenAI-compatible chat-completions client, a
// scripted provider that replays a file of turns (tests, offline demos), and
// a JSON protocol ([JSONProtocol]) for models without native tool calling.
package model

import (
	"context"
	"encoding/json"
)

// Provider asks a model for the next step of a conversation.
type Provider interface {
	// Complete returns the model's next message. An error means no answer
	// could be had (after the provider's own retries); an answer the
	// runtime cannot use is a [Response] with Invalid set.
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// The purposes of a request.
const (
	// PurposeTurn asks for an agent's next step: tool calls or an answer.
	PurposeTurn = "turn"
	// PurposeSummary asks for a summary of older messages (compress_context);
	// the request has no tools.
	PurposeSummary = "summary"
)

// Request is one call of a model.
type Request struct {
	// Purpose is [PurposeTurn] or [PurposeSummary].
	Purpose string `json:"purpose"`
	// Agent says who asks; providers may use it to route or to label the
	// request, never to change what the model sees.
	Agent Agent `json:"agent"`
	// System is the system prompt.
	System string `json:"system,omitempty"`
	// Messages are the conversation so far, oldest first.
	Messages []Message `json:"messages"`
	// Tools are the tools the model may call: exactly the agent's.
	Tools []Tool `json:"tools,omitempty"`
}

// Agent identifies the agent a request is for.
type Agent struct {
	ID       string `json:"id"`
	Role     string `json:"role"`
	ParentID string `json:"parentId,omitempty"`
	// Turn is the 1-based number of the agent's turn this request is for
	// (counting over the agent's life); 0 for a summary.
	Turn int `json:"turn,omitempty"`
}

// The roles of messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of a conversation.
type Message struct {
	// Role is [RoleUser], [RoleAssistant] or [RoleTool].
	Role string `json:"role"`
	// Content is the message's text: for an assistant without tool calls,
	// its answer; for a tool message, the tool's result.
	Content string `json:"content,omitempty"`
	// ToolCalls are an assistant's tool calls.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID is, in a tool message, the call it answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Name is, in a tool message, the tool's name.
	Name string `json:"name,omitempty"`
}

// ToolCall is a call a model asks for.
type ToolCall struct {
	// ID identifies the call within the conversation.
	ID string `json:"id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments are the model's arguments as it sent them: usually a JSON
	// object, but models can send anything, so it is kept as text.
	Arguments string `json:"arguments"`
}

// Tool is a tool offered to a model.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the tool's input JSON schema.
	Parameters json.RawMessage `json:"parameters"`
}

// Usage counts a request's tokens as the model reports them.
type Usage struct {
	PromptTokens     int `json:"promptTokens"`
	CompletionTokens int `json:"completionTokens"`
}

// Total is the prompt and completion tokens together.
func (u Usage) Total() int { return u.PromptTokens + u.CompletionTokens }

// Response is a model's answer.
type Response struct {
	// Message is the assistant's message: tool calls, or an answer in
	// Content, or (a bad output) neither.
	Message Message `json:"message"`
	// Usage counts the request's tokens.
	Usage Usage `json:"usage"`
	// Invalid says why the answer could not be understood (for example a
	// reply in the JSON protocol that is not that JSON object); the runtime
	// reports it back to the model as a bad output. Empty when understood.
	Invalid string `json:"invalid,omitempty"`
}
