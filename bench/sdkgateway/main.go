// Command sdkgateway is the floor of the benchmarks' MCP gateways: a
// gateway made of the go-sdk alone, with its defaults. It runs the stdio MCP
// server its arguments name (sdkgateway COMMAND [ARG...]) and opens one
// client session with it (mcp.CommandTransport), which every request
// shares; it lists the server's tools once, at start, and offers each as it
// is (name, description, input schema and the rest) on a go-sdk server,
// whose handler forwards the call's arguments over that session and
// answers with the server's result as is. Nothing else: no policy, no
// events, no other method.
//
// It serves that server over streamable HTTP in both protocol eras on a
// free loopback port, its endpoint ("http://127.0.0.1:PORT/mcp") printed
// as the first line on stdout, until stdin closes (bench/internal/sdkhttp).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/bench/internal/sdkhttp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sdkgateway:", err)
		os.Exit(1)
	}
}

// run serves the stdio server argv runs (see the package's comment).
func run(argv []string) error {
	if len(argv) == 0 {
		return errors.New("usage: sdkgateway COMMAND [ARG...]: the stdio MCP server to serve")
	}
	ctx := context.Background()
	impl := &mcp.Implementation{Name: "sdkgateway", Version: "1.0.0"}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	upstream, err := mcp.NewClient(impl, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	defer upstream.Close()
	srv := mcp.NewServer(impl, nil)
	forward := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args any // none when the call has none, not null
		if len(req.Params.Arguments) > 0 {
			args = req.Params.Arguments
		}
		return upstream.CallTool(ctx, &mcp.CallToolParams{Name: req.Params.Name, Arguments: args})
	}
	for tool, err := range upstream.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("%s: tools/list: %w", argv[0], err)
		}
		srv.AddTool(tool, forward)
	}
	return sdkhttp.Serve(srv)
}
