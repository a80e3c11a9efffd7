// Package config loads toolhost's HCL configuration file, config.hcl.
//
// A file names the address the host listens on, its data and plugin directories, output limits,
// and the modules to run: `plugin "NAME" {}` blocks for third-party modules and
// `builtin "workspace"|"command"|"network" {}` blocks for first-party ones, each optionally
// confined by a `sandbox {}` block (or explicitly not, with sandbox = "off"). Expressions may call
// env("NAME"). The TOOLHOST_LISTEN, TOOLHOST_DATA_DIR and TOOLHOST_PLUGIN_DIR environment variables
// override the file. Every problem found is reported at once as [Diagnostics], each with the
// file, line and column it concerns.
package config

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/toolhost/toolhost/sandbox"
)

// Config is a parsed config.hcl with defaults filled in, paths absolute and overrides applied.
type Config struct {
	// File is the absolute path of the file parsed.
	File string
	// Listen is the host:port the HTTP server binds; default "127.0.0.1:8741", TOOLHOST_LISTEN overrides.
	Listen string
	// DataDir is the absolute data directory; default <dir of file>/data, TOOLHOST_DATA_DIR overrides
	// (a relative value resolves against the current working directory).
	DataDir string
	// PluginDir is the absolute directory holding plugin executables; default <dir of file>/bin/plugins,
	// TOOLHOST_PLUGIN_DIR overrides (a relative value resolves against the current working directory).
	PluginDir string
	// Workspace is the absolute directory agents work in: the workspace
	// module's root and the command module's workdir unless their config
	// says otherwise, and the runtime's workspace; default <dir of
	// file>/workspace, TOOLHOST_WORKSPACE overrides. The host creates it.
	// Like every path an agent can write, it may not hold the config file,
	// the data or plugin directory or an executable the host runs (see
	// [Config.CheckTrust]). "" (a Config built in code) leaves the modules' defaults.
	Workspace    string
	workspacePos string // where the file sets workspace, "" when it does not
	// LogFormat is how the host logs to stderr: "text" (the default) or
	// "json", a JSON object per line for a log collector.
	LogFormat string
	// WebsiteURL, when set, is the page about this host that MCP clients
	// show (serverInfo.websiteUrl): an absolute http or https URL.
	WebsiteURL string
	// Limits bounds tool calls and their output.
	Limits Limits
	// Code bounds code mode's scripts for every role, from the `code`
	// block; a role's own code block overrides it attribute by attribute.
	Code CodeBounds `json:",omitzero"`
	// Plugins are the plugin and builtin blocks, in file order.
	Plugins []Plugin
	// Roles are the role blocks, in file order.
	Roles []Role
	// Tools is the global tools block: allowed optional tools and denied tools.
	Tools ToolPolicy
	// Executor tunes the execution pipeline, from the `executor` block.
	Executor Executor
	// Auth protects the HTTP server, from the `auth` block.
	Auth Auth
	// MCP bounds the sessions of the MCP endpoints (/mcp/ROLE), from the
	// `mcp` block.
	MCP MCP
	// Models are the model blocks, in file order: the providers agents call.
	Models []Model
	// Runtime says how agents run, from the `runtime` block.
	Runtime Runtime
	// Metrics says who may read GET /metrics, from the `metrics` block.
	Metrics Metrics
	// Audit says how calls are audited, from the `audit` block.
	Audit Audit
	// Telemetry says where traces go, from the `telemetry` block.
	Telemetry Telemetry
	// Store says which database keeps the state, from the `store` block.
	Store Store
	// GC is the garbage collector's policy of `toolhost serve` and
	// `toolhost mcp`, from the `gc` block.
	GC GC `json:",omitzero"`
}

// GC is the `gc` block: how the garbage collector of `toolhost serve` and
// `toolhost mcp` trades memory for CPU (docs/operating.md). GOGC and
// GOMEMLIMIT in the environment win over it; a program embedding the host
// keeps its own settings.
type GC struct {
	// Policy is "server" (the default: the heap may grow by [GCHeadroom],
	// or Percent past the live heap, before a collection, bounded by a
	// soft memory limit at [GCLimitShare] % of the memory budget) or "go"
	// (Go's defaults: 100, and no memory limit).
	Policy string `json:",omitempty"`
	// Percent is GOGC's figure for the server policy, fixed; 0: set after
	// each collection for [GCHeadroom] of garbage, never below
	// [DefaultGCPercent].
	Percent int `json:",omitempty"`
	// MemoryBudget is the memory, in bytes, the process may use, of which
	// the memory limit is [GCLimitShare] %; 0: detected (the memory limit
	// of the process's cgroup, else half of the machine's memory).
	MemoryBudget int64 `json:",omitempty"`
}

