// Command askserver is an MCP server over stdio, on the go-sdk, whose tools
// ask the client while they run: log sends log messages, sample asks for
// sampling, elicit asks twice for elicitation (after_ms later, when given),
// roots lists the client's roots; the prompt greeting and the resource
// ask://profile (or the URI of an argument "uri=URI") ask for the client's
// name as elicit does first. A client of the stateless
// era is asked with input_required rounds, a 2025 client with requests on
// its session. With the argument "legacy" it refuses server/discover, so
// that its clients speak the 2025 protocols.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

type sampleArgs struct {
	Prompt string `json:"prompt"`
	// Force asks even when the client did not declare sampling.
	Force bool `json:"force,omitempty"`
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "askserver", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}})
	uri := "ask://profile"
	for _, arg := range os.Args[1:] {
		if u, ok := strings.CutPrefix(arg, "uri="); ok {
			uri = u
		}
	}
	if slices.Contains(os.Args[1:], "legacy") {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "server/discover" {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no server/discover here"}
				}
				return next(ctx, method, req)
			}
		})
	}
	mcp.AddTool(s, &mcp.Tool{Name: "log", Description: "Logs three messages."}, logTool)
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "Asks the client's model."}, sampleTool)
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "Asks the client's user twice."}, elicitTool)
	mcp.AddTool(s, &mcp.Tool{Name: "roots", Description: "Lists the client's roots."}, rootsTool)
	s.AddPrompt(&mcp.Prompt{Name: "greeting", Description: "Asks the client's user for a name, to greet."}, greetingPrompt)
	s.AddResource(&mcp.Resource{URI: uri, Name: "profile", MIMEType: "text/plain"}, profileResource)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

// stateless reports whether the call's client speaks the stateless era.
func stateless(req *mcp.CallToolRequest) bool {
	return req.ProtocolVersion() >= mcpversion.Stateless
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func failed(s string) *mcp.CallToolResult {
	r := text(s)
	r.IsError = true
	return r
}

func logTool(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	for i, level := range []mcp.LoggingLevel{"info", "warning", "error"} {
		err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: "askserver", Data: map[string]any{"n": i, "text": fmt.Sprintf("message %d", i)}})
		if err != nil {
			return failed("log: " + err.Error()), nil, nil
		}
	}
	return text("logged 3"), nil, nil
}

func sampleTool(ctx context.Context, req *mcp.CallToolRequest, args sampleArgs) (*mcp.CallToolResult, any, error) {
	params := &mcp.CreateMessageParams{MaxTokens: 100, SystemPrompt: "Be brief.",
		Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: args.Prompt}}}}
	var res *mcp.CreateMessageResult
	if stateless(req) {
		got, ok := req.Params.InputResponses["model"]
		if !ok {
			if caps := req.ClientCapabilities(); !args.Force && (caps == nil || caps.Sampling == nil) {
				return failed("the client does not support sampling"), nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"model": params}, RequestState: "sample"}, nil, nil
		}
		r, ok := got.(*mcp.CreateMessageWithToolsResult)
		if !ok || len(r.Content) != 1 {
			return failed(fmt.Sprintf("the client answered %T", got)), nil, nil
		}
		res = &mcp.CreateMessageResult{Content: r.Content[0], Model: r.Model, Role: r.Role, StopReason: r.StopReason}
	} else {
		var err error
		if res, err = req.Session.CreateMessage(ctx, params); err != nil {
			return failed("sampling: " + err.Error()), nil, nil
		}
	}
	t, _ := res.Content.(*mcp.TextContent)
	if t == nil {
		return failed("the model answered no text"), nil, nil
	}
	return text(fmt.Sprintf("the model %s said: %s", res.Model, t.Text)), nil, nil
}

// The elicitations of elicit: a name, then a confirmation.
var (
	askName    = &mcp.ElicitParams{Mode: "form", Message: "Your name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string", "default": "Jane"}}, "required": []any{"name"}}}
	askConfirm = &mcp.ElicitParams{Mode: "form", Message: "Sure?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"sure": map[string]any{"type": "boolean"}}}}
)

