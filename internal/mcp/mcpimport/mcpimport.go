// Package mcpimport turns the MCP servers of a client's config (Claude
// Desktop's, Cursor's or VS Code's) into toolhost's mcp_server blocks, as
// `toolhost mcp import` prints them: secrets become env() references, each
// stdio server gets a sandbox block for this machine (sandbox.go), and a
// probe that starts the servers beside the config's modules writes their
// descriptions and the tool_prefix a clash of tool names needs (clash.go).
package mcpimport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/protocol"
)

// Options says what [Import] writes the blocks for.
type Options struct {
	// ConfigFile is the config file the blocks go in, which need not
	// exist: no sandbox may write what it trusts, and no label is the name
	// of one of its blocks.
	ConfigFile string
	// Probe starts the servers beside ConfigFile's modules, for each one's
	// description and, where its tool names clash with another group's, a
	// tool_prefix (clash.go); false starts nothing and writes no
	// tool_prefix.
	Probe bool
}

// Import returns the mcp_server blocks equivalent to the MCP servers of a
// client's config (src, called file in messages), each stdio server's with
// a sandbox block for this machine and opts.ConfigFile, or every problem
// found, joined, each naming file and the entry. The warnings say what it
// could not check or left out: a ConfigFile that does not load, and every
// reference to toolhost's own variables. No servers to import is no
// blocks and no error. The probe, if any, starts under ctx.
func Import(ctx context.Context, src []byte, file string, opts Options) (blocks []byte, warnings []string, err error) {
	m, warning, err := localMachine(opts.ConfigFile, opts.Probe)
	if err != nil {
		return nil, nil, err
	}
	if warning != "" {
		warnings = append(warnings, warning)
	}
	blocks, more, err := importMCP(ctx, src, file, m)
	return blocks, append(warnings, more...), err
}

// importMCP returns the mcp_server blocks for the servers of a client's
// config (src, called file in messages), each stdio server's with the
// sandbox it needs on machine m, and with what m's probe learns, or every
// problem found, each naming file and the entry. The warnings say what it
// left out: every reference to toolhost's own variables (leaveOutOwnVars).
func importMCP(ctx context.Context, src []byte, file string, m *machine) (out []byte, warnings []string, err error) {
	field, entries, err := parseClientConfig(src)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	servers := make([]*mcpServer, 0, len(entries))
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		s, entryErrs := parseEntry(name, entries[name])
		for _, err := range entryErrs {
			errs = append(errs, fmt.Errorf("%s: %s.%s: %w", file, field, strconv.Quote(name), err))
		}
		if len(entryErrs) > 0 {
			continue
		}
		w, keep := leaveOutOwnVars(file, s)
		warnings = append(warnings, w...)
		if keep {
			servers = append(servers, s)
		}
	}
	if len(errs) > 0 {
		return nil, warnings, errors.Join(errs...)
	}
	if len(servers) == 0 {
		return nil, warnings, nil
	}
	assignLabels(servers, m.config)
	im := &importer{file: file, machine: m, names: map[string]bool{}}
	im.convert(servers)
	im.confine(servers)
	if m.probe != nil {
		l, err := m.probe(ctx, im.write(servers))
		if err == nil {
			err = im.learn(servers, l)
		}
		if err != nil {
			return nil, warnings, err
		}
	}
	return im.write(servers), warnings, nil
}

// An entry is one server of a client's config, as the client has it.
type entry struct {
	Type    string // stdio, http, streamable-http, sse or ""
	Command string
	Args    []string
	Env     map[string]string
	URL     string
	Headers map[string]string
}

// mcpServer is one server being imported: what the client's config says, the
// label it gets, and the values to write.
type mcpServer struct {
	name    string // as in the client's config
	label   string // the mcp_server block's label: a group id
	entry   entry
	ignored []string // the entry's keys that toolhost does not carry over
	cutArgs []int    // the args a reference to toolhost's variables was cut from

	comments    []string // written above the block
	description string   // what the probe learned, "" when it did not start
	command     value
	args        []value
	env         []keyValue
	url         value
	headers     []keyValue
	toolPrefix  string // where its tool names clash
	sandbox     *box   // a stdio server's
}

// keyValue is one entry of env or headers.
type keyValue struct {
	key string
	val value
}

// value is an attribute value: literal text and references to
// environment variables, written as a string, an env("NAME") call, or a
// template joining them.
type value []part

