package config

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/toolhost/toolhost/netpolicy"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/gocty"
)

// rootSchema is the top level of config.hcl.
var rootSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "listen"}, {Name: "data_dir"}, {Name: "plugin_dir"}, {Name: "workspace"}, {Name: "website_url"}, {Name: "log_format"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "limits"},
		{Type: "code"},
		{Type: "executor"},
		{Type: "auth"},
		{Type: "tools"},
		{Type: "runtime"},
		{Type: "metrics"},
		{Type: "audit"},
		{Type: "telemetry"},
		{Type: "store"},
		{Type: "mcp"},
		{Type: "gc"},
		{Type: "model", LabelNames: []string{"name"}},
		{Type: "role", LabelNames: []string{"name"}},
		{Type: string(KindPlugin), LabelNames: []string{"name"}},
		{Type: string(KindBuiltin), LabelNames: []string{"name"}},
		{Type: string(KindMCP), LabelNames: []string{"name"}},
	},
}

var limitsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "timeout"}, {Name: "max_output_lines"}, {Name: "max_output_bytes"}},
}

// moduleSchemas are the bodies of plugin, builtin and mcp_server blocks:
// what they share, and their own attributes and blocks.
var moduleSchemas = map[Kind]*hcl.BodySchema{
	KindPlugin:  moduleSchema([]hcl.AttributeSchema{{Name: "path", Required: true}, {Name: "sha256"}}, "config"),
	KindBuiltin: moduleSchema([]hcl.AttributeSchema{{Name: "path"}, {Name: "sha256"}}, "config"),
	KindMCP: moduleSchema([]hcl.AttributeSchema{{Name: "command"}, {Name: "url"}, {Name: "headers"},
		{Name: "description"}, {Name: "tool_prefix"}, {Name: "client_requests"}}),
}

func moduleSchema(own []hcl.AttributeSchema, blocks ...string) *hcl.BodySchema {
	s := &hcl.BodySchema{
		Attributes: append([]hcl.AttributeSchema{
			{Name: "args"},
			{Name: "env"},
			{Name: "restart"},
			{Name: "max_restarts"},
			{Name: "start_timeout"},
			{Name: "requires_approval"},
			{Name: "sandbox"}, // sandbox = "off"; the sandbox block is the other form
		}, own...),
		Blocks: []hcl.BlockHeaderSchema{{Type: "limits"}, {Type: "sandbox"}, {Type: "tool", LabelNames: []string{"name"}}},
	}
	for _, b := range blocks {
		s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: b})
	}
	return s
}

// evalContext offers expressions a single function, env("NAME"), and no variables.
func evalContext(getenv func(string) string) *hcl.EvalContext {
	return &hcl.EvalContext{Functions: map[string]function.Function{
		"env": function.New(&function.Spec{
			Description: `Returns the value of an environment variable, or "" when it is unset.`,
			Params:      []function.Parameter{{Name: "name", Type: cty.String}},
			Type:        function.StaticReturnType(cty.String),
			Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
				return cty.StringVal(getenv(args[0].AsString())), nil
			},
		}),
	}}
}

// decoder fills a Config from an HCL file, collecting every problem it finds.
type decoder struct {
	ctx   *hcl.EvalContext
	dir   string // absolute directory of the file, for relative paths
	diags hcl.Diagnostics
}

func (d *decoder) add(diags hcl.Diagnostics) { d.diags = append(d.diags, diags...) }

func (d *decoder) fail(rng hcl.Range, summary, detail string) {
	d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()})
}

