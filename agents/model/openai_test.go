package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer is a chat-completions server answering the n-th request with
// the n-th reply (the last one over and over) and recording the requests.
type fakeServer struct {
	*httptest.Server
	replies []http.HandlerFunc

	mu       sync.Mutex
	bodies   []string
	headers  []http.Header
	paths    []string
	received chan struct{} // one value per request, for tests that wait on one
}

func newFakeServer(t *testing.T, replies ...http.HandlerFunc) *fakeServer {
	t.Helper()
	f := &fakeServer{replies: replies, received: make(chan struct{}, 100)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.bodies)
		f.bodies = append(f.bodies, string(body))
		f.headers = append(f.headers, r.Header.Clone())
		f.paths = append(f.paths, r.URL.Path)
		f.mu.Unlock()
		f.received <- struct{}{}
		f.replies[min(n, len(f.replies)-1)](w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// attempts is how many requests the server received.
func (f *fakeServer) attempts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// reply answers with a status, headers ("Name: value") and a body.
func reply(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for _, h := range headers {
			name, value, _ := strings.Cut(h, ": ")
			w.Header().Set(name, value)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// waitForCancel answers only when the request is abandoned.
func waitForCancel(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

const answerOK = `{"choices":[{"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`

// newTestClient is a client of the server with a short backoff.
func newTestClient(t *testing.T, o OpenAIOptions) *OpenAI {
	t.Helper()
	c, err := NewOpenAI(o)
	if err != nil {
		t.Fatal(err)
	}
	c.backoff = time.Millisecond
	return c
}

func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON differs\n got: %s\nwant: %s", got, want)
	}
}

func TestOpenAIRequest(t *testing.T) {
	conversation := &Request{
		Purpose: PurposeTurn,
		Agent:   Agent{ID: "a1", Role: "root", Turn: 2},
		System:  "Be brief.",
		Messages: []Message{
			{Role: RoleUser, Content: "write a.txt"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "write_file", Arguments: `{"path":"a.txt"}`}}},
			{Role: RoleTool, ToolCallID: "c1", Name: "write_file", Content: `{"ok":true}`},
			{Role: RoleAssistant, Content: "Written."},
			{Role: RoleUser, Content: "thanks"},
		},
		Tools: []Tool{
			{Name: "write_file", Description: "Writes a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
			{Name: "noop"},
		},
	}
	tests := []struct {
		name     string
		key      string
		req      *Request
		wantBody string
		wantAuth string
	}{
		{
			name: "conversation with tools and key",
			key:  "sk-secret",
			req:  conversation,
			wantBody: `{
				"model": "m1",
				"messages": [
					{"role": "system", "content": "Be brief."},
					{"role": "user", "content": "write a.txt"},
					{"role": "assistant", "content": null, "tool_calls": [
						{"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\":\"a.txt\"}"}}
					]},
					{"role": "tool", "tool_call_id": "c1", "content": "{\"ok\":true}"},
					{"role": "assistant", "content": "Written."},
					{"role": "user", "content": "thanks"}
				],
				"tools": [
					{"type": "function", "function": {"name": "write_file", "description": "Writes a file.",
						"parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
					{"type": "function", "function": {"name": "noop", "parameters": {"type": "object"}}}
				]
			}`,
			wantAuth: "Bearer sk-secret",
		},
		{
			name:     "no tools, no system, no key",
			req:      &Request{Purpose: PurposeSummary, Messages: []Message{{Role: RoleUser, Content: "sum up"}}},
			wantBody: `{"model": "m1", "messages": [{"role": "user", "content": "sum up"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, reply(200, answerOK))
			c := newTestClient(t, OpenAIOptions{BaseURL: srv.URL + "/v1/", Model: "m1", APIKey: tt.key})
			if _, err := c.Complete(context.Background(), tt.req); err != nil {
				t.Fatal(err)
			}
			if srv.paths[0] != "/v1/chat/completions" {
				t.Errorf("path = %q, want /v1/chat/completions", srv.paths[0])
			}
			jsonEqual(t, srv.bodies[0], tt.wantBody)
			if got := srv.headers[0].Get("Authorization"); got != tt.wantAuth {
				t.Errorf("Authorization = %q, want %q", got, tt.wantAuth)
			}
			if _, present := srv.headers[0]["Authorization"]; present != (tt.wantAuth != "") {
				t.Errorf("Authorization present = %v, want %v", present, tt.wantAuth != "")
			}
		})
	}
}

func TestOpenAIResponse(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    *Response
		wantErr string
	}{
		{
			name: "tool calls and usage",
			body: `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}},
				{"id":"call_2","type":"function","function":{"name":"ls","arguments":{"dir":"."}}}]},
				"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150}}`,
			want: &Response{
				Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{
					{ID: "call_1", Name: "read_file", Arguments: `{"path":"a"}`},
					{ID: "call_2", Name: "ls", Arguments: `{"dir":"."}`},
				}},
				Usage: Usage{PromptTokens: 120, CompletionTokens: 30},
			},
		},
		{
			name: "plain answer",
			body: answerOK,
			want: &Response{Message: Message{Role: RoleAssistant, Content: "done"}, Usage: Usage{PromptTokens: 3, CompletionTokens: 1}},
		},
		{
			name: "null content, no calls",
			body: `{"choices":[{"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`,
			want: &Response{Message: Message{Role: RoleAssistant}},
		},
		{
			name: "cut at the length limit",
			body: `{"choices":[{"message":{"role":"assistant","content":""},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":4096}}`,
			want: &Response{
				Message: Message{Role: RoleAssistant},
				Usage:   Usage{PromptTokens: 9, CompletionTokens: 4096},
				Invalid: "the reply was cut off at the model's length limit before it held an answer or a tool call",
			},
		},
		{
			name: "length limit after some text",
			body: `{"choices":[{"message":{"content":"partial"},"finish_reason":"length"}]}`,
			want: &Response{Message: Message{Role: RoleAssistant, Content: "partial"}},
		},
		{name: "no choices", body: `{"choices":[],"usage":{}}`, wantErr: "model: openai: the server's answer has no choices"},
		{name: "not JSON", body: `<html>`, wantErr: "model: openai: the server's answer is not a chat completion"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, reply(200, tt.body))
			c := newTestClient(t, OpenAIOptions{BaseURL: srv.URL})
			got, err := c.Complete(context.Background(), &Request{Purpose: PurposeTurn})
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want prefix %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestOpenAIRetries(t *testing.T) {
	const key = "sk-very-secret-key"
	tests := []struct {
		name         string
		replies      []http.HandlerFunc
		maxRetries   int
		timeout      time.Duration
		backoff      time.Duration // the first backoff; 0: 1ms
		wantAttempts int
		wantErr      []string // substrings of the error; none: success
	}{
		{
			name:         "500 then success",
			replies:      []http.HandlerFunc{reply(500, `{"error":{"message":"overloaded"}}`), reply(200, answerOK)},
			maxRetries:   2,
			wantAttempts: 2,
		},
		{
			name:         "429 with Retry-After 0 then success",
			replies:      []http.HandlerFunc{reply(429, `{"error":{"message":"slow down"}}`, "Retry-After: 0"), reply(200, answerOK)},
			maxRetries:   1,
			backoff:      time.Hour, // the test's deadline ends an ignored Retry-After
			wantAttempts: 2,
		},
		{
			name:         "connection closed then success",
			replies:      []http.HandlerFunc{hangUp, reply(200, answerOK)},
			maxRetries:   1,
			wantAttempts: 2,
		},
		{
			name:         "attempt timeout then success",
			replies:      []http.HandlerFunc{waitForCancel, reply(200, answerOK)},
			maxRetries:   1,
			timeout:      50 * time.Millisecond,
			wantAttempts: 2,
		},
		{
			name:         "400 is not retried",
			replies:      []http.HandlerFunc{reply(400, `{"error":{"message":"messages: too long","type":"invalid_request_error"}}`)},
			maxRetries:   3,
			wantAttempts: 1,
			wantErr:      []string{"model: openai: ", "400 Bad Request", "messages: too long"},
		},
		{
			name:         "5xx retried until the limit",
			replies:      []http.HandlerFunc{reply(503, `upstream unavailable`)},
			maxRetries:   2,
			wantAttempts: 3,
			wantErr:      []string{"503 Service Unavailable", "upstream unavailable", "tried 3 times"},
		},
		{
			name:         "no retries",
			replies:      []http.HandlerFunc{reply(500, ``)},
			wantAttempts: 1,
			wantErr:      []string{"500 Internal Server Error", "(empty body)"},
		},
		{
			name:         "key echoed by the server is redacted",
			replies:      []http.HandlerFunc{reply(401, `{"error":{"message":"Incorrect API key provided: `+key+`"}}`)},
			maxRetries:   2,
			wantAttempts: 1,
			wantErr:      []string{"401 Unauthorized", "Incorrect API key provided: [api key]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, tt.replies...)
			c := newTestClient(t, OpenAIOptions{BaseURL: srv.URL, APIKey: key, MaxRetries: tt.maxRetries, Timeout: tt.timeout})
			if tt.backoff != 0 {
				c.backoff = tt.backoff
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := c.Complete(ctx, &Request{Purpose: PurposeTurn})
			if got := srv.attempts(); got != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", got, tt.wantAttempts)
			}
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Message.Content != "done" {
					t.Errorf("content = %q, want done", resp.Message.Content)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("error %q holds the API key", err)
			}
		})
	}
}

