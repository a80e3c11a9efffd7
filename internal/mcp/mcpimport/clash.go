package mcpimport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpsource"
	"go.opentelemetry.io/otel/trace/noop"
)

// The host offers each tool name once: a builtin or runtime group keeps it
// over an MCP server, else the group registered first, and the other
// group's tool is skipped (host.GroupInfo.Skipped). So the importer starts
// the imported servers as the host would, each in the sandbox written for
// it, beside the config's own modules and the runtime's groups, and learns
// every group's tool names. A server with a name another group has too
// gets a tool_prefix of its label, which makes its names its own; a clash
// no such prefix removes stops the import, saying why.

// learned is what the probe of the config with the imported blocks found.
type learned struct {
	groups []host.GroupInfo  // every group registered, imported or not
	down   map[string]string // a block not running → why
}

// probePatience bounds the start of each module and server in the probe:
// node servers on a loaded machine, fetched by npx at that, start slowly.
const probePatience = time.Minute

// probeConfig starts the config (src, the file's source, nil when there is
// none or it does not load) with the imported blocks, as a host with the
// runtime's groups, and returns what registered. The host keeps its state
// and its workspace in a temporary directory, not the config's data_dir,
// store or workspace; it is closed, with every process it started, before
// probeConfig returns.
func probeConfig(ctx context.Context, file string, src, blocks []byte) (*learned, error) {
	tmp, err := os.MkdirTemp("", "toolhost-import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	getenv := func(name string) string {
		if name == "TOOLHOST_WORKSPACE" {
			return filepath.Join(tmp, "workspace")
		}
		return os.Getenv(name)
	}
	cfg, err := config.Parse(slices.Concat(src, []byte("\n"), blocks), file, &config.Options{Getenv: getenv})
	if err != nil {
		return nil, fmt.Errorf("the blocks beside %s do not load: %w", file, err)
	}
	cfg.DataDir, cfg.Store = filepath.Join(tmp, "data"), config.Store{}
	for i := range cfg.Plugins {
		cfg.Plugins[i].StartTimeout = max(cfg.Plugins[i].StartTimeout, probePatience)
	}
	h, err := host.New(cfg, &host.Options{DescribeTimeout: probePatience, DisableMetrics: true, TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		return nil, err
	}
	defer h.Close()
	rt := agents.New(h, &agents.Options{Console: io.Discard})
	defer rt.Close()
	if err := rt.Register(ctx); err != nil {
		return nil, err
	}
	if err := h.Start(ctx); err != nil {
		return nil, err
	}
	l := &learned{groups: h.Modules().Groups(), down: map[string]string{}}
	for _, p := range h.Modules().List() {
		if p.State != host.StateRunning {
			l.down[p.Name] = cmp.Or(p.LastError, string(p.State))
		}
	}
	return l, nil
}

// toolPrefix is the tool_prefix a server labelled label gets: the label
// as the start of a tool name, at most 32 characters with its "_".
func toolPrefix(label string) string {
	return cut(strings.ReplaceAll(label, "-", "_"), 31) + "_"
}

// learn takes what the probe found: each imported server's description
// and, where its tool names clash with another group's (the config's, or
// another imported server's), its tool_prefix; a server or module that did
// not start is noted. It returns why a prefix cannot make a server's names
// its own, when it cannot.
func (im *importer) learn(servers []*mcpServer, l *learned) error {
	imported := map[string]*mcpServer{}
	for _, s := range servers {
		imported[s.label] = s
	}
	names := map[*mcpServer][]string{} // an imported server's tool names, unprefixed
	owners := map[string][]string{}    // a tool name → the config's groups that have it
	var errs []error
	for _, g := range l.groups {
		all := slices.Clone(g.Tools)
		for _, t := range g.Skipped {
			all = append(all, t.Name)
		}
		s := imported[g.Source.Name]
		if s == nil || g.Source.Kind != host.SourceMCP {
			for _, n := range all {
				owners[n] = append(owners[n], g.ID)
			}
			continue
		}
		if g.Blocked {
			errs = append(errs, fmt.Errorf("%s: mcp_server %s: its label is the name of another group's tool, so the host would offer none of its tools, whatever its tool_prefix: rename %s in %s",
				im.file, strconv.Quote(s.label), strconv.Quote(s.name), im.file))
		}
		names[s], s.description = all, g.Description
	}
	for _, name := range slices.Sorted(maps.Keys(l.down)) {
		why := oneLine(l.down[name])
		if s := imported[name]; s != nil {
			s.comments = append(s.comments, wrap("# not started here ("+why+"): its tool names are not checked against the other groups'", "# ")...)
		} else {
			im.notes = append(im.notes, wrap("# "+name+" did not start here ("+why+"): its tool names are not checked against the servers'", "# ")...)
		}
	}
	for _, s := range servers {
		clash := map[string][]string{} // the other group → the names it has too
		for _, n := range names[s] {
			for _, g := range owners[n] {
				clash["group "+g] = append(clash["group "+g], n)
			}
			for _, o := range servers {
				if o != s && slices.Contains(names[o], n) {
					clash["mcp_server "+strconv.Quote(o.label)] = append(clash["mcp_server "+strconv.Quote(o.label)], n)
				}
			}
		}
		if len(clash) == 0 {
			continue
		}
		s.toolPrefix = toolPrefix(s.label)
		s.comments = append(s.comments, "# tool_prefix, since the host offers each tool name once:")
		for _, g := range slices.Sorted(maps.Keys(clash)) {
			which := "all " + strconv.Itoa(len(names[s])) + " of its tool names"
			if len(clash[g]) < len(names[s]) {
				which = strings.Join(slices.Sorted(slices.Values(clash[g])), ", ")
			}
			s.comments = append(s.comments, wrap("#   "+g+" has "+which+" too", "#     ")...)
		}
	}
	type tool struct {
		s    *mcpServer
		name string // the server's, unprefixed
	}
	unfixable := func(t tool, name, other string) error {
		return fmt.Errorf("%s: mcp_server %s: its tool %s is %s with tool_prefix %s, a name %s has too: write its tool_prefix by hand (mcp import -probe=false prints the blocks without one)",
			im.file, strconv.Quote(t.s.label), t.name, name, strconv.Quote(t.s.toolPrefix), other)
	}
	served := map[string]tool{} // a tool name as prefixed → the server's tool
	for _, s := range servers {
		for _, n := range names[s] {
			name, mine := mcpsource.ToolName(s.toolPrefix, n), tool{s, n}
			if gs := owners[name]; len(gs) > 0 {
				errs = append(errs, unfixable(mine, name, "group "+gs[0]))
				continue
			}
			if o, ok := served[name]; ok {
				if s.toolPrefix == "" { // o's prefix made the clash
					mine, o = o, mine
				}
				errs = append(errs, unfixable(mine, name, "mcp_server "+strconv.Quote(o.s.label)))
				continue
			}
			served[name] = mine
		}
	}
	return errors.Join(errs...)
}

// wrap breaks a comment into lines of at most maxLine characters, at
// spaces, the later ones starting with indent.
func wrap(comment, indent string) []string {
	var lines []string
	for len(comment) > maxLine {
		i := strings.LastIndexByte(comment[:maxLine], ' ')
		if i <= len(indent) {
			break
		}
		lines = append(lines, comment[:i])
		comment = indent + comment[i+1:]
	}
	return append(lines, comment)
}

// oneLine is the first line of s.
func oneLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
