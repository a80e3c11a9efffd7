// Package host is the embeddable toolhost: what an agent runtime imports to
// give its agents tool groups, chosen per role, through one pipeline.
//
// [New] makes a host from a config ([config.Load] reads config.hcl; nil
// [Options] are the defaults). [Host.Start] launches the config's modules —
// plugin and builtin blocks as go-plugin processes, mcp_server blocks as MCP
// servers — in parallel, each sandboxed as its block says, and registers
// their groups; [Host.RegisterGroup] adds an in-process one (an *sdk.Group).
// [Host.ToolsFor] gives the tool definitions to put in an agent's model
// request: exactly the tools its role may call. [Host.Call] runs one call
// through the pipeline (policy, argument validation, approval, timeout,
// redaction, output limits, events). [Host.Watch] calls a function whenever
// groups or roles change, and [Host.Close] stops every module and leaves no
// process behind.
//
// See Example for the whole story in a few lines.
package host