// The server policy's figures ([GC]): a percent of 100 at least (Go's
// default: a collection once the heap has doubled), raised by the
// headroom ([GCHeadroom]) while the live heap is small, and a memory limit
// at three quarters of the budget, leaving a quarter for what the limit
// does not count: the plugins and commands in the same cgroup, files in the
// page cache, memory outside Go's heap.
const (
	DefaultGCPercent = 100
	GCLimitShare     = 75
)

// GCHeadroom is the garbage the server policy lets the heap gather between
// collections when no percent is set (at most a quarter of the memory
// limit): the percent is set after each collection so that the next comes
// once the heap has grown by that much, never sooner than
// [DefaultGCPercent] would (docs/operating.md).
const GCHeadroom = 32 << 20

// MinGCMemoryBudget is the smallest memory_budget accepted: serve alone
// takes about 50 MiB.
const MinGCMemoryBudget = 64 << 20

// Store is the `store` block: the database that keeps roles, agents,
// events, call results, approvals and tokens.
type Store struct {
	// Driver is "sqlite" (the default: a file in the data directory, one
	// machine) or "postgres" (several hosts sharing one database).
	Driver string
	// DSN is PostgreSQL's connection string (a postgres:// URL or
	// key=value pairs), required with driver "postgres";
	// TOOLHOST_STORE_DSN overrides it, and alone selects "postgres". It
	// may hold a password: write it as env("…") rather than in the file.
	DSN string `json:"-"`
	// Artifacts is where artifacts' bytes are kept: "files" (the default),
	// one per artifact under ArtifactDir, or "database", beside their
	// index, which suits small deployments of several hosts that share no
	// directory.
	Artifacts string
	// ArtifactDir is the directory of the artifacts' files; default
	// <data_dir>/artifacts. Hosts sharing a PostgreSQL database must share
	// it too (NFS or similar), or keep artifacts in the database.
	ArtifactDir string
	// Quota bounds, in bytes, the saved outputs (cut command outputs kept
	// whole under data_dir/outputs) and the artifacts the host keeps: past
	// it, the oldest saved output is evicted first, then the oldest
	// artifact. 0: [DefaultQuota]; [QuotaOff]: no bound.
	Quota int64 `json:",omitempty"`
	// RoleQuota bounds, the same way, the bytes of the items of any one
	// role. 0: [DefaultRoleQuota]; [QuotaOff]: no bound.
	RoleQuota int64 `json:",omitempty"`
	// AgentRetention is how long an agent that ended (a 2025 MCP session's
	// or an agent key's, once ended; a runtime agent once failed or
	// terminated) is kept in the store before its row is removed, with its
	// conversation and mailbox; its events stay under the audit block's
	// retention. An agent that has not ended is never removed. Written as
	// audit's retention ("7d", "36h"), at least a second. 0:
	// [DefaultAgentRetention].
	AgentRetention time.Duration `json:",omitempty"`
}

// DefaultAgentRetention is [Store.AgentRetention] left 0: a week, long
// enough to look into what an agent did last week from the page.
const DefaultAgentRetention = 7 * 24 * time.Hour

// Telemetry is the `telemetry` block: OpenTelemetry traces of calls, agent
// turns and model requests. A field left unset falls back to the standard
// OTEL_* environment variable named with it; with neither, tracing is off
// and costs nothing.
type Telemetry struct {
	// Traces is where spans go: "otlp" (a collector), "console" (stderr,
	// for a person) or "none". Unset: OTEL_TRACES_EXPORTER, else none.
	Traces string
	// Endpoint is the collector's URL for OTLP. Unset:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, else
	// the exporter's default on localhost.
	Endpoint string
	// Protocol is OTLP's: "http/protobuf" or "grpc". Unset:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else
	// http/protobuf.
	Protocol string
	// SampleRatio is the fraction of the traces that begin at this host
	// which are recorded, in (0, 1]; a caller's traceparent decides for
	// its own. Unset (0): OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
	// else every trace.
	SampleRatio float64
	// ServiceName is the resource's service.name. Unset: OTEL_SERVICE_NAME,
	// else "toolhost".
	ServiceName string
}

