package mcpimport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sandbox"
)

// Every stdio server gets a sandbox block: the default confinement (the
// system read-only, no network) plus what the importer can see the server
// needs on this machine.
//   - Its program: the packages of the script the command runs (the
//     outermost node_modules it lies in, else the directory holding its
//     package.json or pyvenv.cfg) and the installation of its interpreter,
//     read-only; the command file itself the host adds at start.
//   - Its arguments' paths: a directory read-write (it is what the server
//     is for, as server-filesystem's allowed directories), a file
//     read-only; but a directory the host refuses as writable
//     (config.Config.CheckTrust) is written commented out, with the reason,
//     so that the config still loads. A path this machine lacks, a relative
//     one and one under ~ are notes: the server resolves a relative path
//     against its working directory and ~ against its HOME, which the
//     sandbox makes its own.
//   - A runner that fetches the server's code at each start (npx, uvx…):
//     network = "allowed", through the host's filtering proxy, with what it
//     downloads kept in the sandbox's private HOME, gone at exit; a note
//     says so and how to install the package instead. The operator's own
//     package cache is not made writable: a server could plant code there
//     that the operator runs later.
//   - A server known to keep its state beside its code (state.go): a
//     file of its own through its environment, and that file's directory
//     read-write.
//   - no limits: a module's sandbox block gets the default limits but CPU
//     time, since the server lives as long as the host.

// machine is what the importer looks at on the machine toolhost runs on:
// its files, PATH, the user's home, and the config the blocks are for.
type machine struct {
	fsys   fs.FS          // the file system from "/" (a ReadLinkFS, to follow links)
	path   string         // PATH, where commands are found
	home   string         // the user's home directory, never made visible whole
	config *config.Config // the config file the blocks go in: its File, DataDir, PluginDir, Plugins
	exe    string         // the toolhost binary, which the trust check protects too
	// mkdir makes a directory a stateful server keeps its state in
	// (keepState); nil makes none.
	mkdir func(dir string) error
	// probe starts the config with the blocks and says what registered
	// (probeConfig); nil starts nothing, and no tool_prefix is written.
	probe func(ctx context.Context, blocks []byte) (*learned, error)
}

// localMachine is this machine, with the blocks going in configFile. An
// existing config that does not load is reported in warning, and its
// default paths are protected instead of its own. With probe, the
// machine's probe starts the blocks beside the config (beside nothing when
// it does not load).
func localMachine(configFile string, probe bool) (m *machine, warning string, err error) {
	file, err := filepath.Abs(configFile)
	if err != nil {
		return nil, "", err
	}
	var cfg *config.Config
	src, err := os.ReadFile(file)
	if err == nil {
		cfg, err = config.Parse(src, file, nil)
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			warning = fmt.Sprintf("%s does not load, so the sandboxes are checked against its default data_dir and plugin_dir: %v", configFile, err)
		}
		src = nil
		if cfg, err = config.Parse(nil, file, nil); err != nil {
			return nil, "", err
		}
	}
	home, _ := os.UserHomeDir()
	exe, _ := os.Executable()
	m = &machine{fsys: os.DirFS("/"), path: os.Getenv("PATH"), home: home, config: cfg, exe: exe,
		mkdir: func(dir string) error { return os.MkdirAll(dir, 0o700) }}
	if probe {
		m.probe = func(ctx context.Context, blocks []byte) (*learned, error) { return probeConfig(ctx, file, src, blocks) }
	}
	return m, warning, nil
}

// fsPath is the absolute path p as a path of m.fsys.
func fsPath(p string) string {
	if p = strings.TrimPrefix(path.Clean(p), "/"); p == "" {
		return "."
	}
	return p
}

// maxLinks is how many symbolic links realPath follows, as the kernel's
// limit for one path.
const maxLinks = 40

