package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/gcpolicy"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/toolhost/toolhost/store"
)

// common are the flags every host command takes.
type common struct {
	config   string
	logLevel string
	approver host.Approver // nil: the config's
	console  io.Writer     // console_print's output; nil: stdout
	logJSON  bool          // the config's log_format is json (set by load)
	// serverGC applies the config's garbage-collection policy
	// (internal/gcpolicy) once it is loaded: serve and mcp, the commands
	// that run as servers.
	serverGC bool
	// beforeStart, when set, runs once the host and runtime exist, before
	// the host starts its plugins (serve listens then, so that /healthz
	// and /readyz answer while it starts).
	beforeStart func(*session) error
}

func newFlags(name string, stderr io.Writer, defaultLevel string) (*flag.FlagSet, *common) {
	fs := flag.NewFlagSet("toolhost "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &common{}
	fs.StringVar(&c.config, "config", "config.hcl", "the config file")
	level := os.Getenv("TOOLHOST_LOG_LEVEL")
	if level == "" {
		level = defaultLevel
	}
	fs.StringVar(&c.logLevel, "log-level", level, "log level: trace, debug, info, warn, error, off")
	return fs, c
}

func (c *common) logger(stderr io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "toolhost", Output: stderr, Level: hclog.LevelFromString(c.logLevel), JSONFormat: c.logJSON})
}

// load parses the config, printing its diagnostics on failure.
func (c *common) load(stderr io.Writer) (*config.Config, bool) {
	cfg, err := config.Load(c.config)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, false
	}
	c.logJSON = cfg.LogFormat == "json"
	return cfg, true
}

// agentMode says what a command's runtime does with agents.
type agentMode int

const (
	// recordAgents records the agents spawned (by a tool call) for a server
	// to run: one-shot commands.
	recordAgents agentMode = iota
	// ownAgents runs the agents it spawns: toolhost run.
	ownAgents
	// serveAgents also adopts the agents no live process runs: serve.
	serveAgents
)

// session is a started host with its agent runtime.
type session struct {
	h  *host.Host
	rt *agents.Runtime
}

// Close stops the runtime, then the host.
func (s *session) Close() error { return errors.Join(s.rt.Close(), s.h.Close()) }

// startHost loads the config and starts a host on it, with the runtime's
// built-in groups; provider names the model block agents use ("": the
// runtime block's).
func (c *common) startHost(ctx context.Context, stderr io.Writer, mode agentMode, provider string) (*session, bool) {
	cfg, ok := c.load(stderr)
	if !ok {
		return nil, false
	}
	if c.serverGC {
		gc := gcpolicy.Decide(cfg.GC, os.Getenv, "/")
		gc.Apply()
		c.logger(stderr).Info("gc: " + gc.String())
	}
	var p model.Provider
	if name := cmp.Or(provider, cfg.Runtime.Provider); name != "" {
		m, ok := cfg.Model(name)
		if !ok {
			fmt.Fprintf(stderr, "toolhost: no model block is named %q\n", name)
			return nil, false
		}
		var err error
		if p, err = model.New(m); err != nil {
			fmt.Fprintf(stderr, "toolhost: %v\n", err)
			return nil, false
		}
	}
	h, err := host.New(cfg, &host.Options{Logger: c.logger(stderr), Approver: c.approver})
	var rt *agents.Runtime
	if err == nil {
		rt = agents.New(h, &agents.Options{Provider: p, RunAgents: mode != recordAgents, Adopt: mode == serveAgents, Console: c.console})
		if err = rt.Register(ctx); err == nil && c.beforeStart != nil {
			err = c.beforeStart(&session{h: h, rt: rt})
		}
		if err == nil {
			err = h.Start(ctx)
		}
	}
	if err == nil {
		err = rt.Start(ctx)
	}
	if err != nil {
		if h != nil {
			_ = h.Close()
		}
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return nil, false
	}
	return &session{h: h, rt: rt}, true
}

// withHost starts a host on the config, runs f and closes the host; a host
// that does not start is exit status 1.
func (c *common) withHost(stderr io.Writer, f func(ctx context.Context, h *host.Host) int) int {
	ctx := context.Background()
	s, ok := c.startHost(ctx, stderr, recordAgents, "")
	if !ok {
		return 1
	}
	defer s.Close()
	return f(ctx, s.h)
}