// Audit is the `audit` block.
type Audit struct {
	// Mode is "default": a call's events are written off its path, in
	// batches, so a host killed at the wrong moment may lose the started
	// event of a call that ran; or "strict": a call is dispatched only once
	// its tool_call.started event is committed (concurrent calls share the
	// commit), so no tool runs unaudited, at the cost measured in
	// docs/BENCHMARKS.md.
	Mode string
	// Retention is how long events are kept: a pass every hour exports the
	// older ones into Export, then deletes them (docs/operating.md). 0, the
	// default, keeps every event. Written with d, h and m units: "90d",
	// "36h", "1d12h"; at least 1h.
	Retention time.Duration `json:",omitempty"`
	// Export is the directory the events leaving the store are exported
	// into, as gzipped JSON lines, before they are deleted; default
	// <data_dir>/events-export when Retention is set. Like the data
	// directory, no path an agent can write may hold it
	// ([Config.CheckTrust]).
	Export string `json:",omitempty"`
}

// DefaultExportDir is the export directory of [Audit] under the data
// directory when retention is on and the audit block names none.
const DefaultExportDir = "events-export"

// Metrics is the `metrics` block. GET /metrics serves the host's Prometheus
// metrics; it needs the admin token or a metrics token (toolhost tokens
// create -metrics) unless Public is set.
type Metrics struct {
	// Public serves GET /metrics without a credential, to anyone who can
	// reach the listen address. The metrics name tools, groups, roles and
	// plugins, never call ids, agent ids or arguments.
	Public bool
}

// Auth is the `auth` block: the HTTP server's credentials and the names it
// answers to. Every route but GET /healthz, GET /readyz and the page's static files needs
// a credential, loopback included.
type Auth struct {
	// Token is the admin token, which opens every route; TOOLHOST_TOKEN
	// overrides the file's. Empty means the one generated into the data
	// directory at first start (see
	// [github.com/toolhost/toolhost/server.AdminToken]). At least
	// [MinTokenLength] characters.
	Token string
	// Disabled turns authentication off: every request is the admin's. It is
	// refused with a Listen address that is not loopback.
	Disabled bool
	// AllowedHosts are the names (or addresses) besides loopback ones that
	// a request's Host header, and a browser write's Origin, may carry.
	// Lower case; the listen address's own host is allowed too.
	AllowedHosts []string
	// OIDC accepts the access tokens of an OpenID provider, from the
	// `oidc` block; nil when there is none.
	OIDC *OIDC `json:",omitempty"`
}

// MinTokenLength is the shortest admin token accepted from the config.
const MinTokenLength = 16

// MCP is the `mcp` block: how long a session of a streamable HTTP MCP
// endpoint (/mcp/ROLE) lives unused, and how many one credential may hold.
type MCP struct {
	// SessionIdleTimeout ends a session that has had no POST open for
	// this long (the go-sdk's SessionTimeout; a GET stream does not
	// count), and an agent key no request has used for this long: its
	// agent is marked terminated, and a request with the session's id gets
	// 404, so the client initializes a new one. 0 means
	// [DefaultMCPSessionIdleTimeout].
	SessionIdleTimeout time.Duration
	// MaxSessionsPerCredential is how many sessions and agent keys one
	// credential (the admin token, one role token, one OpenID subject) may
	// hold at once across the roles: the request that would make one more
	// ends the credential's idle one used least recently, and is refused
	// with 429 and Retry-After only while every one has a request open. 0
	// means [DefaultMCPMaxSessionsPerCredential].
	MaxSessionsPerCredential int
	// ClientApprovals names the roles whose MCP clients may decide the
	// approvals of their own calls (an elicitation their user answers):
	// the operator's word that a person sits in front of each such client.
	// For every other role, approvals are the approval queue's alone.
	ClientApprovals []string
}

// The defaults of the mcp block.
const (
	DefaultMCPSessionIdleTimeout       = 30 * time.Minute
	DefaultMCPMaxSessionsPerCredential = 100
)

