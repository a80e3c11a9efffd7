// Command mcpnoop is the MCP baseline of the benchmarks: an MCP server
// written with the official go-sdk, with its defaults, serving the same no-op
// tool as bench/noop ("noop", no arguments, answers "ok").
//
// By default it reads JSON-RPC on stdin and writes it on stdout until stdin
// closes, in whichever protocol version its client asks for. With -http it
// serves streamable HTTP instead on a free loopback port, prints its endpoint
// ("http://127.0.0.1:PORT/mcp") as the first line on stdout, and serves
// until stdin closes. The endpoint serves both protocol eras, as toolhost's
// /mcp/ROLE does (bench/internal/sdkhttp).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/bench/internal/sdkhttp"
)

// NoArgs is the no-op tool's input: an empty object.
type NoArgs struct{}

func main() {
	overHTTP := flag.Bool("http", false, "serve streamable HTTP on a loopback port (printed on stdout) until stdin closes, instead of stdio")
	flag.Parse()
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpnoop", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "noop", Description: "Do nothing and answer ok."},
		func(context.Context, *mcp.CallToolRequest, NoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	run := func() error { return srv.Run(context.Background(), &mcp.StdioTransport{}) }
	if *overHTTP {
		run = func() error { return sdkhttp.Serve(srv) }
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpnoop:", err)
		os.Exit(1)
	}
}
