package model

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// OpenAIOptions configure an OpenAI-compatible chat-completions client.
type OpenAIOptions struct {
	// BaseURL is the server's API root, the URL before /chat/completions
	// (for example https://api.openai.com/v1); required. A trailing slash
	// is tolerated.
	BaseURL string
	// Model is the model name sent with each request.
	Model string
	// APIKey is sent as a bearer token; none is sent when empty. It never
	// appears in an error.
	APIKey string
	// Timeout bounds each attempt of a request; 0 means no bound.
	Timeout time.Duration
	// MaxRetries is how many times a request failing with a transient
	// error (connection, 429, 5xx) is tried again.
	MaxRetries int
	// HTTPClient makes the requests; nil means a default client.
	HTTPClient *http.Client
}

// The backoff of retries: the first wait, and the longest any wait may be
// (also the cap on a server's Retry-After).
const (
	firstBackoff = 200 * time.Millisecond
	maxBackoff   = 10 * time.Second
)

// maxResponseBytes bounds the body read from a server.
const maxResponseBytes = 32 << 20

// OpenAI is a [Provider] speaking the OpenAI chat-completions protocol. It is
// safe for concurrent use.
type OpenAI struct {
	opts     OpenAIOptions
	endpoint string
	client   *http.Client
	// backoff is the first wait before a retry; tests shorten it.
	backoff time.Duration
}

// NewOpenAI returns a client for the server at [OpenAIOptions.BaseURL].
func NewOpenAI(o OpenAIOptions) (*OpenAI, error) {
	base := strings.TrimRight(strings.TrimSpace(o.BaseURL), "/")
	if base == "" {
		return nil, errors.New("model: openai: the base URL is not set")
	}
	if o.MaxRetries < 0 {
		return nil, fmt.Errorf("model: openai: max retries is %d, want at least 0", o.MaxRetries)
	}
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	return &OpenAI{opts: o, endpoint: base + "/chat/completions", client: client, backoff: firstBackoff}, nil
}