// DefaultLease is the runtime block's lease when it sets none.
const DefaultLease = 15 * time.Second

// Executor tunes how calls run: batches, approvals and idempotency.
type Executor struct {
	// Mode runs a batch of calls "sequential" (the default) or "concurrent".
	Mode string
	// MaxParallel bounds a concurrent batch; default 4.
	MaxParallel int
	// Approver decides calls that need an approval: "queue" (the default:
	// pending until decided through the API, or denied after
	// ApprovalTimeout), "approve" or "deny".
	Approver string
	// ApprovalTimeout is how long an approval may stay pending; default 5m.
	ApprovalTimeout time.Duration
	// Approve, when "read_only", lets calls of read-only tools run without
	// asking the approver, though their tool or group requires approval:
	// tools a tool block says are read_only, and first-party tools whose
	// readOnlyHint says so (a third-party module's own claim is not
	// trusted); "" asks for every call that requires it.
	Approve string
	// IdempotencyWindow is how long a call id's result is kept and replayed
	// for a repeated call id; default 24h.
	IdempotencyWindow time.Duration
	// MaxPendingApprovals bounds the calls of one credential waiting for an
	// approval at once on a host; default [DefaultMaxPendingApprovals].
	MaxPendingApprovals int
	// MaxPendingApprovalMB bounds the arguments, in MiB, of the calls of one
	// credential waiting for an approval at once on a host; default
	// [DefaultMaxPendingApprovalMB].
	MaxPendingApprovalMB int
}

// The defaults of the executor's bounds on pending approvals.
const (
	DefaultMaxPendingApprovals  = 16
	DefaultMaxPendingApprovalMB = 32
)

// ToolSettings is a `tool "NAME" {}` block inside a plugin or builtin block.
type ToolSettings struct {
	// Timeout bounds the tool's calls, over the tool's own and the group's.
	Timeout time.Duration
	// RequiresApproval asks for an approval before each call.
	RequiresApproval bool
	// Title replaces the tool's title when not "".
	Title string
	// Hints override the tool's MCP hints, by MCP's names (readOnlyHint,
	// destructiveHint, idempotentHint, openWorldHint), from the block's
	// read_only, destructive, idempotent and open_world.
	Hints map[string]bool
}

// Limits bounds tool calls and their output, from the `limits` block.
type Limits struct {
	// Timeout is the longest a tool call may run; default 30s.
	Timeout time.Duration
	// MaxOutputLines is the most output lines a tool returns; default 2000.
	MaxOutputLines int
	// MaxOutputBytes is the most output bytes a tool returns; default 51200.
	MaxOutputBytes int
}

// Kind tells third-party modules from first-party ones.
type Kind string

const (
	// KindPlugin is a third-party module: `plugin "NAME" {}`.
	KindPlugin Kind = "plugin"
	// KindBuiltin is a first-party module with a reserved id: `builtin "workspace"|"command"|"network" {}`.
	KindBuiltin Kind = "builtin"
	// KindMCP is an MCP server loaded as a module: `mcp_server "NAME" {}`,
	// over stdio (`command`) or streamable HTTP (`url`).
	KindMCP Kind = "mcp_server"
)

// RestartPolicy says what the host does when a plugin's process exits.
type RestartPolicy string

const (
	// RestartAlways restarts the plugin whenever it exits.
	RestartAlways RestartPolicy = "always"
	// RestartOnFailure restarts the plugin when it exits with an error; the default.
	RestartOnFailure RestartPolicy = "on-failure"
	// RestartNever leaves an exited plugin stopped.
	RestartNever RestartPolicy = "never"
)