// decodeFile parses src and decodes it into cfg, whose fields already hold the defaults.
// Plugin paths are left as written (or the block's name for a builtin without one), to be
// resolved once the plugin directory is final.
func (d *decoder) decodeFile(cfg *Config, src []byte, filename string) hcl.Diagnostics {
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return diags
	}
	content, diags := f.Body.Content(rootSchema)
	d.add(diags)
	attr(d, content.Attributes, "listen", &cfg.Listen, listenAddr)
	attr(d, content.Attributes, "data_dir", &cfg.DataDir, d.path)
	attr(d, content.Attributes, "plugin_dir", &cfg.PluginDir, d.path)
	attr(d, content.Attributes, "workspace", &cfg.Workspace, d.path)
	if a, ok := content.Attributes["workspace"]; ok {
		cfg.workspacePos = position(a.Range)
	}
	attr(d, content.Attributes, "website_url", &cfg.WebsiteURL, httpURL)
	attr(d, content.Attributes, "log_format", &cfg.LogFormat, oneOf("text", "json"))
	if blk := d.onlyBlock(content.Blocks.OfType("limits")); blk != nil {
		d.limits(&cfg.Limits, blk.Body)
	}
	if blk := d.onlyBlock(content.Blocks.OfType("code")); blk != nil {
		cfg.Code = d.code(blk.Body)
	}
	if blk := d.onlyBlock(content.Blocks.OfType("auth")); blk != nil {
		auth, diags := blk.Body.Content(authSchema)
		d.add(diags)
		attr(d, auth.Attributes, "token", &cfg.Auth.Token, asIs)
		attr(d, auth.Attributes, "disabled", &cfg.Auth.Disabled, asIs)
		attr(d, auth.Attributes, "allowed_hosts", &cfg.Auth.AllowedHosts, hostNames)
		if o := d.onlyBlock(auth.Blocks.OfType("oidc")); o != nil {
			cfg.Auth.OIDC = d.oidc(o.Body)
		}
	}
	if blk := d.onlyBlock(content.Blocks.OfType("executor")); blk != nil {
		d.executor(&cfg.Executor, blk.Body)
	}
	if blk := d.onlyBlock(content.Blocks.OfType("metrics")); blk != nil {
		metrics, diags := blk.Body.Content(metricsSchema)
		d.add(diags)
		attr(d, metrics.Attributes, "public", &cfg.Metrics.Public, asIs)
	}
	if blk := d.onlyBlock(content.Blocks.OfType("audit")); blk != nil {
		audit, diags := blk.Body.Content(auditSchema)
		d.add(diags)
		attr(d, audit.Attributes, "mode", &cfg.Audit.Mode, oneOf("default", "strict"))
		attr(d, audit.Attributes, "retention", &cfg.Audit.Retention, retention)
		attr(d, audit.Attributes, "export", &cfg.Audit.Export, d.path)
	}
	if blk := d.onlyBlock(content.Blocks.OfType("telemetry")); blk != nil {
		tel, diags := blk.Body.Content(telemetrySchema)
		d.add(diags)
		attr(d, tel.Attributes, "traces", &cfg.Telemetry.Traces, oneOf("otlp", "console", "none"))
		attr(d, tel.Attributes, "endpoint", &cfg.Telemetry.Endpoint, httpURL)
		attr(d, tel.Attributes, "protocol", &cfg.Telemetry.Protocol, oneOf("http/protobuf", "grpc"))
		attr(d, tel.Attributes, "sample_ratio", &cfg.Telemetry.SampleRatio, ratio)
		attr(d, tel.Attributes, "service_name", &cfg.Telemetry.ServiceName, nonEmpty)
	}
	if blk := d.onlyBlock(content.Blocks.OfType("store")); blk != nil {
		st, diags := blk.Body.Content(storeSchema)
		d.add(diags)
		attr(d, st.Attributes, "driver", &cfg.Store.Driver, oneOf("sqlite", "postgres"))
		attr(d, st.Attributes, "dsn", &cfg.Store.DSN, asIs[string])
		attr(d, st.Attributes, "artifacts", &cfg.Store.Artifacts, oneOf("files", "database"))
		attr(d, st.Attributes, "artifact_dir", &cfg.Store.ArtifactDir, d.path)
		attr(d, st.Attributes, "quota", &cfg.Store.Quota, quotaSize)
		attr(d, st.Attributes, "role_quota", &cfg.Store.RoleQuota, quotaSize)
		attr(d, st.Attributes, "agent_retention", &cfg.Store.AgentRetention, agentRetention)
	}
	if blk := d.onlyBlock(content.Blocks.OfType("mcp")); blk != nil {
		m, diags := blk.Body.Content(mcpSchema)
		d.add(diags)
		attr(d, m.Attributes, "session_idle_timeout", &cfg.MCP.SessionIdleTimeout, duration)
		attr(d, m.Attributes, "max_sessions_per_credential", &cfg.MCP.MaxSessionsPerCredential, positive)
		attr(d, m.Attributes, "client_approvals", &cfg.MCP.ClientApprovals, func(names []string) ([]string, error) {
			for _, n := range names {
				if !ValidRoleName(n) {
					return nil, fmt.Errorf("%q is not a role name", n)
				}
			}
			return names, nil
		})
	}
	if blk := d.onlyBlock(content.Blocks.OfType("gc")); blk != nil {
		gc, diags := blk.Body.Content(gcSchema)
		d.add(diags)
		attr(d, gc.Attributes, "policy", &cfg.GC.Policy, oneOf("server", "go"))
		attr(d, gc.Attributes, "percent", &cfg.GC.Percent, gcPercent)
		attr(d, gc.Attributes, "memory_budget", &cfg.GC.MemoryBudget, memoryBudget)
		for _, name := range []string{"percent", "memory_budget"} {
			if a, ok := gc.Attributes[name]; ok && cfg.GC.Policy == "go" {
				d.fail(a.NameRange, "Not for Go's defaults", name+` applies to policy "server": policy "go" keeps Go's own figures.`)
			}
		}
	}
	if blk := d.onlyBlock(content.Blocks.OfType("tools")); blk != nil {
		cfg.Tools = d.toolPolicy(blk.Body)
	}
	var provider *hcl.Attribute
	if blk := d.onlyBlock(content.Blocks.OfType("runtime")); blk != nil {
		provider = d.runtime(&cfg.Runtime, blk.Body)
	}
	declared, roles, models := make(map[string]hcl.Range), make(map[string]hcl.Range), make(map[string]hcl.Range)
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "model":
			cfg.Models = append(cfg.Models, d.model(blk, models))
		case "role":
			cfg.Roles = append(cfg.Roles, d.role(blk, roles))
		case string(KindPlugin), string(KindBuiltin):
			cfg.Plugins = append(cfg.Plugins, d.plugin(blk, declared))
		case string(KindMCP):
			cfg.Plugins = append(cfg.Plugins, d.mcpServer(blk, declared))
		}
	}
	d.checkProvider(cfg, provider)
	return d.diags
}

