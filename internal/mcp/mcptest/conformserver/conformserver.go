// Package conformserver is an MCP server (go-sdk) offering what the server
// scenarios of the official conformance suite (@modelcontextprotocol/conformance)
// call: its test tools, prompts with completions, resources with a template
// and subscriptions, logging, and the multi-round-trip tools of the sessionless
// era. Its command (./cmd) serves it over stdio, for toolhost to load
// as an mcp_server module, or over streamable HTTP on loopback, for the suite
// to reach directly; the e2e tests run the suite both ways.
package conformserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// The contents the suite checks, as its scenario sources state them.
const (
	pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	wavBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

// schema2020 is json_schema_2020_12_tool's input schema: the 2020-12
// keywords the suite checks are kept through tools/list.
const schema2020 = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},
"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},
"phone":{"type":"string"},"email":{"type":"string"}},
"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],
"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},
"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`

// Server is the fixture's MCP server.
type Server struct {
	*mcp.Server
	secret []byte // signs the request state of test_input_required_result_tampered_state
}

// New returns the fixture's server with every tool, prompt and resource.
func New() *Server {
	s := &Server{secret: []byte(rand.Text())}
	s.Server = mcp.NewServer(&mcp.Implementation{Name: "conformserver", Version: "1.0.0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Prompts:     &mcp.PromptCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{Subscribe: true, ListChanged: true},
			Logging:     &mcp.LoggingCapabilities{},
			Completions: &mcp.CompletionCapabilities{},
		},
		CompletionHandler:  complete,
		SubscribeHandler:   func(_ context.Context, r *mcp.SubscribeRequest) error { return subscribable(r.Params.URI) },
		UnsubscribeHandler: func(_ context.Context, r *mcp.UnsubscribeRequest) error { return subscribable(r.Params.URI) },
	})
	s.addTools()
	s.addAskingTools()
	s.addPrompts()
	s.addResources()
	return s
}

// subscribable says whether a client may subscribe to the resource uri,
// one of the fixed resources (the go-sdk keeps the subscriptions).
func subscribable(uri string) error {
	if !slices.Contains([]string{"test://static-text", "test://static-binary", "test://watched-resource"}, uri) {
		return mcp.ResourceNotFoundError(uri)
	}
	return nil
}

// Handler serves the fixture over streamable HTTP, in both eras: requests
// of mcpversion.Stateless and later sessionless, the others in sessions
// (with an event store, so that a client can resume a stream the server
// closed). It keeps the SDK's DNS-rebinding protection.
func (s *Server) Handler() http.Handler {
	sessions := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.Server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	sessionless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.Server },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= mcpversion.Stateless {
			sessionless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
}