type elicitArgs struct {
	// AfterMs delays the first question, for a call that has become a
	// task meanwhile.
	AfterMs int `json:"after_ms,omitempty"`
}

func elicitTool(ctx context.Context, req *mcp.CallToolRequest, args elicitArgs) (*mcp.CallToolResult, any, error) {
	if req.Params.RequestState == "" && len(req.Params.InputResponses) == 0 {
		select {
		case <-time.After(time.Duration(args.AfterMs) * time.Millisecond):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	var name, sure *mcp.ElicitResult
	if stateless(req) {
		state, in := req.Params.RequestState, req.Params.InputResponses
		switch {
		case state == "" || in["name"] == nil && !strings.HasPrefix(state, "named:"):
			if caps := req.ClientCapabilities(); caps == nil || caps.Elicitation == nil {
				return failed("the client does not support elicitation"), nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"name": askName}, RequestState: "start"}, nil, nil
		case in["name"] != nil:
			name = in["name"].(*mcp.ElicitResult)
			if name.Action != "accept" {
				return text("no name: " + name.Action), nil, nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": askConfirm}, RequestState: "named:" + fmt.Sprint(name.Content["name"])}, nil, nil
		case in["confirm"] != nil:
			sure = in["confirm"].(*mcp.ElicitResult)
			name = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": strings.TrimPrefix(state, "named:")}}
		default:
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": askConfirm}, RequestState: state}, nil, nil
		}
	} else {
		var err error
		if name, err = req.Session.Elicit(ctx, askName); err != nil {
			return failed("elicitation: " + err.Error()), nil, nil
		}
		if name.Action != "accept" {
			return text("no name: " + name.Action), nil, nil
		}
		if sure, err = req.Session.Elicit(ctx, askConfirm); err != nil {
			return failed("elicitation: " + err.Error()), nil, nil
		}
	}
	return text(fmt.Sprintf("hello %v, sure: %v (%s)", name.Content["name"], sure.Content["sure"], sure.Action)), nil, nil
}

func rootsTool(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	var res *mcp.ListRootsResult
	if stateless(req) {
		got, ok := req.Params.InputResponses["client_roots"]
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"client_roots": &mcp.ListRootsParams{}}, RequestState: "roots"}, nil, nil
		}
		if res, ok = got.(*mcp.ListRootsResult); !ok {
			return failed(fmt.Sprintf("the client answered %T", got)), nil, nil
		}
	} else {
		var err error
		if res, err = req.Session.ListRoots(ctx, nil); err != nil {
			return failed("roots: " + err.Error()), nil, nil
		}
	}
	var uris []string
	for _, r := range res.Roots {
		uris = append(uris, r.URI)
	}
	if len(uris) == 0 {
		return text("roots: none"), nil, nil
	}
	return text("roots: " + strings.Join(uris, " ")), nil, nil
}

// askedName asks the client's user for a name: a stateless client with an
// input_required round (round, when its answer is not in), a 2025 client
// on its session.
func askedName(ctx context.Context, ss *mcp.ServerSession, version string, in mcp.InputResponseMap) (name string, round mcp.InputRequestMap, err error) {
	if version >= mcpversion.Stateless {
		r, ok := in["name"].(*mcp.ElicitResult)
		if !ok {
			return "", mcp.InputRequestMap{"name": askName}, nil
		}
		return fmt.Sprint(r.Content["name"]), nil, nil
	}
	r, err := ss.Elicit(ctx, askName)
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprint(r.Content["name"]), nil, nil
}

func greetingPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	name, round, err := askedName(ctx, req.Session, req.ProtocolVersion(), req.Params.InputResponses)
	if err != nil {
		return nil, err
	}
	if round != nil {
		return &mcp.GetPromptResult{InputRequests: round, RequestState: "greeting"}, nil
	}
	return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "Greet " + name}}}}, nil
}

func profileResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	name, round, err := askedName(ctx, req.Session, req.ProtocolVersion(), req.Params.InputResponses)
	if err != nil {
		return nil, err
	}
	if round != nil {
		return &mcp.ReadResourceResult{InputRequests: round, RequestState: "profile"}, nil
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "name: " + name}}}, nil
}