func (d *decoder) limits(l *Limits, body hcl.Body) {
	content, diags := body.Content(limitsSchema)
	d.add(diags)
	attr(d, content.Attributes, "timeout", &l.Timeout, duration)
	attr(d, content.Attributes, "max_output_lines", &l.MaxOutputLines, positive)
	attr(d, content.Attributes, "max_output_bytes", &l.MaxOutputBytes, positive)
}

// plugin decodes a plugin or builtin block; declared maps the names seen so far to their blocks.
func (d *decoder) plugin(blk *hcl.Block, declared map[string]hcl.Range) Plugin {
	p, content := d.module(blk, declared)
	attrs := content.Attributes
	p.Path = p.Name
	attr(d, attrs, "path", &p.Path, nonEmpty)
	attr(d, attrs, "sha256", &p.SHA256, sha256Hex)
	if cfg := d.onlyBlock(content.Blocks.OfType("config")); cfg != nil {
		p.Config = d.configJSON(cfg.Body)
		d.checkNetwork(&p, cfg, content)
	}
	return p
}

// checkNetwork checks the network policy of a block whose sandbox has
// network = "allowed": the sandbox's proxy applies the rules of its config
// block (Config.Confinement), which must be rules it can apply, and which
// the sandbox block must not say a second time.
func (d *decoder) checkNetwork(p *Plugin, cfg *hcl.Block, content *hcl.BodyContent) {
	pol := p.Sandbox
	if pol == nil || pol.Network != sandbox.NetworkAllowed || p.Kind == KindBuiltin && p.Name == "command" {
		return
	}
	rules, ok, err := moduleNetwork(p.Config)
	if !ok {
		return
	}
	if namesNetwork(pol.Config) {
		d.fail(content.Blocks.OfType("sandbox")[0].DefRange, "Network policy said twice",
			fmt.Sprintf("The config block at %s names allow_hosts, deny_hosts or allow_private, and so does this sandbox block. "+
				"Say the policy once, in config: the sandbox's proxy applies the config's rules.", position(cfg.DefRange)))
		return
	}
	if err == nil {
		_, err = netpolicy.Compile(rules)
	}
	if err != nil {
		d.fail(cfg.DefRange, "Invalid network policy",
			fmt.Sprintf("allow_hosts, deny_hosts and allow_private are also the rules of the sandbox's proxy: %v.", err))
	}
}