// The chat-completions wire format (only the fields used here).
type (
	wireRequest struct {
		Model    string        `json:"model"`
		Messages []wireMessage `json:"messages"`
		Tools    []wireTool    `json:"tools,omitempty"`
	}
	wireMessage struct {
		Role string `json:"role"`
		// Content is null for an assistant message that only calls tools.
		Content    *string        `json:"content"`
		ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	wireToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	}
	wireFunction struct {
		Name string `json:"name"`
		// Arguments is a JSON string holding the arguments' JSON text; some
		// servers send the object itself, which is accepted too.
		Arguments json.RawMessage `json:"arguments"`
	}
	wireTool struct {
		Type     string       `json:"type"`
		Function wireToolSpec `json:"function"`
	}
	wireToolSpec struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	wireResponse struct {
		Choices []struct {
			Message struct {
				Content   *string        `json:"content"`
				ToolCalls []wireToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	wireError struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
)

// wireRequestFor converts a request to the wire format.
func (c *OpenAI) wireRequestFor(req *Request) wireRequest {
	w := wireRequest{Model: c.opts.Model, Messages: make([]wireMessage, 0, len(req.Messages)+1)}
	if req.System != "" {
		w.Messages = append(w.Messages, wireMessage{Role: "system", Content: &req.System})
	}
	for _, m := range req.Messages {
		wm := wireMessage{Role: m.Role, Content: &m.Content, ToolCallID: m.ToolCallID}
		if m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
			if m.Content == "" {
				wm.Content = nil
			}
			for _, tc := range m.ToolCalls {
				args, _ := json.Marshal(tc.Arguments) // a string always marshals
				wm.ToolCalls = append(wm.ToolCalls, wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: args}})
			}
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object"}`)
		}
		w.Tools = append(w.Tools, wireTool{Type: "function", Function: wireToolSpec{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	return w
}

// retryableError is an attempt's failure worth another try.
type retryableError struct {
	err error
	// after is the wait the server asked for; negative when it did not.
	after time.Duration
}

func (e *retryableError) Error() string { return e.err.Error() }

// Complete sends the request, trying again after transient failures.
func (c *OpenAI) Complete(ctx context.Context, req *Request) (*Response, error) {
	body, err := json.Marshal(c.wireRequestFor(req))
	if err != nil {
		return nil, fmt.Errorf("model: openai: encoding the request: %w", err)
	}
	wait := c.backoff
	for attempt := 0; ; attempt++ {
		resp, err := c.attempt(ctx, body)
		var transient *retryableError
		if err == nil || !errors.As(err, &transient) {
			return resp, err
		}
		if attempt == c.opts.MaxRetries {
			if attempt == 0 {
				return nil, transient.err
			}
			return nil, fmt.Errorf("%w (tried %d times)", transient.err, attempt+1)
		}
		pause := min(wait, maxBackoff)
		if transient.after >= 0 {
			pause = min(transient.after, maxBackoff)
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("model: openai: %w", ctx.Err())
		case <-timer.C:
		}
		wait *= 2
	}
}

// attempt makes one request; a transient failure is a *retryableError.
func (c *OpenAI) attempt(ctx context.Context, body []byte) (*Response, error) {
	actx := ctx
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, c.errorf("building the request: %v", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.opts.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	hresp, err := c.client.Do(hreq)
	if err == nil {
		defer hresp.Body.Close()
		var data []byte
		data, err = io.ReadAll(io.LimitReader(hresp.Body, maxResponseBytes))
		if err == nil {
			return c.decode(hresp, data)
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("model: openai: %w", ctx.Err())
	}
	return nil, &retryableError{err: c.errorf("%v", err), after: -1}
}

// decode turns a server's answer into a response or an error.
func (c *OpenAI) decode(hresp *http.Response, data []byte) (*Response, error) {
	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		err := c.errorf("the server answered %s: %s", hresp.Status, serverMessage(data))
		if hresp.StatusCode == http.StatusTooManyRequests || hresp.StatusCode >= 500 {
			return nil, &retryableError{err: err, after: retryAfter(hresp.Header.Get("Retry-After"))}
		}
		return nil, err
	}
	var w wireResponse
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, c.errorf("the server's answer is not a chat completion: %v: %s", err, prefix(data))
	}
	if len(w.Choices) == 0 {
		return nil, c.errorf("the server's answer has no choices: %s", prefix(data))
	}
	choice := w.Choices[0]
	resp := &Response{
		Message: Message{Role: RoleAssistant},
		Usage:   Usage{PromptTokens: w.Usage.PromptTokens, CompletionTokens: w.Usage.CompletionTokens},
	}
	if choice.Message.Content != nil {
		resp.Message.Content = *choice.Message.Content
	}
	for _, tc := range choice.Message.ToolCalls {
		resp.Message.ToolCalls = append(resp.Message.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: argumentsText(tc.Function.Arguments)})
	}
	if choice.FinishReason == "length" && resp.Message.Content == "" && len(resp.Message.ToolCalls) == 0 {
		resp.Invalid = "the reply was cut off at the model's length limit before it held an answer or a tool call"
	}
	return resp, nil
}

// argumentsText is a tool call's arguments as text: the string's content
// when they were sent as a JSON string (the standard), else the raw JSON.
func argumentsText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	return string(raw)
}

// errorf formats an error prefixed "model: openai: ", with the API key
// removed from it wherever a server or library may have echoed it.
func (c *OpenAI) errorf(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if c.opts.APIKey != "" {
		msg = strings.ReplaceAll(msg, c.opts.APIKey, "[api key]")
	}
	return errors.New("model: openai: " + msg)
}

// serverMessage is the message of an OpenAI error body, else a prefix of
// the body.
func serverMessage(data []byte) string {
	var w wireError
	if json.Unmarshal(data, &w) == nil && w.Error.Message != "" {
		return w.Error.Message
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return "(empty body)"
	}
	return prefix(data)
}

// prefix is the start of a body, short enough for an error.
func prefix(data []byte) string {
	const n = 200
	s := strings.TrimSpace(string(data))
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// retryAfter parses a Retry-After header in seconds; -1 when absent or not
// a number of seconds.
func retryAfter(h string) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || secs < 0 {
		return -1
	}
	return min(time.Duration(secs)*time.Second, maxBackoff)
}