// part is literal text, or the environment variable env names.
type part struct {
	text string
	env  string
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// parseClientConfig returns the servers of a client's config: the object
// named mcpServers (Claude Desktop, Cursor) or servers (VS Code), and which
// of the two it was. Comments and trailing commas (VS Code's JSONC) are
// allowed.
func parseClientConfig(src []byte) (string, map[string]json.RawMessage, error) {
	src = stripJSONC(src)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(src, &top); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return "", nil, fmt.Errorf("holds a JSON %s, not an object", typeErr.Value)
		}
		return "", nil, jsonError(src, err)
	}
	if top == nil {
		return "", nil, errors.New("not a JSON object")
	}
	var field string
	_, claude := top["mcpServers"]
	_, vscode := top["servers"]
	switch {
	case claude && vscode:
		return "", nil, errors.New(`has both "mcpServers" and "servers": import one client's file at a time`)
	case claude:
		field = "mcpServers"
	case vscode:
		field = "servers"
	default:
		return "", nil, errors.New(`no "mcpServers" object (Claude Desktop, Cursor) or "servers" object (VS Code)`)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(top[field], &entries); err != nil || entries == nil {
		return "", nil, fmt.Errorf("%q is not a JSON object", field)
	}
	return field, entries, nil
}

// jsonError adds the line and column of a syntax error.
func jsonError(src []byte, err error) error {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return fmt.Errorf("not JSON: %v", err)
	}
	// The decoder stops after the byte it could not take.
	before := src[:max(0, min(int(syn.Offset)-1, len(src)))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Errorf("%d,%d: not JSON: %v", line, col, err)
}

// stripJSONC blanks out // and /* */ comments and trailing commas, keeping
// every other byte where it was so that error positions stay right.
func stripJSONC(src []byte) []byte {
	out := bytes.Clone(src)
	lastComma := -1 // a comma with nothing significant after it yet
	for i := 0; i < len(out); i++ {
		switch c := out[i]; {
		case c == '"':
			lastComma = -1
			for i++; i < len(out) && out[i] != '"'; i++ {
				if out[i] == '\\' {
					i++
				}
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			end := bytes.Index(out[i+2:], []byte("*/"))
			if end < 0 {
				return out // unterminated: let the decoder complain
			}
			for j := i; j < i+2+end+2; j++ {
				if out[j] != '\n' {
					out[j] = ' '
				}
			}
			i += 2 + end + 1
		case c == ',':
			lastComma = i
		case c == '}' || c == ']':
			if lastComma >= 0 {
				out[lastComma] = ' '
			}
			lastComma = -1
		case c != ' ' && c != '\t' && c != '\n' && c != '\r':
			lastComma = -1
		}
	}
	return out
}

// The keys of an entry that toolhost imports; the others are listed in a
// comment.
var entryKeys = map[string]bool{"type": true, "command": true, "args": true, "env": true, "url": true, "headers": true}

// parseEntry checks one server entry: stdio (command) or HTTP (url), never
// both, with values of the right types. A number or a boolean stands for
// its text, as clients take it.
func parseEntry(name string, raw json.RawMessage) (*mcpServer, []error) {
	var fields map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&fields); err != nil || fields == nil {
		return nil, []error{errors.New("not a JSON object")}
	}
	var errs []error
	text := func(path string, v any) string {
		switch v := v.(type) {
		case string:
			return v
		case json.Number, bool:
			return fmt.Sprint(v)
		}
		errs = append(errs, fmt.Errorf("%s: want a string, not %s", path, jsonKind(v)))
		return ""
	}
	strMap := func(key string) map[string]string {
		v, ok := fields[key]
		if !ok || v == nil {
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("%s: want an object of strings, not %s", key, jsonKind(v)))
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[k] = text(key+"."+strconv.Quote(k), v)
		}
		return out
	}
	s := &mcpServer{name: name}
	e := &s.entry
	_, hasCommand := fields["command"]
	_, hasURL := fields["url"]
	if v, ok := fields["type"]; ok {
		e.Type = text("type", v)
	}
	if hasCommand {
		e.Command = text("command", fields["command"])
	}
	if hasURL {
		e.URL = text("url", fields["url"])
	}
	switch v := fields["args"].(type) {
	case nil:
	case []any:
		for i, a := range v {
			e.Args = append(e.Args, text("args["+strconv.Itoa(i)+"]", a))
		}
	default:
		errs = append(errs, fmt.Errorf("args: want a list of strings, not %s", jsonKind(v)))
	}
	e.Env = strMap("env")
	e.Headers = strMap("headers")
	if len(errs) > 0 {
		return nil, errs
	}

	kind := strings.ToLower(e.Type)
	var err error
	switch {
	case hasCommand && hasURL:
		err = errors.New("has both command (a stdio server) and url (an HTTP server); keep one")
	case !hasCommand && !hasURL:
		err = errors.New("has neither command (a stdio server) nor url (an HTTP server)")
	case !slices.Contains([]string{"", "stdio", "http", "streamable-http", "streamablehttp", "sse"}, kind):
		err = fmt.Errorf("type %q is not stdio, http, streamable-http or sse", e.Type)
	case hasCommand && kind != "" && kind != "stdio":
		err = fmt.Errorf("type %q needs url, not command", e.Type)
	case hasURL && kind == "stdio":
		err = errors.New(`type "stdio" needs command, not url`)
	case hasCommand && strings.TrimSpace(e.Command) == "":
		err = errors.New("command is empty")
	case hasURL && !hasPlaceholder(e.URL) && !httpURL(e.URL):
		err = fmt.Errorf("url is not an absolute http or https URL")
	}
	if err != nil {
		return nil, []error{err}
	}
	if hasCommand {
		for _, k := range slices.Sorted(maps.Keys(e.Env)) {
			if !envNameRE.MatchString(k) {
				errs = append(errs, fmt.Errorf("env: %q is not an environment variable name (letters, digits and _, not starting with a digit)", k))
			}
		}
	}
	// What does not apply to the server's kind is left out, as are keys
	// toolhost has no use for (cwd, disabled, autoApprove…).
	for k := range fields {
		if !entryKeys[k] || hasURL && (k == "args" || k == "env") || hasCommand && k == "headers" {
			s.ignored = append(s.ignored, k)
		}
	}
	slices.Sort(s.ignored)
	return s, errs
}

