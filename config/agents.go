package config

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Model is a `model "NAME" {}` block: a model provider agents call.
type Model struct {
	// Name is the block label, unique among models.
	Name string
	// Type is [ModelOpenAI] or [ModelScripted].
	Type string
	// BaseURL is an OpenAI-compatible server's API root (the URL before
	// /chat/completions); empty: the OPENAI_BASE_URL environment variable.
	BaseURL string
	// Model is the model name sent with each request; empty: OPENAI_MODEL.
	Model string
	// APIKey is sent as a bearer token; empty: OPENAI_API_KEY (none is sent
	// when that is empty too).
	APIKey string
	// Protocol is how tool calls travel: "native" (function calling, the
	// default) or "json" (one {"tool_calls": [...], "final_answer": "..."}
	// object in the reply's text, for models without function calling).
	Protocol string
	// Script is the absolute path of a scripted provider's file of turns.
	Script string
	// Timeout bounds one request; default 2m.
	Timeout time.Duration
	// MaxRetries is how many times a request failing with a transient error
	// (connection, 429, 5xx) is tried again; default 2.
	MaxRetries int
	// Pos is where the block is declared, "file:line,col".
	Pos string
}

// The model types.
const (
	ModelOpenAI   = "openai"   // an OpenAI-compatible chat-completions server
	ModelScripted = "scripted" // a file of turns, for tests and offline demos
)

// Runtime is the `runtime {}` block: how agents run and the limits that stop
// a task (turns, wall time, tokens, repeated calls, bad outputs).
type Runtime struct {
	// Provider names the model block agents use; default: the first one.
	Provider string
	// MaxTurns bounds the model calls of one task; default 50.
	MaxTurns int
	// MaxWallTime bounds the time of one task; default 10m.
	MaxWallTime time.Duration
	// MaxTokens bounds the model tokens (prompt and completion) one task
	// may use; default 1,000,000.
	MaxTokens int
	// ContextBudget is the context window's size in tokens, reported by
	// get_context_status; default 128,000.
	ContextBudget int
	// NoProgress stops an agent that makes the same tool call (same tool,
	// same arguments) this many times in a row; default 3.
	NoProgress int
	// MaxBadOutputs fails an agent whose model answers badly (an unknown
	// tool, invalid arguments, neither tool calls nor an answer) this many
	// times in a row, each reported back to it first; default 3.
	MaxBadOutputs int
	// KeepRecent is how many recent messages compress_context keeps
	// verbatim; default 8.
	KeepRecent int
	// Workspace is the absolute directory put_artifact reads `path` from;
	// default [Config.Workspace].
	Workspace string
	// Lease is how long a host's claim on a runtime agent lasts unless
	// renewed (every Lease/3): the agents of a host that died are adopted
	// by another about Lease after its last renewal. Default 15s
	// (DefaultLease). It is the lease of the host's run as well: the other
	// hosts take a host for dead, and the MCP clients' tasks it ran for
	// failed, about Lease after its last renewal.
	Lease time.Duration
}

var modelSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "type", Required: true}, {Name: "base_url"}, {Name: "model"}, {Name: "api_key"}, {Name: "protocol"},
	{Name: "script"}, {Name: "timeout"}, {Name: "max_retries"},
}}

// model decodes a model block; declared maps the names seen so far to their blocks.
func (d *decoder) model(blk *hcl.Block, declared map[string]hcl.Range) Model {
	m := Model{Name: blk.Labels[0], Protocol: "native", Timeout: 2 * time.Minute, MaxRetries: 2, Pos: position(blk.DefRange)}
	if !nameRE.MatchString(m.Name) {
		d.fail(blk.LabelRanges[0], "Invalid model name", fmt.Sprintf("%q must match %s.", m.Name, nameRE))
	} else if first, dup := declared[m.Name]; dup {
		d.fail(blk.LabelRanges[0], "Duplicate model name", fmt.Sprintf("A model named %q was already declared at %s.", m.Name, position(first)))
	} else {
		declared[m.Name] = blk.DefRange
	}
	content, diags := blk.Body.Content(modelSchema)
	d.add(diags)
	attrs := content.Attributes
	attr(d, attrs, "type", &m.Type, oneOf(ModelOpenAI, ModelScripted))
	attr(d, attrs, "base_url", &m.BaseURL, asIs)
	attr(d, attrs, "model", &m.Model, asIs)
	attr(d, attrs, "api_key", &m.APIKey, asIs)
	attr(d, attrs, "protocol", &m.Protocol, oneOf("native", "json"))
	attr(d, attrs, "script", &m.Script, d.path)
	attr(d, attrs, "timeout", &m.Timeout, duration)
	attr(d, attrs, "max_retries", &m.MaxRetries, nonNegative)
	if m.Type == ModelScripted && m.Script == "" && attrs["script"] == nil {
		d.fail(blk.DefRange, "Missing script", fmt.Sprintf("Model %q is scripted: set script to its file of turns.", m.Name))
	}
	return m
}

var runtimeSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "provider"}, {Name: "max_turns"}, {Name: "max_wall_time"}, {Name: "max_tokens"}, {Name: "context_budget"},
	{Name: "no_progress"}, {Name: "max_bad_outputs"}, {Name: "keep_recent"}, {Name: "workspace"}, {Name: "lease"},
}}

// runtime decodes the runtime block; the provider is checked once every model block is known.
func (d *decoder) runtime(r *Runtime, body hcl.Body) *hcl.Attribute {
	content, diags := body.Content(runtimeSchema)
	d.add(diags)
	attrs := content.Attributes
	attr(d, attrs, "provider", &r.Provider, asIs)
	attr(d, attrs, "max_turns", &r.MaxTurns, positive)
	attr(d, attrs, "max_wall_time", &r.MaxWallTime, duration)
	attr(d, attrs, "max_tokens", &r.MaxTokens, positive)
	attr(d, attrs, "context_budget", &r.ContextBudget, positive)
	attr(d, attrs, "no_progress", &r.NoProgress, positive)
	attr(d, attrs, "max_bad_outputs", &r.MaxBadOutputs, positive)
	attr(d, attrs, "keep_recent", &r.KeepRecent, positive)
	attr(d, attrs, "workspace", &r.Workspace, d.path)
	attr(d, attrs, "lease", &r.Lease, duration)
	return attrs["provider"]
}

// checkProvider defaults the runtime's provider to the first model block, and
// reports a provider no model block declares.
func (d *decoder) checkProvider(cfg *Config, provider *hcl.Attribute) {
	if cfg.Runtime.Provider == "" {
		if len(cfg.Models) > 0 {
			cfg.Runtime.Provider = cfg.Models[0].Name
		}
		return
	}
	for _, m := range cfg.Models {
		if m.Name == cfg.Runtime.Provider {
			return
		}
	}
	if provider != nil {
		d.fail(provider.Expr.Range(), "Unknown model", fmt.Sprintf("No model block is named %q.", cfg.Runtime.Provider))
	}
}

// Model returns the model block with the name.
func (c *Config) Model(name string) (Model, bool) {
	for _, m := range c.Models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}
