// Command mcpnoop is the MCP baseline of the benchmarks: an MCP server
// written with the official go-sdk, with its defaults, serving the same no-op
// tool as bench/noop ("noop", no arguments, answers "ok").
//
// By default it reads JSON-RPC on stdin and writes it on stdout until stdin
// closes, in whichever protocol version its client asks for. With -http it
// serves streamable HTTP instead on a free loopback port, prints its endpoint
// ("http://127.0.0.1:PORT/mcp") as the first line on stdout, and serves
// until stdin closes. The endpoint serves both protocol eras, as toolhost's
// /mcp/ROLE does: a request whose Mcp-Protocol-Version header names
// mcpversion.Stateless or later goes to the go-sdk's StreamableHTTPHandler with
// Stateless set (which the SDK requires for that era: a temporary session per
// request), any other to one with no options (2025 sessions, by
// Mcp-Session-Id).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
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
		run = func() error { return serveHTTP(srv) }
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpnoop:", err)
		os.Exit(1)
	}
}

// serveHTTP serves srv as streamable HTTP at /mcp on a free loopback port
// until stdin closes, in both eras (see the package's comment).
func serveHTTP(srv *mcp.Server) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	get := func(*http.Request) *mcp.Server { return srv }
	sessions := mcp.NewStreamableHTTPHandler(get, nil)
	sessionless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Mcp-Protocol-Version") >= mcpversion.Stateless {
			sessionless.ServeHTTP(w, req)
			return
		}
		sessions.ServeHTTP(w, req)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(lis) }()
	fmt.Printf("http://%s/mcp\n", lis.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = hs.Close()
	}()
	if err := <-served; err != http.ErrServerClosed {
		return err
	}
	return nil
}