// httpURL reports whether s is an absolute http or https URL.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// groupID maps a server's name to a group id: lower case, every character
// but a-z 0-9 _ - as _, mcp_ before one that does not start with a letter
// or is reserved (then reserved is true), at most 64 bytes.
func groupID(name string) (id string, reserved bool) {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r - 'A' + 'a')
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	id = cut(b.String(), maxIDLen)
	reserved = protocol.IsReserved(id)
	if id == "" || id[0] < 'a' || id[0] > 'z' || reserved {
		id = cut("mcp_"+b.String(), maxIDLen)
	}
	return id, reserved
}

// maxIDLen is the longest group id.
const maxIDLen = 64

// cut returns at most the first n bytes of s.
func cut(s string, n int) string { return s[:min(len(s), n)] }

// assignLabels gives each server a distinct group id, none of cfg's block
// names, sorts the servers by it, and notes where a label is not the
// server's name. A name that is already a valid id keeps it unless cfg
// has it; the others, in name order, take _2, _3… when their id is taken.
func assignLabels(servers []*mcpServer, cfg *config.Config) {
	taken, inConfig := map[string]bool{}, map[string]bool{}
	for _, p := range cfg.Plugins {
		taken[p.Name], inConfig[p.Name] = true, true
	}
	for _, s := range servers {
		if id, _ := groupID(s.name); id == s.name && !taken[id] {
			s.label, taken[s.name] = s.name, true
		}
	}
	for _, s := range servers { // sorted by name
		if s.label != "" {
			continue
		}
		base, reserved := groupID(s.name)
		s.label = base
		for n := 2; taken[s.label]; n++ {
			suffix := "_" + strconv.Itoa(n)
			s.label = cut(base, maxIDLen-len(suffix)) + suffix
		}
		taken[s.label] = true
		note := "# from " + strconv.Quote(s.name)
		switch id, _ := groupID(s.name); {
		case reserved:
			note += ": a reserved group id, so prefixed with mcp_"
		case inConfig[id]:
			note += ": the config has a block of that name"
		}
		s.comments = append(s.comments, note)
	}
	slices.SortFunc(servers, func(a, b *mcpServer) int { return strings.Compare(a.label, b.label) })
}
