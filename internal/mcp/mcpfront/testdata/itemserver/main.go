// Command itemserver is an MCP server over stdio, on the go-sdk, that
// offers prompts, resources, a resource template, completions and
// resource subscriptions, for the tests of the MCP front. Its one argument
// names it (NAME): its resources are test://NAME/…, its templates
// test://NAME/items/{id} and test://NAME/big/{n} (n bytes of binary
// data, then two texts of n bytes), its prompt NAME_greet; every instance also
// offers the prompt shared and the resource shared://x, which clash, and
// the template shared://{NAME}, which match one another's. The tool
// touch_NAME announces an update of test://NAME/watched (or of its uri) to
// its subscribers. The tool grow_NAME adds the prompt NAME_more. A
// completion and a message's annotation hold a secret. The instance named
// plain offers its tools alone.
package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// secret looks like a GitHub token, which the pipeline redacts: one of the
// completions, and the last-modified annotation of a prompt's message.
const secret = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"

func main() {
	name := os.Args[1]
	base := "test://" + name + "/"
	srv := mcp.NewServer(&mcp.Implementation{Name: "items-" + name, Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var values []string
			for _, v := range []string{"alice", "bob", "bert", "7", "8", secret} {
				if strings.HasPrefix(v, req.Params.Argument.Value) {
					values = append(values, v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
		},
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "touch_" + name, Description: "Announce an update of the watched resource, or of uri."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			URI string `json:"uri,omitempty"`
		}) (*mcp.CallToolResult, any, error) {
			if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: cmp.Or(in.URI, base+"watched")}); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched"}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "grow_" + name, Description: "Add the prompt NAME_more, which announces prompts/list_changed."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			srv.AddPrompt(&mcp.Prompt{Name: name + "_more"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "more"}}}}, nil
			})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
		})
	if name != "plain" {
		addItems(srv, name)
	}
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// addItems adds the prompts, resources and templates of the instance name.
func addItems(srv *mcp.Server, name string) {
	base := "test://" + name + "/"
	srv.AddPrompt(&mcp.Prompt{Name: name + "_greet", Title: "Greet", Description: "Greets someone.",
		Arguments: []*mcp.PromptArgument{{Name: "who", Description: "whom to greet", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			who := req.Params.Arguments["who"]
			return &mcp.GetPromptResult{Description: "a greeting for " + who, Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Please greet " + who + "."}},
				{Role: "assistant", Content: &mcp.TextContent{Text: "Hello, " + who + "!", Annotations: &mcp.Annotations{Priority: 0.5, LastModified: secret}}},
			}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "shared", Description: "Offered by every instance."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "shared prompt of " + name}}}}, nil
		})
	text := func(uri, s string) mcp.ResourceHandler {
		return func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: s}}}, nil
		}
	}
	srv.AddResource(&mcp.Resource{URI: base + "text", Name: "text", Title: "A text", MIMEType: "text/plain", Size: 11,
		Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}}}, text(base+"text", "text of "+name))
	srv.AddResource(&mcp.Resource{URI: base + "binary", Name: "binary", MIMEType: "application/octet-stream"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: base + "binary", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2, 0xff}}}}, nil
		})
	srv.AddResource(&mcp.Resource{URI: base + "watched", Name: "watched"}, text(base+"watched", "watched of "+name))
	srv.AddResource(&mcp.Resource{URI: "shared://x", Name: "shared"}, text("shared://x", "shared of "+name))
	item := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "item " + req.Params.URI + " of " + name}}}, nil
	}
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: base + "items/{id}", Name: "item"}, item)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: base + "big/{n}", Name: "big"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			n, _ := strconv.Atoi(strings.TrimPrefix(req.Params.URI, base+"big/"))
			uri := req.Params.URI
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: uri, MIMEType: "application/octet-stream", Blob: make([]byte, n)},
				{URI: uri, MIMEType: "text/plain", Text: strings.Repeat("x", n)},
				{URI: uri, MIMEType: "text/plain", Text: strings.Repeat("y", n)},
			}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "shared://{" + name + "}", Name: "shared item"}, item)
}