// Plugin is one plugin or builtin block.
type Plugin struct {
	// Name is the block label.
	Name string
	// Kind is [KindPlugin], [KindBuiltin] or [KindMCP], after the block type.
	Kind Kind
	// Path is the absolute path of the executable. A relative `path` resolves against
	// [Config.PluginDir]; builtin blocks default to PluginDir/<name>. For an
	// mcp_server it is its `command`: a name without a slash is looked up in
	// PATH when the server starts, a relative path resolves against the
	// file's directory; "" for an HTTP server.
	Path string
	// Args are the command-line arguments passed to the executable.
	Args []string
	// Env is extra environment for the process.
	Env map[string]string
	// SHA256 is the executable's pinned digest in lower-case hex, or "" when not pinned.
	SHA256 string
	// Restart is the restart policy; default [RestartOnFailure].
	Restart RestartPolicy
	// MaxRestarts is how many consecutive restarts are tried before the plugin is marked failed; default 5.
	MaxRestarts int
	// StartTimeout bounds the plugin's start; default 10s.
	StartTimeout time.Duration
	// Config is the block's `config { ... }` as a JSON object, "{}" when absent.
	Config json.RawMessage
	// Limits are the group's own limits (the block's `limits {}`); zero fields
	// fall back to the global ones.
	Limits Limits
	// RequiresApproval asks for an approval before every call of the group.
	RequiresApproval bool
	// Tools configures single tools: `tool "NAME" { timeout, requires_approval }`.
	Tools map[string]ToolSettings
	// Sandbox is the block's `sandbox { ... }` (read_write, read_only,
	// network, allow_hosts, deny_hosts, allow_private, limits { ... }), with
	// relative paths resolved against the file's directory; a Policy with Off
	// set for `sandbox = "off"`; nil when the block says neither. A plugin
	// block's sandbox confines the plugin's process; with network =
	// "allowed", its proxy applies the network keys of the block's config
	// (see [Config.Confinement]), which it must not repeat. The command
	// builtin's is not applied to its process: it is sent to the module
	// ([github.com/toolhost/toolhost.ConfigureRequest.Sandbox]), which
	// confines the commands it runs with it, or with its own confined
	// default when nil.
	Sandbox *sandbox.Policy
	// URL is an mcp_server's streamable HTTP endpoint ("" for stdio).
	URL string
	// Headers are sent with every request to URL.
	Headers map[string]string
	// Description is the group's description for an mcp_server; "" means
	// the server's own instructions or title.
	Description string
	// ToolPrefix is put before each of an mcp_server's tool names, as the
	// agent sees them: the operator's way out of a name clash.
	ToolPrefix string
	// ClientRequests are what an mcp_server may ask of the client that made
	// a call while the call runs (client_requests): [ClientRequestLogging],
	// [ClientRequestElicitation], [ClientRequestSampling],
	// [ClientRequestRoots]; nil when the block
	// does not say, which is [Plugin.MCPClientRequests]'s default.
	ClientRequests []string
	// Pos is where the block is declared, "file:line,col".
	Pos string
}

// Options tune parsing; nil means defaults.
type Options struct {
	// Getenv looks up environment variables (TOOLHOST_* overrides and the env() function); nil means [os.Getenv].
	Getenv func(string) string
}

// Load reads the file at path and returns [Parse](src, path, nil).
func Load(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(src, path, nil)
}

// Parse parses src as the contents of filename. Relative paths in the file resolve against
// [filepath.Dir](filename) made absolute. Environment overrides are applied after parsing.
// Any error is a [Diagnostics] listing every problem found.
func Parse(src []byte, filename string, opts *Options) (*Config, error) {
	getenv := os.Getenv
	if opts != nil && opts.Getenv != nil {
		getenv = opts.Getenv
	}
	file, err := filepath.Abs(filename)
	if err != nil {
		return nil, Diagnostics{{File: filename, Summary: "Cannot resolve the file's path", Detail: err.Error()}}
	}
	dir := filepath.Dir(file)
	cfg := &Config{
		File:      file,
		Listen:    "127.0.0.1:8741",
		DataDir:   filepath.Join(dir, "data"),
		PluginDir: filepath.Join(dir, "bin", "plugins"),
		Workspace: filepath.Join(dir, "workspace"),
		Limits:    Limits{Timeout: 30 * time.Second, MaxOutputLines: 2000, MaxOutputBytes: 51200},
		Executor:  Executor{Mode: "sequential", MaxParallel: 4, Approver: "queue", ApprovalTimeout: 5 * time.Minute, IdempotencyWindow: 24 * time.Hour},
		Runtime: Runtime{MaxTurns: 50, MaxWallTime: 10 * time.Minute, MaxTokens: 1_000_000, ContextBudget: 128_000, NoProgress: 3,
			MaxBadOutputs: 3, KeepRecent: 8, Lease: DefaultLease},
	}
	d := &decoder{ctx: evalContext(getenv), dir: dir}
	diags := fromHCL(d.decodeFile(cfg, src, filename), filename)
	diags = append(diags, cfg.override(getenv)...)
	if len(diags) == 0 {
		diags = cfg.Auth.check(cfg.Listen, filename)
	}
	if len(diags) > 0 {
		return nil, diags
	}
	if cfg.Audit.Retention > 0 && cfg.Audit.Export == "" {
		cfg.Audit.Export = filepath.Join(cfg.DataDir, DefaultExportDir)
	}
	for i := range cfg.Plugins {
		if cfg.Plugins[i].Kind != KindMCP {
			cfg.Plugins[i].Path = resolve(cfg.PluginDir, cfg.Plugins[i].Path)
		}
	}
	if cfg.Runtime.Workspace == "" {
		cfg.Runtime.Workspace = cfg.Workspace
	}
	if diags := cfg.placeWorkspace(); len(diags) > 0 {
		return nil, diags
	}
	exe, _ := os.Executable()
	if diags := cfg.CheckTrust(exe); len(diags) > 0 {
		return nil, diags
	}
	return cfg, nil
}

