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
	// Prompts, Resources and ResourceTemplates are what an MCP server
	// offers beside its tools. A role whose groups hold them lists them
	// ([github.com/toolhost/toolhost/host.ToolList]) and uses them through
	// calls named after the MCP methods ([IsItemMethod]), which reach
	// [Provider.Call]. Plugins report none (yet).
	Prompts           []PromptSpec           `json:"prompts,omitempty"`
	Resources         []ResourceSpec         `json:"resources,omitempty"`
	ResourceTemplates []ResourceTemplateSpec `json:"resource_templates,omitempty"`
	// Completions says the provider answers [MethodComplete] for its
	// prompts' arguments and its templates' variables.
	Completions bool `json:"completions,omitempty"`
	// Subscribe says the provider takes [MethodSubscribe] for its
	// resources.
	Subscribe bool `json:"subscribe,omitempty"`
}

// PromptSpec is a prompt an MCP server offers: a template of messages
// that a client gets, filled in with its arguments, through
// [MethodPromptsGet].
type PromptSpec struct {
	// Name is unique across all groups; an MCP server's prompt names are
	// mapped as its tool names are, with its tool prefix.
	Name string `json:"name"`
	// Title is a human-readable name.
	Title string `json:"title,omitempty"`
	// Description says what the prompt is for.
	Description string `json:"description,omitempty"`
	// Arguments are the arguments it takes.
	Arguments []PromptArgument `json:"arguments,omitempty"`
	// Icons and Meta are the server's icons and _meta, JSON as it gave them.
	Icons json.RawMessage `json:"icons,omitempty"`
	Meta  json.RawMessage `json:"meta,omitempty"`
}

// PromptArgument is one argument of a [PromptSpec].
type PromptArgument struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// ResourceSpec is a resource an MCP server lists, which a client reads
// through [MethodResourcesRead].
type ResourceSpec struct {
	// URI is the resource's identity, unique across all groups, as the
	// server gives it: links and embedded resources refer to it.
	URI string `json:"uri"`
	// Name, Title and Description say what it is.
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// MimeType is its media type, when known.
	MimeType string `json:"mime_type,omitempty"`
	// Size is its size in bytes, when known.
	Size *int64 `json:"size,omitempty"`
	// Annotations (audience, priority, lastModified), Icons and Meta are
	// the server's, JSON as it gave them.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Icons       json.RawMessage `json:"icons,omitempty"`
	Meta        json.RawMessage `json:"meta,omitempty"`
}

// ResourceTemplateSpec is a family of resources an MCP server offers: the
// URIs that match its RFC 6570 template, which a client may read though
// no list names them.
type ResourceTemplateSpec struct {
	// URITemplate is the template, unique across all groups.
	URITemplate string `json:"uri_template"`
	// Name, Title and Description say what its resources are.
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// MimeType is its resources' media type, when they share one.
	MimeType string `json:"mime_type,omitempty"`
	// Annotations, Icons and Meta are the server's, JSON as it gave them.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Icons       json.RawMessage `json:"icons,omitempty"`
	Meta        json.RawMessage `json:"meta,omitempty"`
}

// The calls that use a group's prompts and resources, named after their
// MCP methods (no tool name has a '/'). Their arguments are the methods'
// params: {"name", "arguments"} for MethodPromptsGet (the name as the
// group lists it), {"uri"} for MethodResourcesRead, MethodSubscribe and
// MethodUnsubscribe, {"ref", "argument", "context"} for MethodComplete.
const (
	MethodPromptsGet    = "prompts/get"
	MethodResourcesRead = "resources/read"
	MethodComplete      = "completion/complete"
	MethodSubscribe     = "resources/subscribe"
	MethodUnsubscribe   = "resources/unsubscribe"
)

// IsItemMethod reports whether a call's tool names one of the methods on a
// group's prompts and resources (MethodPromptsGet and the others).
func IsItemMethod(tool string) bool {
	switch tool {
	case MethodPromptsGet, MethodResourcesRead, MethodComplete, MethodSubscribe, MethodUnsubscribe:
		return true
	}
	return false
}

// ResourceWatcher is told when a resource it subscribed to
// ([MethodSubscribe]) has changed, until it unsubscribes.
type ResourceWatcher interface {
	ResourceUpdated(uri string)
}

type watcherKey struct{}

// WithResourceWatcher returns ctx carrying w, for a [MethodSubscribe]
// call: the provider tells w of the resource's updates.
func WithResourceWatcher(ctx context.Context, w ResourceWatcher) context.Context {
	return context.WithValue(ctx, watcherKey{}, w)
}

// ResourceWatcherFrom returns the watcher ctx carries, or nil.
func ResourceWatcherFrom(ctx context.Context) ResourceWatcher {
	w, _ := ctx.Value(watcherKey{}).(ResourceWatcher)
	return w
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
