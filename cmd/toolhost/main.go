// Command toolhost runs and inspects a toolhost deployment.
//
//	toolhost validate                     check a config file and say what it declares
//	toolhost serve                        run the host and its HTTP server
//	toolhost groups [-json]               start the modules, list their groups, stop them
//	toolhost tools [-role R] [-json] [-tokens]   the tools a role sees
//	toolhost call [-role R | -agent ID] TOOL [JSON-ARGS]   call one tool, print its result envelope
//	toolhost roles list|show|create|set-groups|set-deferred|delete   list and edit roles
//	toolhost tokens create|list|revoke    tokens for a role's agents and MCP clients, or for Prometheus
//	toolhost token [-url]                 the admin token (-url: the page's address with it)
//	toolhost agents list|show|send|terminate   the agents, their conversations and mailboxes
//	toolhost run -role R "TASK"           run an agent until it and its agents are idle
//	toolhost events [FILTERS] [-follow | -export FILE | -story CALL | -tree AGENT]   the audit trail
//	toolhost mcp -role R                  serve a role's MCP over stdio
//	toolhost mcp import FILE              print mcp_server blocks for a client's MCP servers
//	toolhost mcp inspect -- CMD ARGS      what an MCP server would give as a group (or -url URL)
//	toolhost plugin inspect PATH          describe a plugin without registering it
//	toolhost new module NAME              write a module skeleton that builds against this checkout
//	toolhost version [-json]              this build's version
//	toolhost help [COMMAND [SUBCOMMAND]]  a command's help, as its -h prints it
//
// Every command prints its synopsis, flags and an example with -h (on
// stdout, exit status 0); a usage error is exit status 2, on stderr. Flags
// may come before or after the positional arguments, and "--" makes the
// rest positional. -config defaults to config.hcl. Logs go to stderr at
// -log-level (or TOOLHOST_LOG_LEVEL): info for serve, warn for the
// one-shot commands.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command runs one command: it returns the process exit status.
type command func(args []string, stdout, stderr io.Writer) int

// run runs the toolhost command args names.
func run(args []string, stdout, stderr io.Writer) int {
	return dispatch(toolhostUsage, args, stdout, stderr)
}

// toolhostUsage is toolhost's own usage: the tree of its commands, in the
// order its help lists them.
var toolhostUsage = &usage{
	summary: "run and inspect a toolhost deployment: modules, roles, agents, MCP endpoints",
	details: `Flags may come before or after a command's arguments; "--" makes the rest arguments.
-config defaults to config.hcl. Logs go to stderr at -log-level (or TOOLHOST_LOG_LEVEL):
info for serve, warn for the other commands.`,
	example: `toolhost validate -config config.hcl
toolhost roles create tester -groups workspace
toolhost help roles create`,
	subs: []*usage{validateUsage, serveUsage, groupsUsage, toolsUsage, callUsage, rolesUsage, tokensUsage, tokenUsage,
		agentsUsage, runUsage, eventsUsage, mcpUsage, pluginUsage, newUsage, versionUsage, helpUsage},
}

// helpUsage is `toolhost help`, which dispatch answers.
var helpUsage = &usage{
	name:    "help",
	args:    "[COMMAND [SUBCOMMAND]]",
	summary: "print a command's help, as its -h does",
	example: "toolhost help roles create",
	max:     2,
}

// handlers run the commands that run themselves; the others only name
// subcommands.
var handlers = map[*usage]command{
	validateUsage:         validateCmd,
	serveUsage:            serveCmd,
	groupsUsage:           groupsCmd,
	toolsUsage:            toolsCmd,
	callUsage:             callCmd,
	rolesListUsage:        rolesListCmd,
	rolesShowUsage:        rolesShowCmd,
	rolesCreateUsage:      rolesCreateCmd,
	rolesSetGroupsUsage:   rolesSetGroupsCmd,
	rolesSetDeferredUsage: rolesSetDeferredCmd,
	rolesDeleteUsage:      rolesDeleteCmd,
	tokensCreateUsage:     tokensCreateCmd,
	tokensListUsage:       tokensListCmd,
	tokensRevokeUsage:     tokensRevokeCmd,
	tokenUsage:            tokenCmd,
	agentsListUsage:       agentsListCmd,
	agentsShowUsage:       agentsShowCmd,
	agentsSendUsage:       agentsSendCmd,
	agentsTerminateUsage:  agentsTerminateCmd,
	runUsage:              runCmd,
	eventsUsage:           eventsCmd,
	mcpUsage:              mcpCmd,
	mcpImportUsage:        mcpImportCmd,
	mcpInspectUsage:       mcpInspectCmd,
	pluginInspectUsage:    pluginInspectCmd,
	newModuleUsage:        newModuleCmd,
	versionUsage:          versionCmd,
}