// override applies the TOOLHOST_* environment variables that are set.
func (c *Config) override(getenv func(string) string) Diagnostics {
	var diags Diagnostics
	if v := getenv("TOOLHOST_TOKEN"); v != "" {
		c.Auth.Token = v
	}
	if v := getenv("TOOLHOST_STORE_DSN"); v != "" {
		c.Store.DSN = v
		if c.Store.Driver == "" {
			c.Store.Driver = "postgres"
		}
	}
	if c.Store.Driver == "postgres" && c.Store.DSN == "" {
		diags = append(diags, Diagnostic{File: c.File, Summary: "Missing store DSN",
			Detail: `store { driver = "postgres" } needs dsn (such as env("TOOLHOST_PG_DSN")) or TOOLHOST_STORE_DSN.`})
	}
	if v := getenv("TOOLHOST_LISTEN"); v != "" {
		if _, err := listenAddr(v); err != nil {
			diags = append(diags, Diagnostic{File: "TOOLHOST_LISTEN", Summary: "Invalid TOOLHOST_LISTEN", Detail: err.Error() + "."})
		}
		c.Listen = v
	}
	dirs := []struct {
		name string
		dst  *string
	}{{"TOOLHOST_DATA_DIR", &c.DataDir}, {"TOOLHOST_PLUGIN_DIR", &c.PluginDir}, {"TOOLHOST_WORKSPACE", &c.Workspace}}
	for _, d := range dirs {
		if v := getenv(d.name); v != "" {
			abs, err := filepath.Abs(v)
			if err != nil {
				diags = append(diags, Diagnostic{File: d.name, Summary: "Invalid " + d.name, Detail: err.Error() + "."})
			}
			*d.dst = abs
		}
	}
	return diags
}

// check refuses an auth block that leaves the server open or guessable: auth
// disabled on a listen address that is not loopback, disabled beside a
// token or an oidc block, or a token too short.
func (a *Auth) check(listen, filename string) Diagnostics {
	var detail string
	switch {
	case a.Disabled && !loopback(listen):
		detail = fmt.Sprintf("listen %q is not a loopback address, and auth { disabled = true } would open every route to the network: remove disabled, or listen on 127.0.0.1.", listen)
	case a.Disabled && a.Token != "":
		detail = "auth { disabled = true } and a token (auth { token } or TOOLHOST_TOKEN) contradict each other: remove one."
	case a.Disabled && a.OIDC != nil:
		detail = "auth { disabled = true } and an oidc block contradict each other: remove one."
	case a.Token != "" && len(a.Token) < MinTokenLength:
		detail = fmt.Sprintf("the admin token (auth { token } or TOOLHOST_TOKEN) has %d characters, fewer than %d: use a long random one (for example openssl rand -hex 32), or remove it to use the generated one.", len(a.Token), MinTokenLength)
	default:
		return nil
	}
	return Diagnostics{{File: filename, Summary: "Unsafe authentication", Detail: detail}}
}

// loopback reports whether a host:port address listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// resolve makes p absolute against base, cleaning it.
func resolve(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}
