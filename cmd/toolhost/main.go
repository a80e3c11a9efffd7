// Command toolhost runs and inspects a toolhost deployment.
//
//	toolhost validate [-config F]                      check a config file
//	toolhost groups   [-config F] [-json]              start the plugins and list their groups
//	toolhost roles    list|show|create|set-groups|set-deferred|delete   list and edit roles
//	toolhost tools    [-config F] [-role R] [-json] [-tokens]   the tools a role sees
//	toolhost call     [-config F] [-role R | -agent ID] TOOL [JSON]  call one tool, print the result envelope
//	toolhost events   [-config F] [FILTERS] [-json] [-follow | -export FILE|-]   the audit events (filters: -tool -agent -role -credential -outcome -call -since -until -after -before -limit)
//	toolhost events   -story CALL | -tree AGENT         a call's story, an agent's event tree
//	toolhost plugin inspect [-config JSON] PATH        describe a plugin without registering it
//	toolhost new module NAME [-dir D] [-toolhost DIR]  write a module skeleton that builds against this checkout
//	toolhost serve    [-config F]                      run the host and its HTTP server
//	toolhost mcp      -role R [-config F]              serve a role's MCP over stdio
//	toolhost mcp import FILE                           print mcp_server blocks for a client's MCP servers
//	toolhost mcp inspect [-tool-prefix P] -- CMD ARGS  what an MCP server would give as a group (or -url URL)
//	toolhost run      -role R [-provider P] [-tree] "TASK"   run an agent until it and its agents are idle
//	toolhost agents   list|show|send|terminate          the agents and their conversations
//	toolhost token    [-config F] [-url]                the admin token (-url: the page's address with it)
//	toolhost tokens   create|list|revoke                tokens for a role's agents and MCP clients, or for Prometheus
//
// -config defaults to config.hcl. Logs go to stderr at -log-level (or
// TOOLHOST_LOG_LEVEL): info for serve, warn for the one-shot commands.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand: it returns the process exit status.
type command func(args []string, stdout, stderr io.Writer) int

var commands = map[string]command{
	"validate": validateCmd,
	"groups":   groupsCmd,
	"roles":    rolesCmd,
	"tools":    toolsCmd,
	"events":   eventsCmd,
	"call":     callCmd,
	"plugin":   pluginCmd,
	"serve":    serveCmd,
	"mcp":      mcpCmd,
	"run":      runCmd,
	"agents":   agentsCmd,
	"token":    tokenCmd,
	"tokens":   tokensCmd,
}

const usage = `usage: toolhost COMMAND [flags]

commands:
  validate [-config F]                 check a config file
  groups   [-config F] [-json]         start the plugins and list their groups
  roles    list|show|create|set-groups|set-deferred|delete   list and edit roles
  tools    [-config F] [-role R] [-json] [-tokens]   the tools a role sees
  call     [-config F] [-role R | -agent ID] TOOL [JSON]   call one tool and print its result envelope
  events   [-config F] [FILTERS] [-json] [-follow | -export FILE|-]
                                       the audit events: the most recent 100 (-limit), paged back
                                       with -before ID; FILTERS: -tool -agent -role -credential
                                       -outcome (ok, failed, failed:CODE, denied, approved,
                                       rate_limited) -call -since -until -after; -export: every
                                       match as JSON lines
  events   -story CALL | -tree AGENT   a call's story (caller, arguments, verdicts, approval,
                                       outcome, parent, children); an agent's event tree
  plugin inspect [-config JSON] PATH   describe a plugin without registering it
  new module NAME [-dir D] [-toolhost DIR]
                                       write a module (main.go, main_test.go, go.mod) into D (./NAME) that
                                       builds against the toolhost checkout DIR (default: the one holding
                                       this binary), and print the next steps
  serve    [-config F]                 run the host and its HTTP server
  mcp      -role R [-config F]         serve a role's tools over MCP on stdin/stdout
  mcp inspect [-tool-prefix P] -- CMD ARGS
                                       the group an MCP server would give (or -url URL): tools as agents
                                       would see them, the server's names, what would be refused
  mcp import FILE                      print mcp_server blocks for the MCP servers of a Claude Desktop,
                                       Cursor or VS Code config (FILE -: stdin); secrets become env("…");
                                       it starts them beside -config's modules for a tool_prefix where
                                       names clash (-probe=false: starts nothing)
  run      -role R [-provider P] [-tree] [-terminate] "TASK"   run an agent until it and the agents it spawned are idle
  agents   list|show|send|terminate    the agents, their conversations and mailboxes
  token    [-config F] [-url]          print the admin token (-url: the page's address carrying it)
  tokens   create|list|revoke          scoped tokens: create -role R | -metrics [-name N] [-expires 720h]

Run 'toolhost COMMAND -h' for a command's flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "toolhost: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return cmd(args[1:], stdout, stderr)
}
