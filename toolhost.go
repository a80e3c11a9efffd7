// Package toolhost holds the types every part of toolhost shares: the
// tool-group and tool specs a plugin reports, the call context, the result
// envelope, the [Provider] interface a group implements and the stable error
// codes.
//
// Module authors use these through package sdk; embedders through package host.
package toolhost

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolhost/toolhost/sandbox"
)

// GroupSpec is a tool group as its provider reports it.
type GroupSpec struct {
	// ID names the group; it must match ^[a-z][a-z0-9_-]{0,63}$.
	ID string `json:"id"`
	// Description says what the group is for, in a sentence.
	Description string `json:"description"`
	// Version is the provider's own version string, free-form.
	Version string `json:"version,omitempty"`
	// Tools are the group's tools, in the order the provider declares them.
	Tools []ToolSpec `json:"tools"`
}

// ToolSpec describes one tool of a group.
type ToolSpec struct {
	// Name is unique across all groups; it must match ^[a-z][a-z0-9_]{0,63}$.
	Name string `json:"name"`
	// Description is what a model reads to decide whether to call the tool.
	Description string `json:"description"`
	// InputSchema is a JSON-schema object for the tool's arguments.
	InputSchema json.RawMessage `json:"input_schema"`
	// Optional tools are visible only when an allowlist names them.
	Optional bool `json:"optional,omitempty"`
	// RequiresApproval asks the host to get an approval before each call.
	RequiresApproval bool `json:"requires_approval,omitempty"`
	// Timeout bounds one call; zero means the host's default.
	Timeout time.Duration `json:"timeout,omitempty"`
	// NeedsAgent says the tool must be called as an agent: a call without
	// an agent id the host knows is refused with validation.
	NeedsAgent bool `json:"needs_agent,omitempty"`
	// NeedsConversation says the tool works on the calling agent's
	// conversation, which only agents the runtime runs have: other agents
	// (MCP clients) are refused it, and the MCP front does not offer it.
	NeedsConversation bool `json:"needs_conversation,omitempty"`
	// OutputTail asks the host, when it cuts the output to its limits, to keep
	// the end (as for command output) rather than the beginning. The host
	// takes such a tool's output as it is written ([Output]).
	OutputTail bool `json:"output_tail,omitempty"`
	// Title is a human-readable name
	// ([github.com/toolhost/toolhost/sdk.Title], or an MCP server's).
	Title string `json:"title,omitempty"`
	// Annotations are hints about the tool as MCP has them (readOnlyHint,
	// destructiveHint, idempotentHint, openWorldHint), a JSON object: from
	// an MCP server, or the sdk's ReadOnly, Destructive, Idempotent and
	// OpenWorld. Our MCP front passes them on.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// OutputSchema is a JSON schema of the structured result, as an MCP
	// server gives it; our MCP front passes it on.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// CallContext says on whose behalf a [Provider.Describe] or a [Provider.Call]
// happens.
type CallContext struct {
	// CallID identifies one tool call; empty for [Provider.Describe].
	CallID string `json:"call_id,omitempty"`
	// AgentID is the calling agent.
	AgentID string `json:"agent_id,omitempty"`
	// Role is the calling agent's role.
	Role string `json:"role,omitempty"`
	// Session identifies the conversation or MCP session.
	Session string `json:"session,omitempty"`
	// WorkspaceDir is the agent's workspace directory, if it has one.
	WorkspaceDir string `json:"workspace_dir,omitempty"`
	// Sandboxed is true when the agent runs in a sandbox.
	Sandboxed bool `json:"sandboxed,omitempty"`
	// Channel names where the request came from (cli, http, mcp, agent).
	Channel string `json:"channel,omitempty"`
	// ParentID is the event the call belongs under, such as an agent's
	// turn: its events carry it, so they form a tree. Not sent to plugins.
	ParentID string `json:"parent_id,omitempty"`
	// Principal is who called, when the credential names someone beyond
	// the agent: an OpenID access token's subject. The call's events carry
	// it in their payload's "principal". Not sent to plugins.
	Principal string `json:"principal,omitempty"`
	// Credential is the credential the call came with: "admin", "cli",
	// "token/NAME/ID" (a role token's name and id), "oidc/SUBJECT", or ""
	// for the embedding program's own calls. A role's call limits count per
	// credential, pending approvals are bounded per credential, and the
	// call's events carry it in their payload's "credential". Not sent to
	// plugins.
	Credential string `json:"credential,omitempty"`
}

// DescribeRequest asks a provider for its group as seen from a context.
type DescribeRequest struct {
	// Context lets a provider offer different tools per agent or session.
	Context CallContext
}

// ConfigureRequest passes a plugin block's config {} to its provider.
type ConfigureRequest struct {
	// Config is a JSON object; "{}" when the block has none.
	Config json.RawMessage
	// HostPaths are absolute paths the host keeps to itself, such as its data
	// directory (database, tokens, saved outputs). A module must neither read,
	// list, search nor write at or below any of them, whatever path or symlink
	// leads there. Empty from hosts older than protocol minor 1.
	HostPaths []string
	// Sandbox is the sandbox the module applies to the processes it starts;
	// set for the builtin command module: its block's sandbox { } (Off for
	// sandbox = "off"), or nil when the block has none (the module then uses
	// its confined default). Nil from hosts older than protocol minor 2.
	Sandbox *sandbox.Policy
}

// CallRequest is one tool call.
type CallRequest struct {
	// Tool is the tool's name.
	Tool string
	// Arguments is a JSON object.
	Arguments json.RawMessage
	// Context carries the call id and the caller.
	Context CallContext
}

// Provider serves one tool group.
// [*github.com/toolhost/toolhost/sdk.Group] implements it; the host adapts
// each subprocess plugin to it.
type Provider interface {
	// Describe reports the group and its tools for the request's context.
	Describe(ctx context.Context, req *DescribeRequest) (*GroupSpec, error)
	// Configure passes the group's configuration; called once, before
	// [Provider.Describe].
	Configure(ctx context.Context, req *ConfigureRequest) error
	// Call runs one tool. A failing tool is a [Result] with OK false; an error
	// means the call could not be carried out.
	Call(ctx context.Context, req *CallRequest) (*Result, error)
}
