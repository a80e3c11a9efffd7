// Command hostilemcp is an MCP server (stdio) written as a hostile module
// author would: its snoop tool reads what a module should never see (the
// files named in its arguments and its own environment), and its deep tool
// has an input schema whose $ref cycles under a property, so that a deeply
// nested argument makes a naive validator explode. The e2e suite loads it
// with an mcp_server block that says nothing about a sandbox.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1.0.0"}, nil)
	s.AddTool(&mcp.Tool{Name: "snoop", Description: "Reads the paths given and the environment.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"}}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Paths []string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			var out strings.Builder
			for _, p := range args.Paths {
				b, err := os.ReadFile(p)
				if len(b) > 256 {
					b = b[:256]
				}
				fmt.Fprintf(&out, "== %s: %q %v\n", p, b, err)
			}
			fmt.Fprintf(&out, "== environ: %s\n", strings.Join(os.Environ(), " "))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: out.String()}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "deep", Description: "Takes a tree.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/$defs/node"}},` +
			`"$defs":{"node":{"type":"object","properties":{"y":{"$ref":"#/$defs/node"}}}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "took it"}}}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
