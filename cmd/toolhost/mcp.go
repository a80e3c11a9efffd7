package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpimport"
	"github.com/toolhost/toolhost/internal/mcp/mcpsource"
	"github.com/toolhost/toolhost/server"
)

// mcpUsage is `toolhost mcp`: a command of its own and its subcommands.
var mcpUsage = &usage{
	name:    "mcp",
	args:    "-role R",
	summary: "serve a role's tools over MCP on stdio; import and inspect MCP servers",
	details: `Run with -role, it is an MCP server for a client that starts it: only MCP messages go to
stdout, logs go to stderr, and it ends when stdin closes.`,
	example: "toolhost mcp -config /etc/toolhost/config.hcl -role developer",
	subs:    []*usage{mcpImportUsage, mcpInspectUsage},
}

// mcpCmd runs the host and serves one role's MCP server over the process's
// stdin and stdout until stdin closes (or SIGINT/SIGTERM). Only MCP messages
// go to stdout; logs go to stderr.
func mcpCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(mcpUsage, stdout, stderr, "warn")
	role := fs.String("role", "", "the `role` whose tools to serve (required)")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *role == "" {
		return fs.fail("-role is required")
	}
	c.serverGC = true
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

// mcpImportUsage is `toolhost mcp import`.
var mcpImportUsage = &usage{
	name:    "mcp import",
	args:    "FILE",
	min:     1,
	max:     1,
	summary: "print mcp_server blocks for a Claude Desktop, Cursor or VS Code config",
	details: `FILE - reads stdin. Secrets become env("…"). It starts the servers beside -config's modules,
for their descriptions and a tool_prefix where tool names clash (-probe=false: it starts nothing).`,
	example: "toolhost mcp import -config config.hcl claude_desktop_config.json >> config.hcl",
}

// mcpImportCmd prints the mcp_server blocks equivalent to the MCP servers
// of a client's config file, as [mcpimport.Import] writes them for the
// config file named by -config, probing the servers unless -probe=false.
// A file it cannot import is exit status 1, with every problem on stderr
// and nothing on stdout.
func mcpImportCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(mcpImportUsage, stdout, stderr)
	configFile := fs.String("config", "config.hcl", "the config `file` the blocks are for: no sandbox may write what it trusts")
	probe := fs.Bool("probe", true, "start the servers beside the config's modules, for their descriptions and tool names that\nclash (false: start nothing, write no tool_prefix)")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	file := fs.Arg(0)
	var src []byte
	var err error
	if file == "-" {
		file = "stdin"
		src, err = io.ReadAll(os.Stdin)
	} else {
		src, err = os.ReadFile(file)
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	out, warnings, err := mcpimport.Import(context.Background(), src, file, mcpimport.Options{ConfigFile: *configFile, Probe: *probe})
	for _, w := range warnings {
		fmt.Fprintf(stderr, "toolhost: warning: %s\n", w)
	}
	if err != nil {
		var list interface{ Unwrap() []error }
		errs := []error{err}
		if errors.As(err, &list) {
			errs = list.Unwrap()
		}
		for _, e := range errs {
			fmt.Fprintf(stderr, "toolhost: %v\n", e)
		}
		return 1
	}
	if len(out) == 0 {
		fmt.Fprintf(stderr, "toolhost: %s: no MCP servers to import\n", file)
	}
	_, _ = stdout.Write(out)
	return 0
}

// mcpInspectUsage is `toolhost mcp inspect`.
var mcpInspectUsage = &usage{
	name:       "mcp inspect",
	args:       "-- COMMAND [ARGS...]\n-url URL",
	max:        -1,
	flagsFirst: true,
	summary:    "start an MCP server, print the group it would give, and stop it",
	details: `It starts the server as an mcp_server block would, and prints the tools as agents would
see them, the server's names, and what would be refused.
Its flags go before the server's command: everything from "--" (or the first argument that is
not a flag) on is the command line.`,
	example: "toolhost mcp inspect -tool-prefix fs_ -- npx @modelcontextprotocol/server-filesystem /tmp",
}

// mcpInspectCmd starts an MCP server as an mcp_server block would, prints
// the group it would give (tool names as agents would see them, the
// server's names, the tools that would be refused) and stops it.
func mcpInspectCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(mcpInspectUsage, stdout, stderr)
	url := fs.String("url", "", "a streamable HTTP server's endpoint, instead of a command")
	prefix := fs.String("tool-prefix", "", "the block's tool_prefix")
	level := fs.String("log-level", "warn", "log `level`: trace, debug, info, warn, error, off")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	switch {
	case *url == "" && fs.NArg() == 0:
		return fs.fail("give the server's command after \"--\", or -url URL")
	case *url != "" && fs.NArg() > 0:
		return fs.fail("give -url URL or a command, not both (the flags go before the command)")
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
