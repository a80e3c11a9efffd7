// Package host is the embeddable toolhost: what an agent runtime imports to
// give its agents tool groups, chosen per role, through one pipeline.
//
// [New] makes a host from a config ([config.Load] reads config.hcl; nil
// [Options] are the defaults). [Host.Start] launches the config's modules —
// plugin and builtin blocks as go-plugin processes, mcp_server blocks as MCP
// servers — in parallel, each sandboxed as its block says, and registers
// their groups; [Host.Close] stops every module and leaves no process
// behind.
//
// Two verbs carry an agent's work. [Host.Tools] lists the tools an agent is
// offered, the definitions to put in its model request ([ToolQuery] also
// lists a role's, or previews one), and [Host.Call] (or [Host.CallBatch])
// runs a call through the pipeline: policy, argument validation, approval,
// limits, timeout, redaction, output limits, events. A call with an agent id
// runs only the tools of the agent's role.
//
// The rest hangs off small handles:
//
//   - [Host.Agents]: create an agent of a role, get one, load or find the
//     tools of its role's deferred groups.
//   - [Host.Roles]: list, get, create, update and delete roles; a role's
//     system prompt.
//   - [Host.Tokens]: make and revoke bearer tokens (audited).
//   - [Host.Events]: record, list, flush and retain the audit events.
//   - [Host.Approvals]: the calls that wait for a decision.
//   - [Host.Modules]: the configured plugins and the registered groups;
//     [Modules.Register] adds an in-process group (an *sdk.Group).
//   - [Host.Artifacts]: the files agents share, each owned by a role.
//
// [Host.Watch] calls a function whenever the tools a role sees may have
// changed; [Host.Started] and [Host.Ready] say whether the host has started
// and can serve.
//
// See Example for the whole story in a few lines.
package host
