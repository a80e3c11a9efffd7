// Command mcpnoop is the MCP baseline of the benchmarks: a stdio MCP server
// written with the official go-sdk, serving the same no-op tool as
// bench/noop ("noop", no arguments, answers "ok"). It reads JSON-RPC on stdin
// and writes it on stdout until stdin closes.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NoArgs is the no-op tool's input: an empty object.
type NoArgs struct{}

func main() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpnoop", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "noop", Description: "Do nothing and answer ok."},
		func(context.Context, *mcp.CallToolRequest, NoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpnoop:", err)
		os.Exit(1)
	}
}
