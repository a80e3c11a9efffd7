// Package host is the embeddable toolhost: what an agent runtime imports to
// give its agents tool groups, chosen per role, through one pipeline.
//
// New(cfg, opts) makes a host from a config (config.Load reads config.hcl;
// nil options are the defaults). Start launches the config's modules —
// plugin and builtin blocks as go-plugin processes, mcp_server blocks as MCP
// servers — in parallel, each sandboxed as its block says, and registers
// their groups; RegisterGroup adds an in-process one (an *sdk.Group).
// ToolsFor(agent) is the list of tool definitions to put in the agent's
// model request: exactly the tools its role may call. Call(ctx, req) runs
// one call through the pipeline (policy, argument validation, approval,
// timeout, redaction, output limits, events). Watch(f) calls f whenever
// groups or roles change, and Close stops every module and leaves no
// process behind.
//
// See Example for the whole story in a few lines.
package host
