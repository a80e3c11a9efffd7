package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/gcpolicy"
	"github.com/toolhost/toolhost/internal/mcp/jsondepth"
	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/toolhost/toolhost/store"
	"golang.org/x/sys/unix"
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

// newHostFlags makes the flag set of a command that reads the config,
// with the flags every such command takes: -config and -log-level
// (default level: TOOLHOST_LOG_LEVEL, else defaultLevel).
func newHostFlags(u *usage, stdout, stderr io.Writer, defaultLevel string) (*flags, *common) {
	fs := newFlags(u, stdout, stderr)
	c := &common{}
	fs.StringVar(&c.config, "config", "config.hcl", "the config `file`")
	fs.StringVar(&c.logLevel, "log-level", cmp.Or(os.Getenv("TOOLHOST_LOG_LEVEL"), defaultLevel), "log `level`: trace, debug, info, warn, error, off")
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
	if b, err := jsondepth.MarshalIndent(v); err == nil {
		_, _ = w.Write(append(b, '\n'))
	}
}

// validateUsage is `toolhost validate`.
var validateUsage = &usage{
	name:    "validate",
	summary: "check a config file and say what it declares",
	details: "Nothing is started: a config with errors prints them (file:line:col) and exits with status 1.",
	example: "toolhost validate -config config.hcl",
}

func validateCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(validateUsage, stdout, stderr, "warn")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	cfg, ok := c.load(stderr)
	if !ok {
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%d plugins, listen %s)\n", c.config, len(cfg.Plugins), cfg.Listen)
	return 0
}

// groupsUsage is `toolhost groups`.
var groupsUsage = &usage{
	name:    "groups",
	summary: "start the modules, list the groups they give, and stop them",
	details: `The TOOLS column is cut to fit the terminal (or $COLUMNS, else 100 columns), ending
with "… +N more"; -json lists every tool.`,
	example: "toolhost groups -config config.hcl",
}

func groupsCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(groupsUsage, stdout, stderr, "warn")
	asJSON := fs.Bool("json", false, "print JSON, with every tool of each group")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	return c.withHost(stderr, func(_ context.Context, h *host.Host) int {
		diags := stdout
		if *asJSON {
			printJSON(stdout, h.Modules().Groups())
			diags = stderr
		} else {
			printGroups(stdout, h.Modules().Groups(), termWidth(stdout))
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

// printGroups prints the groups as a table meant to fit in width
// columns: the TOOLS column takes what the other columns leave, but for
// room for the start of the description (and at least minToolsWidth),
// and the description is cut to what is left (at least
// minDescriptionWidth).
func printGroups(w io.Writer, groups []host.GroupInfo, width int) {
	rows := make([][]string, len(groups))
	cols := []int{len("GROUP"), len("SOURCE"), len("STATE"), len("PID")}
	for i, g := range groups {
		rows[i] = []string{g.ID, string(g.Source.Kind) + " " + g.Source.Name, string(g.Source.State), strconv.Itoa(g.Source.Pid)}
		for j, cell := range rows[i] {
			cols[j] = max(cols[j], utf8.RuneCountInString(cell))
		}
	}
	rest := width
	for _, n := range cols {
		rest -= n + 2
	}
	toolsWidth := len("TOOLS")
	for i, g := range groups {
		cell := toolsCell(g.Tools, max(rest-descriptionRoom, minToolsWidth))
		rows[i] = append(rows[i], cell)
		toolsWidth = max(toolsWidth, utf8.RuneCountInString(cell))
	}
	descWidth := max(rest-toolsWidth-2, minDescriptionWidth)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSOURCE\tSTATE\tPID\tTOOLS\tDESCRIPTION")
	for i, g := range groups {
		fmt.Fprintf(tw, "%s\t%s\n", strings.Join(rows[i], "\t"), output.OneLine(g.Description, descWidth))
	}
	_ = tw.Flush()
}

const (
	// descriptionRoom is what the groups table keeps for the start of the
	// description when it cuts the TOOLS column.
	descriptionRoom = 30
	// minToolsWidth is the TOOLS column's width however narrow the table.
	minToolsWidth = 32
	// minDescriptionWidth is the DESCRIPTION column's, however narrow.
	minDescriptionWidth = 20
)

// toolsCell is names comma-separated in at most width characters: all of
// them, or as many as fit followed by "… +N more" for the others, or
// only their number when not even the first fits.
func toolsCell(names []string, width int) string {
	if all := strings.Join(names, ", "); utf8.RuneCountInString(all) <= width {
		return all
	}
	cell := fmt.Sprintf("%d %s", len(names), plural(len(names), "tool"))
	var b strings.Builder
	for i, name := range names[:len(names)-1] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
		next := fmt.Sprintf("%s, … +%d more", b.String(), len(names)-i-1)
		if utf8.RuneCountInString(next) > width {
			break
		}
		cell = next
	}
	return cell
}

// termWidth is the width of the terminal w writes to, else $COLUMNS, else
// 100.
func termWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 100
}

// callUsage is `toolhost call`.
var callUsage = &usage{
	name:    "call",
	args:    "TOOL [JSON-ARGS]",
	min:     1,
	max:     2,
	summary: "call one tool and print its result envelope",
	details: `JSON-ARGS is the tool's arguments, a JSON object (default {}). The call is made as the CLI
(credential cli); one that needs approval, its tool's or a rule's, is denied unless -approve.
Exit status 1 when the call fails.`,
	example: `toolhost call -role developer read_file '{"path":"README.md"}'`,
}

func callCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(callUsage, stdout, stderr, "warn")
	role := fs.String("role", "", "call as this `role`: a tool outside it is refused")
	agent := fs.String("agent", "", "call as this agent (and so its role)")
	approve := fs.Bool("approve", false, "approve the call if it needs approval, its tool's or a rule's (otherwise it is denied)")
	id := fs.String("id", "", "the call's `id`: a repeat with the same id and arguments replays the first outcome")
	if code, ok := fs.parse(args); !ok {
		return code
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
			return fs.fail("JSON-ARGS must be a JSON object: %v", err)
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

// pluginUsage is `toolhost plugin`.
var pluginUsage = &usage{
	name:    "plugin",
	summary: "inspect a plugin executable",
	example: "toolhost plugin inspect bin/plugins/notes",
	subs:    []*usage{pluginInspectUsage},
}

// pluginInspectUsage is `toolhost plugin inspect`.
var pluginInspectUsage = &usage{
	name:    "plugin inspect",
	args:    "PATH",
	min:     1,
	max:     1,
	summary: "start a plugin, print the group it describes, and stop it",
	details: "Nothing is registered: the plugin runs only to describe its group.",
	example: `toolhost plugin inspect -config '{"max_notes":10}' bin/plugins/notes`,
}

func pluginInspectCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(pluginInspectUsage, stdout, stderr)
	cfgJSON := fs.String("config", "{}", "the plugin's configuration, a `JSON` object")
	level := fs.String("log-level", "warn", "log `level`: trace, debug, info, warn, error, off")
	if code, ok := fs.parse(args); !ok {
		return code
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