// withRoles opens a host on the config with its roles loaded and no module
// started (host.Host.LoadRoles), runs f and closes the host: for the
// commands that read or edit roles and tokens, which need no module and so
// say nothing about them.
func (c *common) withRoles(stderr io.Writer, f func(ctx context.Context, h *host.Host) int) int {
	ctx := context.Background()
	cfg, ok := c.load(stderr)
	if !ok {
		return 1
	}
	h, err := host.New(cfg, &host.Options{Logger: c.logger(stderr)})
	if err == nil {
		defer h.Close()
		err = h.Roles().Load(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	return f(ctx, h)
}

// printList prints items as JSON, or as a table: header (column names
// separated by tabs), then row's line for each item.
func printList[T any](w io.Writer, items []T, asJSON bool, header string, row func(T) string) error {
	if asJSON {
		printJSON(w, items)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	return tw.Flush()
}

func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func validateCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("validate", stderr, "warn")
	if fs.Parse(args) != nil {
		return 2
	}
	cfg, ok := c.load(stderr)
	if !ok {
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%d plugins, listen %s)\n", c.config, len(cfg.Plugins), cfg.Listen)
	return 0
}

func groupsCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("groups", stderr, "warn")
	asJSON := fs.Bool("json", false, "print JSON")
	if fs.Parse(args) != nil {
		return 2
	}
	return c.withHost(stderr, func(_ context.Context, h *host.Host) int {
		diags := stdout
		if *asJSON {
			printJSON(stdout, h.Modules().Groups())
			diags = stderr
		} else {
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "GROUP\tSOURCE\tSTATE\tPID\tTOOLS\tDESCRIPTION")
			for _, g := range h.Modules().Groups() {
				fmt.Fprintf(tw, "%s\t%s %s\t%s\t%d\t%s\t%s\n", g.ID, g.Source.Kind, g.Source.Name, g.Source.State, g.Source.Pid,
					strings.Join(g.Tools, ","), g.Description)
			}
			_ = tw.Flush()
		}
		for _, d := range h.Modules().Diagnostics() {
			fmt.Fprintf(diags, "%s: %s\n", d.Level, d.Message)
		}
		for _, p := range h.Modules().List() {
			if p.State != host.StateRunning {
				fmt.Fprintf(stderr, "plugin %s: %s: %s\n", p.Name, p.State, p.LastError)
			}
		}
		return 0
	})
}

func callCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("call", stderr, "warn")
	role := fs.String("role", "", "call as this role: a tool outside it is refused")
	agent := fs.String("agent", "", "call as this agent (and so its role)")
	approve := fs.Bool("approve", false, "approve the call if it needs approval, its tool's or a rule's (otherwise it is denied)")
	id := fs.String("id", "", "the call's id: a repeat with the same id and arguments replays the first outcome instead of running again")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: toolhost call [-config F] [-role R | -agent ID] [-id CALL-ID] TOOL ['JSON-ARGS']")
		fs.PrintDefaults()
	}
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return 2
	}
	c.approver = host.AlwaysDeny{Reason: "the call needs approval: pass -approve to approve it"}
	if *approve {
		c.approver = host.AlwaysApprove{}
	}
	raw := json.RawMessage("{}")
	if fs.NArg() == 2 {
		raw = json.RawMessage(fs.Arg(1))
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			fmt.Fprintf(stderr, "toolhost: arguments must be a JSON object: %v\n", err)
			return 2
		}
	}
	return c.withHost(stderr, func(ctx context.Context, h *host.Host) int {
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: fs.Arg(0), Arguments: raw, Context: toolhost.CallContext{CallID: *id, Channel: "cli", Role: *role, AgentID: *agent, Credential: store.CredentialCLI}})
		if err != nil {
			res = toolhost.ErrorResult(err)
		}
		printJSON(stdout, res)
		if !res.OK {
			return 1
		}
		return 0
	})
}

func pluginCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "inspect" {
		fmt.Fprintln(stderr, "usage: toolhost plugin inspect [-config JSON] PATH")
		return 2
	}
	fs := flag.NewFlagSet("toolhost plugin inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgJSON := fs.String("config", "{}", "the plugin's configuration, a JSON object")
	level := fs.String("log-level", "warn", "log level")
	if fs.Parse(args[1:]) != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: toolhost plugin inspect [-config JSON] PATH")
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "toolhost", Output: stderr, Level: hclog.LevelFromString(*level)})
	spec, err := host.Inspect(context.Background(), fs.Arg(0), json.RawMessage(*cfgJSON), logger)
	if spec != nil {
		printJSON(stdout, spec)
	}
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %s: %v\n", toolhost.CodeOf(err), err)
		return 1
	}
	if protocol.IsReserved(spec.ID) {
		fmt.Fprintf(stderr, "note: %q is a reserved id: only a builtin block may load this plugin\n", spec.ID)
	}
	return 0
}
