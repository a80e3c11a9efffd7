package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/server"
)

// mcpCmd runs the host and serves one role's MCP server over stdin and
// stdout until stdin closes (or SIGINT/SIGTERM). Only MCP messages go to
// stdout; logs go to stderr. `mcp import` is mcpImportCmd.
func mcpCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "import" {
		return mcpImportCmd(args[1:], stdout, stderr)
	}
	fs, c := newFlags("mcp", stderr, "warn")
	role := fs.String("role", "", "the role whose tools to serve (required)")
	if fs.Parse(args) != nil {
		return 2
	}
	if *role == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: toolhost mcp -role R [-config F]\n       toolhost mcp import FILE")
		return 2
	}
	return c.withHost(stderr, func(ctx context.Context, h *host.Host) int {
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		t := &mcp.IOTransport{Reader: os.Stdin, Writer: nopWriteCloser{stdout}}
		if err := server.ServeMCP(ctx, h, *role, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			fmt.Fprintf(stderr, "toolhost: mcp: %v\n", err)
			return 1
		}
		return 0
	})
}

// nopWriteCloser leaves the command's stdout open when the transport closes.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