// realPath is the absolute path p with every symbolic link resolved, as
// filepath.EvalSymlinks gives, on m.fsys.
func (m *machine) realPath(p string) (string, error) {
	todo := strings.Split(path.Clean(p), "/")
	cur := "/"
	for links := 0; len(todo) > 0; {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		fi, err := fs.Lstat(m.fsys, fsPath(next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%s: too many symbolic links", p)
		}
		target, err := fs.ReadLink(m.fsys, fsPath(next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, nil
}

// stat describes the file at p, links followed.
func (m *machine) stat(p string) (fs.FileInfo, error) {
	real, err := m.realPath(p)
	if err != nil {
		return nil, err
	}
	return fs.Stat(m.fsys, fsPath(real))
}

// lookPath finds a command as the host will: a name in PATH, a path
// against the config file's directory. It returns the path found, links
// not resolved.
func (m *machine) lookPath(command string) (string, bool) {
	var candidates []string
	if strings.Contains(command, "/") {
		candidates = []string{m.abs(command)}
	} else {
		for _, dir := range filepath.SplitList(m.path) {
			if path.IsAbs(dir) {
				candidates = append(candidates, path.Join(dir, command))
			}
		}
	}
	for _, c := range candidates {
		if fi, err := m.stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return c, true
		}
	}
	return "", false
}

// abs resolves p against the config file's directory, as the config does.
func (m *machine) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(filepath.Dir(m.config.File), p)
}

// packageRoot is the directory holding the packages a script at real (no
// links left) loads: the outermost node_modules it lies in, since node
// looks for a package in every node_modules above the script; else the
// nearest directory above it with a package.json or pyvenv.cfg (a
// virtualenv); "" when there is none short of / or the home directory.
func (m *machine) packageRoot(real string) string {
	if i := strings.Index(real, "/node_modules/"); i >= 0 {
		return real[:i+len("/node_modules")]
	}
	for dir := path.Dir(real); dir != "/" && dir != m.home; dir = path.Dir(dir) {
		for _, marker := range []string{"package.json", "pyvenv.cfg"} {
			if _, err := fs.Stat(m.fsys, fsPath(path.Join(dir, marker))); err == nil {
				return dir
			}
		}
	}
	return ""
}

// interpreter is the program a script's #! line names ("/usr/bin/env
// node" names node, found in PATH), or "" for none.
func (m *machine) interpreter(real string) string {
	f, err := m.fsys.Open(fsPath(real))
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, ok := strings.CutPrefix(string(head[:n]), "#!")
	if !ok {
		return ""
	}
	line, _, _ = strings.Cut(line, "\n")
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return ""
	}
	if path.Base(fields[0]) != "env" {
		return fields[0]
	}
	for _, f := range fields[1:] { // env -S node --flags, env VAR=x node
		if !strings.HasPrefix(f, "-") && !strings.Contains(f, "=") {
			found, _ := m.lookPath(f)
			return found
		}
	}
	return ""
}

// interpreterRE matches the commands that run a script named by their
// first argument that is not a flag.
var interpreterRE = regexp.MustCompile(`^(node|nodejs|python[0-9.]*)$`)

// A runner is a command that fetches a server's code each time it starts
// it.
type runner struct {
	command string   // the command's base name
	sub     []string // the first arguments that make it fetch; none: any
	install string   // how to install the package instead
}

// How to install a fetched package instead, by ecosystem.
const (
	npmInstall = `npm install --prefix DIR PACKAGE, then command = "DIR/node_modules/.bin/NAME"`
	pyInstall  = "uv tool install PACKAGE (or pipx install PACKAGE), then command = the script it installs"
)

// runners are the commands known to fetch a server's code as they start it.
var runners = []runner{
	{"npx", nil, npmInstall}, {"npm", []string{"exec"}, npmInstall}, {"npm", []string{"x"}, npmInstall},
	{"pnpx", nil, npmInstall}, {"pnpm", []string{"dlx"}, npmInstall}, {"yarn", []string{"dlx"}, npmInstall},
	{"bunx", nil, npmInstall}, {"bun", []string{"x"}, npmInstall},
	{"uvx", nil, pyInstall}, {"uv", []string{"tool", "run"}, pyInstall}, {"pipx", []string{"run"}, pyInstall},
}

// fetcher is the runner that command and args make, if any.
func fetcher(command string, args []string) (runner, bool) {
	for _, r := range runners {
		if path.Base(command) == r.command && len(args) >= len(r.sub) && slices.Equal(args[:len(r.sub)], r.sub) {
			return r, true
		}
	}
	return runner{}, false
}

// box is the sandbox block written for a stdio server.
type box struct {
	notes     []string // comment lines at the top of the block
	readWrite []string
	refused   []refusal // read_write paths written commented out
	readOnly  []string
	network   bool // network = "allowed"
}

// refusal is a path that the host would refuse as writable, and why.
type refusal struct {
	path, why string
}

// system is an empty sandbox policy: what it makes visible is the system.
var system = &sandbox.Policy{}

// addReadOnly adds p unless every sandbox sees it already, or it holds the
// home directory, where the user's secrets are.
func (b *box) addReadOnly(m *machine, p string) {
	if !m.holdsHome(p) && !system.Visible(p) && !slices.Contains(b.readOnly, p) {
		b.readOnly = append(b.readOnly, p)
	}
}

// holdsHome reports whether p is the home directory or above it.
func (m *machine) holdsHome(p string) bool {
	return m.home != "" && (&sandbox.Policy{ReadOnly: []string{p}}).Visible(m.home)
}

// program adds what the program at p needs to read: its packages, and its
// interpreter's installation.
func (b *box) program(m *machine, p string) {
	real, err := m.realPath(p)
	if err != nil {
		return
	}
	if root := m.packageRoot(real); root != "" {
		b.addReadOnly(m, root)
	}
	if interp := m.interpreter(real); interp != "" {
		b.installation(m, interp)
	}
}

// installation adds an interpreter's installation: the directory above its
// bin (node's or Python's prefix, with their libraries), else the file.
func (b *box) installation(m *machine, interp string) {
	real, err := m.realPath(interp)
	if err != nil {
		return
	}
	if dir := path.Dir(real); path.Base(dir) == "bin" && !m.holdsHome(path.Dir(dir)) {
		real = path.Dir(dir)
	}
	b.addReadOnly(m, real)
}

// tidy drops a read-only path inside another.
func (b *box) tidy() {
	var kept []string
	for i, p := range b.readOnly {
		if others := (&sandbox.Policy{ReadOnly: slices.Concat(b.readOnly[:i], b.readOnly[i+1:])}); !others.Visible(p) {
			kept = append(kept, p)
		}
	}
	b.readOnly = kept
}

// confine sets the sandbox block of each stdio server.
func (im *importer) confine(servers []*mcpServer) {
	trust := im.trustBase(servers)
	for _, s := range servers {
		if s.entry.URL == "" {
			s.sandbox = im.box(s, trust)
		}
	}
}

// box works out a stdio server's sandbox block.
func (im *importer) box(s *mcpServer, trust *trustCheck) *box {
	m, e := im.machine, s.entry
	b := &box{}
	script := -1 // the argument that is an interpreter's script
	pkg := ""    // the npm package the server's code is in
	if known(s.command, e.Command) {
		found, ok := m.lookPath(e.Command)
		switch {
		case !ok:
			where := "on this machine's PATH"
			if strings.Contains(e.Command, "/") {
				where = "on this machine"
			}
			b.notes = append(b.notes, fmt.Sprintf("%s is not %s: add what it needs to read_only (a script's node_modules or virtualenv)", strconv.Quote(e.Command), where))
		case interpreterRE.MatchString(path.Base(e.Command)):
			b.installation(m, found)
			i := slices.IndexFunc(e.Args, func(a string) bool { return !strings.HasPrefix(a, "-") })
			if i >= 0 && known(s.args[i], e.Args[i]) && path.IsAbs(e.Args[i]) {
				if fi, err := m.stat(e.Args[i]); err == nil && fi.Mode().IsRegular() {
					script = i
					b.addReadOnly(m, path.Clean(e.Args[i])) // unless its package holds it
					b.program(m, e.Args[i])
					pkg = m.npmPackage(e.Args[i])
				}
			}
		default:
			b.program(m, found)
			pkg = m.npmPackage(found)
		}
		if r, ok := fetcher(e.Command, e.Args); ok {
			pkg = fetched(r, e.Args)
			b.network = true
			b.notes = append(b.notes,
				path.Base(e.Command)+" fetches the server's code each time it starts it: so it may reach the network, through",
				"toolhost's filtering proxy, and what it downloads stays in the sandbox's own HOME, gone at exit.",
				"Better: "+r.install+",",
				"which starts without the network and runs the code you installed (import it again for its paths).")
		}
		if path.Base(e.Command) == "docker" && len(e.Args) > 0 && e.Args[0] == "run" {
			b.notes = append(b.notes,
				"docker needs its daemon's socket, which this sandbox leaves out: whoever may write to it is root",
				`on this machine. Add read_write = ["/var/run/docker.sock"] only if you accept that.`)
		}
	}
	if st, ok := statefulServers[pkg]; ok {
		im.keepState(s, b, st, trust)
	}
	for i, a := range e.Args {
		if i == script || !known(s.args[i], a) {
			continue
		}
		p := a
		if strings.HasPrefix(a, "-") {
			var ok bool
			if _, p, ok = strings.Cut(a, "="); !ok {
				continue
			}
		}
		where := fmt.Sprintf("args[%d] %s", i, strconv.Quote(a))
		switch {
		case p == "": // not a path
		case path.IsAbs(p):
			fi, err := m.stat(p)
			switch {
			case err != nil:
				b.notes = append(b.notes, where+" is not on this machine: once it is, "+addIt)
			case system.Visible(p):
			case !fi.IsDir():
				b.addReadOnly(m, path.Clean(p))
			case slices.Contains(b.readWrite, path.Clean(p)):
			default:
				if why := trust.refuses(s.label, path.Clean(p)); why != "" {
					b.refused = append(b.refused, refusal{path.Clean(p), why})
				} else {
					b.readWrite = append(b.readWrite, path.Clean(p))
				}
			}
		case p == "~" || strings.HasPrefix(p, "~/"):
			b.notes = append(b.notes, where+": the server's HOME is the sandbox's own, so write the absolute path, and "+addIt)
		case relativePathRE.MatchString(p) || exists(m, m.abs(p)):
			b.notes = append(b.notes, where+" is relative to a working directory the client chose: write the absolute path, and "+addIt)
		}
	}
	b.tidy()
	return b
}

// addIt ends a note on a path the importer could not add.
const addIt = "add it to read_write (a directory) or read_only (a file)"

// relativePathRE matches what can only be a relative path.
var relativePathRE = regexp.MustCompile(`^\.\.?(/|$)`)

// exists reports whether there is a file at p.
func exists(m *machine, p string) bool {
	_, err := m.stat(p)
	return err == nil
}

// known reports whether value v, from the client's s, is known at import
// time: text alone, with no placeholder the client would fill in.
func known(v value, s string) bool {
	return !slices.ContainsFunc(v, func(p part) bool { return p.env != "" }) && !hasPlaceholder(s)
}

// trustCheck asks config.Config.CheckTrust whether a server may write a
// path, in the config the blocks join.
type trustCheck struct {
	cfg      config.Config     // the config, with the imported servers' executables
	baseline map[string]bool   // the diagnostics it has without the path
	exe      string            // the toolhost binary
	memo     map[string]string // path → refusal, already asked
}

// trustBase is the trust check of the machine's config with the imported
// servers added: their executables are trusted as the host will trust them.
func (im *importer) trustBase(servers []*mcpServer) *trustCheck {
	m := im.machine
	t := &trustCheck{cfg: *m.config, baseline: map[string]bool{}, exe: m.exe, memo: map[string]string{}}
	t.cfg.Plugins = slices.Clone(m.config.Plugins)
	for _, s := range servers {
		if s.entry.URL == "" && known(s.command, s.entry.Command) && strings.Contains(s.entry.Command, "/") {
			t.cfg.Plugins = append(t.cfg.Plugins, config.Plugin{Kind: config.KindMCP, Name: s.label, Path: m.abs(s.entry.Command)})
		}
	}
	for _, d := range t.cfg.CheckTrust(t.exe) {
		t.baseline[d.Detail] = true
	}
	return t
}

// refuses says why the host would refuse a config in which server label
// may write dir, or "" when it would not.
func (t *trustCheck) refuses(label, dir string) string {
	if why, ok := t.memo[label+"\x00"+dir]; ok {
		return why
	}
	cfg := t.cfg
	cfg.Plugins = append(slices.Clip(t.cfg.Plugins), config.Plugin{Kind: config.KindMCP, Name: label,
		Sandbox: &sandbox.Policy{ReadWrite: []string{dir}}})
	why := ""
	for _, d := range cfg.CheckTrust(t.exe) {
		if !t.baseline[d.Detail] {
			// "… holds the config file …: an agent that writes there could …"
			why, _, _ = strings.Cut(d.Detail, ": an agent")
			break
		}
	}
	t.memo[label+"\x00"+dir] = why
	return why
}