// module decodes what plugin, builtin and mcp_server blocks share: the
// name, args, env, restart policy, approvals, limits, tool blocks and
// sandbox. It returns the rest of the block's content.
func (d *decoder) module(blk *hcl.Block, declared map[string]hcl.Range) (Plugin, *hcl.BodyContent) {
	kind, name, nameRange := Kind(blk.Type), blk.Labels[0], blk.LabelRanges[0]
	p := Plugin{
		Name:         name,
		Kind:         kind,
		Restart:      RestartOnFailure,
		MaxRestarts:  5,
		StartTimeout: 10 * time.Second,
		Config:       json.RawMessage("{}"),
		Pos:          position(blk.DefRange),
	}
	if err := checkName(kind, name); err != nil {
		d.fail(nameRange, fmt.Sprintf("Invalid %s name", kind), err.Error()+".")
	} else if first, dup := declared[name]; dup {
		d.fail(nameRange, "Duplicate module name",
			fmt.Sprintf("A plugin, builtin or mcp_server named %q was already declared at %s.", name, position(first)))
	} else {
		declared[name] = blk.DefRange
	}

	content, diags := blk.Body.Content(moduleSchemas[kind])
	d.add(diags)
	attrs := content.Attributes
	attr(d, attrs, "args", &p.Args, asIs)
	attr(d, attrs, "env", &p.Env, envMap)
	attr(d, attrs, "restart", &p.Restart, restartPolicy)
	attr(d, attrs, "max_restarts", &p.MaxRestarts, nonNegative)
	attr(d, attrs, "start_timeout", &p.StartTimeout, duration)
	attr(d, attrs, "requires_approval", &p.RequiresApproval, asIs)
	if blk := d.onlyBlock(content.Blocks.OfType("limits")); blk != nil {
		d.limits(&p.Limits, blk.Body)
	}
	for _, blk := range content.Blocks.OfType("tool") {
		d.tool(&p, blk)
	}
	p.Sandbox = d.sandbox(content)
	return p, content
}

var toolSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "timeout"}, {Name: "requires_approval"},
	{Name: "title"}, {Name: "read_only"}, {Name: "destructive"}, {Name: "idempotent"}, {Name: "open_world"}}}

// toolHints are the tool block's hint attributes and MCP's names for them.
var toolHints = []struct{ attr, hint string }{
	{"read_only", "readOnlyHint"}, {"destructive", "destructiveHint"}, {"idempotent", "idempotentHint"}, {"open_world", "openWorldHint"},
}

// tool decodes a plugin's `tool "NAME" {}` block.
func (d *decoder) tool(p *Plugin, blk *hcl.Block) {
	name := blk.Labels[0]
	if !toolNameRE.MatchString(name) {
		d.fail(blk.LabelRanges[0], "Invalid tool name", fmt.Sprintf("%q is not a tool name.", name))
		return
	}
	if _, dup := p.Tools[name]; dup {
		d.fail(blk.LabelRanges[0], "Duplicate tool block", fmt.Sprintf("Tool %q is configured twice in this block.", name))
		return
	}
	var t ToolSettings
	content, diags := blk.Body.Content(toolSchema)
	d.add(diags)
	attr(d, content.Attributes, "timeout", &t.Timeout, duration)
	attr(d, content.Attributes, "requires_approval", &t.RequiresApproval, asIs)
	attr(d, content.Attributes, "title", &t.Title, asIs)
	for _, h := range toolHints {
		if _, ok := content.Attributes[h.attr]; ok {
			var v bool
			attr(d, content.Attributes, h.attr, &v, asIs)
			if t.Hints == nil {
				t.Hints = map[string]bool{}
			}
			t.Hints[h.hint] = v
		}
	}
	if p.Tools == nil {
		p.Tools = map[string]ToolSettings{}
	}
	p.Tools[name] = t
}

var authSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "token"}, {Name: "disabled"}, {Name: "allowed_hosts"}},
	Blocks: []hcl.BlockHeaderSchema{{Type: "oidc"}}}

var metricsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "public"}}}

var auditSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "mode"}, {Name: "retention"}, {Name: "export"}}}

var storeSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "driver"}, {Name: "dsn"}, {Name: "artifacts"}, {Name: "artifact_dir"}, {Name: "quota"}, {Name: "role_quota"}, {Name: "agent_retention"}}}

var mcpSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "session_idle_timeout"}, {Name: "max_sessions_per_credential"}, {Name: "client_approvals"}}}

var gcSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "policy"}, {Name: "percent"}, {Name: "memory_budget"}}}

var telemetrySchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "traces"}, {Name: "endpoint"}, {Name: "protocol"}, {Name: "sample_ratio"}, {Name: "service_name"},
}}

var executorSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "mode"}, {Name: "max_parallel"}, {Name: "approver"}, {Name: "approval_timeout"}, {Name: "idempotency_window"}, {Name: "approve"},
	{Name: "max_pending_approvals"}, {Name: "max_pending_approval_mb"},
}}

func (d *decoder) executor(e *Executor, body hcl.Body) {
	content, diags := body.Content(executorSchema)
	d.add(diags)
	attr(d, content.Attributes, "mode", &e.Mode, oneOf("sequential", "concurrent"))
	attr(d, content.Attributes, "max_parallel", &e.MaxParallel, positive)
	attr(d, content.Attributes, "approver", &e.Approver, oneOf("queue", "approve", "deny"))
	attr(d, content.Attributes, "approval_timeout", &e.ApprovalTimeout, duration)
	attr(d, content.Attributes, "idempotency_window", &e.IdempotencyWindow, duration)
	attr(d, content.Attributes, "approve", &e.Approve, oneOf("read_only"))
	attr(d, content.Attributes, "max_pending_approvals", &e.MaxPendingApprovals, positive)
	attr(d, content.Attributes, "max_pending_approval_mb", &e.MaxPendingApprovalMB, positive)
}

// onlyBlock returns the first of blocks, all of one type, reporting the others as duplicates.
func (d *decoder) onlyBlock(blocks hcl.Blocks) *hcl.Block {
	if len(blocks) == 0 {
		return nil
	}
	for _, b := range blocks[1:] {
		d.fail(b.DefRange, fmt.Sprintf("Duplicate %s block", b.Type),
			fmt.Sprintf("Only one %s block is allowed here; the first is at %s.", b.Type, position(blocks[0].DefRange)))
	}
	return blocks[0]
}

// attr decodes the attribute name, when present, as a T and stores conv's result in *dst,
// reporting a wrong type or conv's error at the attribute's value.
func attr[T, U any](d *decoder, attrs hcl.Attributes, name string, dst *U, conv func(T) (U, error)) {
	a, ok := attrs[name]
	if !ok {
		return
	}
	v, diags := a.Expr.Value(d.ctx)
	d.add(diags)
	if diags.HasErrors() {
		return
	}
	var raw T
	ty, err := gocty.ImpliedType(&raw)
	if err == nil {
		v, err = convert.Convert(v, ty)
	}
	if err == nil {
		err = gocty.FromCtyValue(v, &raw)
	}
	if err != nil {
		d.fail(a.Expr.Range(), "Incorrect attribute value type",
			fmt.Sprintf("Inappropriate value for attribute %q: %v.", name, err))
		return
	}
	u, err := conv(raw)
	if err != nil {
		d.fail(a.Expr.Range(), fmt.Sprintf("Invalid value for %q", name), err.Error()+".")
		return
	}
	*dst = u
}