// text is a result of one text block.
func text(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// noArgs is the input schema of a tool without arguments.
var noArgs = json.RawMessage(`{"type":"object","properties":{}}`)

// oneString is the input schema of a tool with one string argument.
func oneString(name string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%q:{"type":"string"}},"required":[%q]}`, name, name))
}

func (s *Server) addTools() {
	png, wav := decode(pngBase64), decode(wavBase64)
	fixed := func(name, desc string, content ...mcp.Content) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: noArgs},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: content}, nil
			})
	}
	fixed("test_simple_text", "Returns a text block.", &mcp.TextContent{Text: "This is a simple text response for testing."})
	fixed("test_image_content", "Returns an image block.", &mcp.ImageContent{Data: png, MIMEType: "image/png"})
	fixed("test_audio_content", "Returns an audio block.", &mcp.AudioContent{Data: wav, MIMEType: "audio/wav"})
	fixed("test_embedded_resource", "Returns an embedded resource.", &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}})
	fixed("test_multiple_content_types", "Returns text, an image and an embedded resource, in that order.",
		&mcp.TextContent{Text: "Multiple content types test:"},
		&mcp.ImageContent{Data: png, MIMEType: "image/png"},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json",
			Text: `{"test":"data","value":123}`}})
	s.AddTool(&mcp.Tool{Name: "test_error_handling", Description: "Always fails.", InputSchema: noArgs},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res := text("This tool intentionally returns an error for testing")
			res.IsError = true
			return res, nil
		})
	s.AddTool(&mcp.Tool{Name: "test_tool_with_logging", Description: "Logs three messages at level info.", InputSchema: noArgs},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i, m := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 {
					if err := pause(ctx); err != nil {
						return nil, err
					}
				}
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "conformserver", Data: m}); err != nil {
					return nil, err
				}
			}
			return text("Tool with logging executed successfully"), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_tool_with_progress", Description: "Reports progress 0, 50 and 100 of 100.", InputSchema: noArgs},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			token := req.Params.GetProgressToken()
			for i, p := range []float64{0, 50, 100} {
				if i > 0 {
					if err := pause(ctx); err != nil {
						return nil, err
					}
				}
				if token == nil {
					continue
				}
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p, Total: 100,
					Message: fmt.Sprintf("Completed step %v of 100", p)}); err != nil {
					return nil, err
				}
			}
			return text("%v", token), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_reconnection", Description: "Closes its SSE stream mid-call; the result arrives once the client resumes it.", InputSchema: noArgs},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Extra != nil && req.Extra.CloseSSEStream != nil {
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 500 * time.Millisecond})
			}
			return text("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_custom_headers", Description: "Takes a region that the client also sends as the header Mcp-Param-Region.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("Called with: %s", req.Params.Arguments), nil
		})
	// The diagnostic tools of the suite's sessionless scenario: one that
	// streams a progress notification before its result (never a request),
	// one that logs, which a client hears only when it asked for a level.
	s.AddTool(&mcp.Tool{Name: "test_streaming_elicitation", Description: "Reports progress, then answers.", InputSchema: noArgs},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if token := req.Params.GetProgressToken(); token != nil {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 50, Total: 100}); err != nil {
					return nil, err
				}
			}
			return text("Streaming complete"), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_logging_tool", Description: "Logs a message at level info.", InputSchema: noArgs},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "conformserver", Data: "Diagnostic trace logging activated"}); err != nil {
				return nil, err
			}
			return text("Logging evaluated"), nil
		})
	// The sessionless scenario's hooks that change the lists, for a client
	// listening to list changes: each adds a tool (or prompt) of its own,
	// or removes it if it is there.
	dynamicTool := &mcp.Tool{Name: "test_dynamic_tool", Description: "Comes and goes with test_trigger_tool_change.", InputSchema: noArgs}
	dynamicPrompt := &mcp.Prompt{Name: "test_dynamic_prompt", Description: "Comes and goes with test_trigger_prompt_change."}
	var dynamic sync.Mutex
	toolThere, promptThere := false, false
	s.AddTool(&mcp.Tool{Name: "test_trigger_tool_change", Description: "Adds the tool test_dynamic_tool, or removes it.", InputSchema: noArgs},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			dynamic.Lock()
			defer dynamic.Unlock()
			if toolThere = !toolThere; toolThere {
				s.AddTool(dynamicTool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("here"), nil })
			} else {
				s.RemoveTools(dynamicTool.Name)
			}
			return text("Mutation triggered"), nil
		})
	s.AddTool(&mcp.Tool{Name: "test_trigger_prompt_change", Description: "Adds the prompt test_dynamic_prompt, or removes it.", InputSchema: noArgs},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			dynamic.Lock()
			defer dynamic.Unlock()
			if promptThere = !promptThere; promptThere {
				s.AddPrompt(dynamicPrompt, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "here"}}}}, nil
				})
			} else {
				s.RemovePrompts(dynamicPrompt.Name)
			}
			return text("Mutation triggered"), nil
		})
	s.AddTool(&mcp.Tool{Name: "json_schema_2020_12_tool", Description: "Takes arguments described with JSON Schema 2020-12 keywords.",
		InputSchema: json.RawMessage(schema2020)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("JSON Schema 2020-12 tool called with: %s", req.Params.Arguments), nil
		})
}

// pause waits the ~50 ms the suite's scenarios put between two progress
// notifications or log messages of a tool.
func pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(50 * time.Millisecond):
		return nil
	}
}

// decode returns the bytes of a base64 constant.
func decode(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func (s *Server) addPrompts() {
	s.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A prompt without arguments."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "This is a simple prompt for testing."}}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments", Description: "A prompt with two required arguments.",
		Arguments: []*mcp.PromptArgument{{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])}}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource", Description: "A prompt that embeds a resource.",
		Arguments: []*mcp.PromptArgument{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"],
					MIMEType: "text/plain", Text: "Embedded resource content for testing."}}},
				{Role: "user", Content: &mcp.TextContent{Text: "Please process the embedded resource above."}}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt with an image."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.ImageContent{Data: decode(pngBase64), MIMEType: "image/png"}},
				{Role: "user", Content: &mcp.TextContent{Text: "Please analyze the image above."}}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Description: "Asks the client for context (a multi-round-trip request) before it answers."},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if r, ok := req.Params.InputResponses["user_context"].(*mcp.ElicitResult); ok {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
					Content: &mcp.TextContent{Text: "Prompt with context: " + field(r, "context")}}}}, nil
			}
			return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{"user_context": elicit("What context should the prompt use?", "context", "string")}}, nil
		})
}

// complete offers values for the arguments of test_prompt_with_arguments
// and of the resource template, those that start with what was typed.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	var values []string
	if req.Params.Ref != nil {
		for _, v := range []string{"paris", "park", "party", "1", "2", "42"} {
			if strings.HasPrefix(v, req.Params.Argument.Value) {
				values = append(values, v)
			}
		}
	}
	if values == nil {
		values = []string{}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}

func (s *Server) addResources() {
	fixed := func(r *mcp.Resource, c *mcp.ResourceContents) {
		s.AddResource(r, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
		})
	}
	fixed(&mcp.Resource{URI: "test://static-text", Name: "static-text", Title: "Static Text Resource", Description: "A static text resource.", MIMEType: "text/plain"},
		&mcp.ResourceContents{URI: "test://static-text", MIMEType: "text/plain", Text: "This is the content of the static text resource."})
	fixed(&mcp.Resource{URI: "test://static-binary", Name: "static-binary", Title: "Static Binary Resource", Description: "A PNG image.", MIMEType: "image/png"},
		&mcp.ResourceContents{URI: "test://static-binary", MIMEType: "image/png", Blob: decode(pngBase64)})
	fixed(&mcp.Resource{URI: "test://watched-resource", Name: "watched-resource", Title: "Watched Resource", Description: "A resource to subscribe to.", MIMEType: "text/plain"},
		&mcp.ResourceContents{URI: "test://watched-resource", MIMEType: "text/plain", Text: "Watched resource content"})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template", Title: "Resource Template",
		Description: "Data by id.", MIMEType: "application/json"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			uri := req.Params.URI
			id, ok := strings.CutPrefix(uri, "test://template/")
			if id, ok = strings.CutSuffix(id, "/data"); !ok || id == "" || strings.Contains(id, "/") {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			b, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
		})
}

// elicit asks for one field of a type.
func elicit(message, name, typ string) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: message, RequestedSchema: json.RawMessage(
		fmt.Sprintf(`{"type":"object","properties":{%q:{"type":%q}},"required":[%q]}`, name, typ, name))}
}

// field is a field of an elicitation's answer as text, "unknown" when it
// is missing or not a string.
func field(r *mcp.ElicitResult, name string) string {
	if v, ok := r.Content[name].(string); ok {
		return v
	}
	return "unknown"
}

// sample asks the client's model.
func sample(prompt string, maxTokens int64) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{MaxTokens: maxTokens, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}}}
}

// sampled is the text of a sampling answer, "" when it has none.
func sampled(r mcp.InputResponse) string {
	var content []mcp.Content
	switch r := r.(type) {
	case *mcp.CreateMessageResult:
		content = []mcp.Content{r.Content}
	case *mcp.CreateMessageWithToolsResult:
		content = r.Content
	}
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// sign returns state with its MAC; verify returns the state of a signed
// one, false when it was tampered with.
func (s *Server) sign(state string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(state))
	return state + "." + hex.EncodeToString(m.Sum(nil))
}

func (s *Server) verify(signed string) (string, bool) {
	i := strings.LastIndexByte(signed, '.')
	if i < 0 {
		return "", false
	}
	state := signed[:i]
	return state, hmac.Equal([]byte(s.sign(state)), []byte(signed))
}

// asking is a tool that asks the client for input: it returns input
// requests (an input_required result from mcpversion.Stateless on; before it, the
// SDK sends them to the client as requests within the call and calls the
// tool again with the answers) until it has what it needs.
type asking func(p *mcp.CallToolParamsRaw, caps *mcp.ClientCapabilities) (*mcp.CallToolResult, error)

func (s *Server) addAskingTools() {
	add := func(name, desc string, input json.RawMessage, h asking) {
		s.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: input},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return h(req.Params, req.ClientCapabilities())
			})
	}
	add("test_sampling", "Asks the client's model the prompt given.", oneString("prompt"), func(p *mcp.CallToolParamsRaw, _ *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		if r, ok := p.InputResponses["sample"]; ok {
			return text("LLM response: %s", sampled(r)), nil
		}
		var args struct{ Prompt string }
		_ = json.Unmarshal(p.Arguments, &args)
		return ask("sample", sample(args.Prompt, 100)), nil
	})
	form := func(name, desc, message, schema string) {
		input := noArgs
		if message == "" {
			input = oneString("message")
		}
		add(name, desc, input, func(p *mcp.CallToolParamsRaw, _ *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
			if r, ok := p.InputResponses["form"].(*mcp.ElicitResult); ok {
				b, _ := json.Marshal(r.Content)
				if r.Content == nil {
					b = []byte("{}")
				}
				return text("Elicitation completed: action=%s, content=%s", r.Action, b), nil
			}
			msg := message
			if msg == "" {
				var args struct{ Message string }
				_ = json.Unmarshal(p.Arguments, &args)
				msg = args.Message
			}
			return ask("form", &mcp.ElicitParams{Message: msg, RequestedSchema: json.RawMessage(schema)}), nil
		})
	}
	form("test_elicitation", "Asks the user the message given.", "",
		`{"type":"object","properties":{"username":{"type":"string","description":"User's response"},`+
			`"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`)
	form("test_elicitation_sep1034_defaults", "Asks the user a form whose fields have defaults.", "Please review and update the form fields with defaults",
		`{"type":"object","properties":{"name":{"type":"string","description":"User name","default":"John Doe"},`+
			`"age":{"type":"integer","description":"User age","default":30},"score":{"type":"number","description":"User score","default":95.5},`+
			`"status":{"type":"string","description":"User status","enum":["active","inactive","pending"],"default":"active"},`+
			`"verified":{"type":"boolean","description":"Verification status","default":true}},"required":[]}`)
	form("test_elicitation_sep1330_enums", "Asks the user a form of every kind of enum.", "Please select options from the enum fields",
		`{"type":"object","properties":{"untitledSingle":{"type":"string","description":"Select one option","enum":["option1","option2","option3"]},`+
			`"titledSingle":{"type":"string","description":"Select one option with titles","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},`+
			`"legacyEnum":{"type":"string","description":"Select one option (legacy)","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},`+
			`"untitledMulti":{"type":"array","description":"Select multiple options","minItems":1,"maxItems":3,"items":{"type":"string","enum":["option1","option2","option3"]}},`+
			`"titledMulti":{"type":"array","description":"Select multiple options with titles","minItems":1,"maxItems":3,"items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}},"required":[]}`)

	add("test_input_required_result_elicitation", "Asks the user's name.", noArgs, func(p *mcp.CallToolParamsRaw, _ *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		if r, ok := p.InputResponses["user_name"].(*mcp.ElicitResult); ok {
			return text("Hello, %s!", field(r, "name")), nil
		}
		return ask("user_name", elicit("What is your name?", "name", "string")), nil
	})
	add("test_input_required_result_sampling", "Asks the client's model a question.", noArgs, func(p *mcp.CallToolParamsRaw, _ *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		if r, ok := p.InputResponses["sample_request"]; ok {
			return text("Sampling result: %s", sampled(r)), nil
		}
		return ask("sample_request", sample("What is the capital of France?", 100)), nil
	})
	add("test_input_required_result_list_roots", "Asks the client's roots.", noArgs, func(p *mcp.CallToolParamsRaw, _ *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		if r, ok := p.InputResponses["roots_request"].(*mcp.ListRootsResult); ok {
			return text("Found %d root(s)", len(r.Roots)), nil
		}
		return ask("roots_request", &mcp.ListRootsParams{}), nil
	})
	add("test_input_required_result_request_state", "Asks for a confirmation, with a request state to echo.", noArgs, func(p *mcp.CallToolParamsRaw, _ *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		if r, ok := p.InputResponses["confirm"].(*mcp.ElicitResult); ok && strings.HasPrefix(p.RequestState, "request-state:") && r.Content["ok"] == true {
			return text("state-ok: requestState validated"), nil
		}
		res := ask("confirm", elicit("Please confirm", "ok", "boolean"))
		res.RequestState = "request-state:" + rand.Text()
		return res, nil
	})
	add("test_input_required_result_multiple_inputs", "Asks for a name, a greeting and the roots at once.", noArgs, func(p *mcp.CallToolParamsRaw, _ *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		name, ok1 := p.InputResponses["user_name"].(*mcp.ElicitResult)
		greeting, ok2 := p.InputResponses["greeting"]
		roots, ok3 := p.InputResponses["client_roots"].(*mcp.ListRootsResult)
		if ok1 && ok2 && ok3 && strings.HasPrefix(p.RequestState, "multiple-inputs:") {
			g := sampled(greeting)
			if g == "" {
				g = "Hello there!"
			}
			return text("Name: %s; Greeting: %s; Roots: %d", field(name, "name"), g, len(roots.Roots)), nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
			"user_name":    elicit("What is your name?", "name", "string"),
			"greeting":     sample("Generate a greeting", 50),
			"client_roots": &mcp.ListRootsParams{}},
			RequestState: "multiple-inputs:" + rand.Text()}, nil
	})
	add("test_input_required_result_multi_round", "Asks a name, then a colour, in two rounds.", noArgs, func(p *mcp.CallToolParamsRaw, _ *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		round, name, _ := strings.Cut(p.RequestState, ":")
		if r, ok := p.InputResponses["step1"].(*mcp.ElicitResult); ok && round == "1" {
			res := ask("step2", elicit("Step 2: What is your favorite color?", "color", "string"))
			res.RequestState = "2:" + field(r, "name")
			return res, nil
		}
		if r, ok := p.InputResponses["step2"].(*mcp.ElicitResult); ok && round == "2" {
			return text("Multi-round complete for %s who likes %s", name, field(r, "color")), nil
		}
		res := ask("step1", elicit("Step 1: What is your name?", "name", "string"))
		res.RequestState = "1:"
		return res, nil
	})
	add("test_input_required_result_tampered_state", "Asks for a confirmation, with a signed request state.", noArgs, func(p *mcp.CallToolParamsRaw, _ *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		if p.RequestState != "" {
			state, ok := s.verify(p.RequestState)
			if !ok {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState integrity check failed"}
			}
			if _, ok := p.InputResponses["confirm"]; ok && strings.HasPrefix(state, "tamper-test:") {
				return text("integrity-ok: state verified"), nil
			}
		}
		res := ask("confirm", elicit("Please confirm", "ok", "boolean"))
		res.RequestState = s.sign("tamper-test:" + rand.Text())
		return res, nil
	})
	add("test_input_required_result_capabilities", "Asks only for what the client declared it can answer.", noArgs, func(p *mcp.CallToolParamsRaw, caps *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		if len(p.InputResponses) > 0 {
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range p.InputResponses {
					if !yield(k) {
						return
					}
				}
			})
			return text("capabilities-ok: received %s", strings.Join(keys, ",")), nil
		}
		asks := mcp.InputRequestMap{}
		if caps != nil && caps.Elicitation != nil {
			asks["elicit_input"] = elicit("Elicitation input", "value", "string")
		}
		if caps != nil && caps.Sampling != nil {
			asks["sample_input"] = sample("Sample request", 50)
		}
		if len(asks) == 0 {
			return text("No supported capabilities declared"), nil
		}
		return &mcp.CallToolResult{InputRequests: asks, RequestState: s.sign("capabilities-test:" + rand.Text())}, nil
	})
	add("test_missing_capability", "Needs the client's sampling capability.", noArgs, func(_ *mcp.CallToolParamsRaw, caps *mcp.ClientCapabilities) (*mcp.CallToolResult, error) {
		if caps == nil || caps.Sampling == nil {
			return nil, &jsonrpc.Error{Code: -32021, Message: "Missing required client capability: sampling",
				Data: json.RawMessage(`{"requiredCapabilities":{"sampling":{}}}`)}
		}
		return text("Success"), nil
	})
}

// ask is an input_required result of one request.
func ask(key string, r mcp.InputRequest) *mcp.CallToolResult {
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{key: r}}
}
