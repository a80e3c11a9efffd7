package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/sandbox"
)

// placeWorkspace makes the first-party modules work in c.Workspace unless
// their config says otherwise: the workspace module's roots and the
// command module's workdir default to it (their own default, their working
// directory, is the config file's, which holds the file), and relative
// roots and workdirs resolve against the file's directory.
func (c *Config) placeWorkspace() Diagnostics {
	if c.Workspace == "" {
		return nil
	}
	dir := filepath.Dir(c.File)
	var diags Diagnostics
	for i := range c.Plugins {
		p := &c.Plugins[i]
		keys, ok := workspaceKeys[p.Name]
		if p.Kind != KindBuiltin || !ok {
			continue
		}
		var conf map[string]any
		if err := json.Unmarshal(p.Config, &conf); err != nil || conf == nil {
			continue // not an object: the module says so
		}
		if _, set := conf[keys.def]; !set {
			conf[keys.def] = keys.value(c.Workspace)
		}
		for _, k := range []string{"roots", "workdir"} {
			switch v := conf[k].(type) {
			case string:
				conf[k] = resolve(dir, v)
			case []any:
				for j, r := range v {
					if s, ok := r.(string); ok && s != "" {
						v[j] = resolve(dir, s)
					}
				}
			}
		}
		raw, err := json.Marshal(conf)
		if err != nil {
			diags = append(diags, diagAt(p.Pos, c.File, "Invalid config", err.Error()))
			continue
		}
		p.Config = raw
	}
	return diags
}

// workspaceKeys are the config keys of the first-party modules that agents
// write through, and which of them defaults to the workspace.
var workspaceKeys = map[string]struct {
	def   string
	value func(ws string) any
}{
	"workspace": {"roots", func(ws string) any { return []any{ws} }},
	"command":   {"workdir", func(ws string) any { return ws }},
}

// trustPath is a path that the trust check compares, and what it is.
type trustPath struct {
	path, what string
	pos        string // where the file declares it; "" for none
	dir        bool   // a directory: what is inside it counts as it
}

// CheckTrust refuses a configuration in which a path an agent can write
// (the workspace, the first-party modules' roots, a sandbox's read_write,
// the artifact directory) holds one the host trusts (the config file, the
// plugin and data directories, a module's executable, the toolhost binary
// exe), or lies inside the plugin or data directory: an agent that can
// write there could change what the host runs or trusts, and get it run
// unconfined. A module's executable counts as written (a bare mcp_server
// command as found in PATH), as its symbolic links resolve, and, for a
// `#!` script, its interpreter: replacing any of them changes what runs.
// It also refuses a sandbox path (read_only or read_write) that is the
// data directory or lies inside it (readable checks it). Paths are
// compared after resolving symbolic links, a trusted file's own link both
// resolved and not. Each conflict is one [Diagnostic], at the block or
// attribute that declares the path.
func (c *Config) CheckTrust(exe string) Diagnostics {
	trusted := []trustPath{
		{path: c.File, what: "the config file"},
		{path: c.PluginDir, what: "the plugin directory", dir: true},
		{path: c.DataDir, what: "the data directory", dir: true},
		{path: c.Audit.Export, what: "the audit export directory", dir: true},
		{path: exe, what: "the toolhost binary"},
	}
	for _, p := range c.Plugins {
		trusted = append(trusted, executables(&p)...)
	}
	var diags Diagnostics
	seen := map[[2]string]bool{}
	for _, w := range c.writable() {
		wp := realPath(w.path)
		for _, t := range trusted {
			if t.path == "" {
				continue
			}
			for _, tp := range trustedAs(t) {
				var verb string
				switch {
				case sandbox.Within(wp, tp):
					verb = "holds"
				case t.dir && w.dir && sandbox.Within(tp, wp):
					verb = "lies inside"
				default:
					continue
				}
				if key := [2]string{wp, realPath(t.path)}; !seen[key] {
					seen[key] = true
					diags = append(diags, diagAt(w.pos, c.File, "An agent could write what the host trusts", fmt.Sprintf(
						"%s %s %s %s %s: an agent that writes there could change what the host runs or trusts. Keep them apart (the default config.hcl keeps agents in workspace/ beside it).",
						w.what, w.path, verb, t.what, t.path)))
				}
			}
		}
	}
	return append(diags, c.readable()...)
}

// readable refuses each sandbox path, read_only or read_write, that is the
// data directory or lies inside it: the directory holds the admin token,
// the database and the audit trail, and a sandbox covers it with an empty
// directory; a path named inside it would show the module those files.
func (c *Config) readable() Diagnostics {
	if c.DataDir == "" {
		return nil
	}
	data := realPath(c.DataDir)
	var diags Diagnostics
	for _, p := range c.Plugins {
		if p.Sandbox == nil || p.Sandbox.Off {
			continue
		}
		for _, l := range []struct {
			name  string
			paths []string
		}{{"read_only", p.Sandbox.ReadOnly}, {"read_write", p.Sandbox.ReadWrite}} {
			for _, path := range l.paths {
				if sandbox.Within(data, realPath(path)) {
					diags = append(diags, diagAt(p.Pos, c.File, "A sandbox path in the data directory", fmt.Sprintf(
						"%s %q's sandbox %s names %s, which lies inside the data directory %s: it holds the admin token, the database and the audit trail, which no module may read or write. Give the module a directory of its own.",
						p.Kind, p.Name, l.name, path, c.DataDir)))
				}
			}
		}
	}
	return diags
}

