package main

import (
	"context"
	"errors"
	"flag"
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

const mcpUsage = "usage: toolhost mcp -role R [-config F]\n       toolhost mcp import FILE\n       toolhost mcp inspect [-tool-prefix P] (-url URL | -- COMMAND ARGS...)"

const mcpImportUsage = "usage: toolhost mcp import [-config F] [-probe=false] FILE   (FILE: a Claude Desktop, Cursor or VS Code MCP config; - for stdin)"

// mcpImportCmd prints the mcp_server blocks equivalent to the MCP servers
// of a client's config file, as [mcpimport.Import] writes them for the
// config file named by -config, probing the servers unless -probe=false.
// A file it cannot import is exit status 1, with every problem on stderr
// and nothing on stdout.
func mcpImportCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("toolhost mcp import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "config.hcl", "the config file the blocks are for: no sandbox may write what it trusts")
	probe := fs.Bool("probe", true, "start the servers beside the config's modules, for their descriptions and tool names that clash (false: start nothing, write no tool_prefix)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, mcpImportUsage)
		fs.PrintDefaults()
	}
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, mcpImportUsage)
		return 2
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
