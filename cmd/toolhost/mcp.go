package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpsource"
	"github.com/toolhost/toolhost/server"
)

// mcpCmd runs the host and serves one role's MCP server over the process's
// stdin and stdout until stdin closes (or SIGINT/SIGTERM). Only MCP messages
// go to stdout; logs go to stderr. `mcp import` is mcpImportCmd.
func mcpCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "import" {
		return mcpImportCmd(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "inspect" {
		return mcpInspectCmd(args[1:], stdout, stderr)
	}
	fs, c := newFlags("mcp", stderr, "warn")
	role := fs.String("role", "", "the role whose tools to serve (required)")
	if fs.Parse(args) != nil {
		return 2
	}
	if *role == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, mcpUsage)
		return 2
	}
	return c.withHost(stderr, func(ctx context.Context, h *host.Host) int {
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		if err := server.ServeMCP(ctx, h, *role, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
			fmt.Fprintf(stderr, "toolhost: mcp: %v\n", err)
			return 1
		}
		return 0
	})
}

const mcpUsage = "usage: toolhost mcp -role R [-config F]\n       toolhost mcp import FILE\n       toolhost mcp inspect [-tool-prefix P] (-url URL | -- COMMAND ARGS...)"

// mcpInspectCmd starts an MCP server as an mcp_server block would, prints
// the group it would give (tool names as agents would see them, the
// server's names, the tools that would be refused) and stops it.
func mcpInspectCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolhost mcp inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "a streamable HTTP server's endpoint, instead of a command")
	prefix := fs.String("tool-prefix", "", "the block's tool_prefix")
	level := fs.String("log-level", "warn", "log level")
	if fs.Parse(args) != nil {
		return 2
	}
	if (*url == "") == (fs.NArg() == 0) {
		fmt.Fprintln(stderr, mcpUsage)
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "toolhost", Output: stderr, Level: hclog.LevelFromString(*level)})
	ins, err := mcpsource.Inspect(context.Background(), fs.Args(), *url, *prefix, logger)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %s: %v\n", toolhost.CodeOf(err), err)
		return 1
	}
	printJSON(stdout, ins)
	for _, why := range ins.Refused {
		fmt.Fprintln(stderr, "refused:", why)
	}
	return 0
}