// trustedAs is what a trusted path is compared as: resolved, and for a
// file, also as named (its directory resolved, not the file itself), since
// replacing a symbolic link changes what it points at.
func trustedAs(t trustPath) []string {
	real := realPath(t.path)
	if t.dir {
		return []string{real}
	}
	named := filepath.Join(realPath(filepath.Dir(t.path)), filepath.Base(t.path))
	if named == real {
		return []string{real}
	}
	return []string{real, named}
}

// executables is [Plugin.Executables] as trusted paths.
func executables(p *Plugin) []trustPath {
	var out []trustPath
	for i, path := range p.Executables() {
		what := fmt.Sprintf("the executable of %s %q", p.Kind, p.Name)
		if i > 0 {
			what = fmt.Sprintf("the interpreter of %s %q's executable", p.Kind, p.Name)
		}
		out = append(out, trustPath{path: path, what: what})
	}
	return out
}

// Executables lists the files that run when the block's module starts:
// its executable first (a bare mcp_server command as found in PATH; none
// when it is not there, the start says so), then, for a `#!` script, its
// interpreter (and the program `#!/usr/bin/env` names, as found in PATH).
// An HTTP mcp_server has none.
func (p *Plugin) Executables() []string {
	path := p.Path
	if p.Kind == KindMCP && !strings.Contains(path, "/") {
		found, err := exec.LookPath(path)
		if err != nil {
			return nil
		}
		path = found
	}
	if path == "" {
		return nil
	}
	return append([]string{path}, interpreter(path)...)
}

// interpreter is what the `#!` line of the script at path runs: the
// program it names and, when that is env, the program env runs, looked up
// in PATH; nil for a file that is not a script.
func interpreter(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadSlice('\n')
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return nil
	}
	fields := strings.Fields(string(rest))
	if len(fields) == 0 {
		return nil
	}
	out := fields[:1]
	if filepath.Base(fields[0]) == "env" {
		for _, f := range fields[1:] {
			if strings.HasPrefix(f, "-") || strings.Contains(f, "=") {
				continue
			}
			if found, err := exec.LookPath(f); err == nil {
				out = append(out, found)
			}
			break
		}
	}
	return out
}

// writable lists the paths agents can write through the configured modules.
func (c *Config) writable() []trustPath {
	var out []trustPath
	if c.Workspace != "" {
		out = append(out, trustPath{path: c.Workspace, what: "the workspace", pos: c.workspacePos, dir: true})
	}
	for i := range c.Plugins {
		p := &c.Plugins[i]
		for _, w := range c.writablePaths(p) {
			out = append(out, trustPath{path: w, what: fmt.Sprintf("%s %q's writable path", p.Kind, p.Name), pos: p.Pos, dir: true})
		}
	}
	if c.Store.ArtifactDir != "" { // written by the host under names of its own: only what it holds counts
		out = append(out, trustPath{path: c.Store.ArtifactDir, what: "the artifact directory"})
	}
	return out
}

// moduleRoots reads the directories a workspace or command module writes
// from its config: roots, and workdir; its working directory dir when it
// names neither.
func moduleRoots(raw json.RawMessage, dir string) []string {
	var conf struct {
		Roots   []string `json:"roots"`
		Workdir string   `json:"workdir"`
	}
	_ = json.Unmarshal(raw, &conf) // a bad config is the module's to refuse
	out := conf.Roots
	if conf.Workdir != "" {
		out = append(out, conf.Workdir)
	}
	if len(out) == 0 {
		out = []string{dir}
	}
	for i, r := range out {
		out[i] = resolve(dir, r)
	}
	return out
}

// realPath is p absolute, with the symbolic links of its longest existing
// prefix resolved.
func realPath(p string) string {
	p, _ = filepath.Abs(p)
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		if dir == filepath.Dir(dir) {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// diagAt is a diagnostic at pos ("file:line,col"), or about file when pos
// is "".
func diagAt(pos, file, summary, detail string) Diagnostic {
	d := Diagnostic{File: file, Summary: summary, Detail: detail}
	if i := strings.LastIndexByte(pos, ':'); i > 0 {
		line, col, _ := strings.Cut(pos[i+1:], ",")
		if l, err := strconv.Atoi(line); err == nil {
			d.File, d.Line = pos[:i], l
			d.Column, _ = strconv.Atoi(col)
		}
	}
	if d.File == "" {
		d.File = "config"
	}
	return d
}