// signalingTransport signals on done after each round trip (the answer's
// headers are in).
type signalingTransport struct {
	next http.RoundTripper
	done chan struct{}
}

func (s *signalingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	s.done <- struct{}{}
	return resp, err
}

func TestOpenAICancel(t *testing.T) {
	tests := []struct {
		name string
		// reply answers the request; cancelAfterAnswer cancels once its
		// answer is in (in the backoff), else once the server has the request.
		reply             http.HandlerFunc
		cancelAfterAnswer bool
	}{
		{name: "during a request", reply: waitForCancel},
		{name: "during a backoff", reply: reply(503, `{"error":{"message":"busy"}}`, "Retry-After: 10"), cancelAfterAnswer: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, tt.reply)
			transport := &signalingTransport{next: http.DefaultTransport, done: make(chan struct{}, 10)}
			c := newTestClient(t, OpenAIOptions{BaseURL: srv.URL, MaxRetries: 5, HTTPClient: &http.Client{Transport: transport}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				if tt.cancelAfterAnswer {
					<-transport.done
				} else {
					<-srv.received
				}
				cancel()
			}()
			_, err := c.Complete(ctx, &Request{Purpose: PurposeTurn})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if !strings.HasPrefix(err.Error(), "model: openai: ") {
				t.Errorf("err = %q, want the model: openai: prefix", err)
			}
			if got := srv.attempts(); got != 1 {
				t.Errorf("attempts = %d, want 1", got)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"0", 0},
		{" 3 ", 3 * time.Second},
		{"120", maxBackoff},
		{"", -1},
		{"-2", -1},
		{"Wed, 21 Oct 2015 07:28:00 GMT", -1},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			if got := retryAfter(tt.header); got != tt.want {
				t.Errorf("retryAfter(%q) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}

func TestNewOpenAI(t *testing.T) {
	tests := []struct {
		name    string
		opts    OpenAIOptions
		wantErr string
	}{
		{name: "no base URL", opts: OpenAIOptions{Model: "m"}, wantErr: "model: openai: the base URL is not set"},
		{name: "negative retries", opts: OpenAIOptions{BaseURL: "http://x", MaxRetries: -1}, wantErr: "model: openai: max retries is -1, want at least 0"},
		{name: "valid", opts: OpenAIOptions{BaseURL: "http://x/v1/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewOpenAI(tt.opts)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.endpoint != "http://x/v1/chat/completions" {
				t.Errorf("endpoint = %q", c.endpoint)
			}
		})
	}
}
