package host

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/toolhost/toolhost/sandbox"
)

// selfConfined names the builtin modules that confine the processes they
// start themselves: their block's sandbox is sent to them
// (ConfigureRequest.Sandbox) rather than applied to their own process,
// which must stay free to make sandboxes.
var selfConfined = map[string]bool{"command": true}

// confinesOwn reports whether the block's module applies its sandbox itself.
func confinesOwn(p *config.Plugin) bool {
	return p.Kind == config.KindBuiltin && selfConfined[p.Name]
}

// sandboxOf is the sandbox the block's process runs in: its confinement
// (config.Config.Confinement: the block's sandbox, else a default that
// confines it) with the host's paths hidden; nil with sandbox = "off", for
// an HTTP mcp_server, and for a module that confines what it starts itself.
func (h *Host) sandboxOf(p *config.Plugin) *sandbox.Policy {
	conf := h.cfg.Confinement(p)
	if conf == nil || conf.Off || confinesOwn(p) {
		return nil
	}
	pol := *conf
	pol.Hidden = append(slices.Clone(pol.Hidden), h.hostPaths()...)
	return &pol
}

// moduleSandbox is the sandbox sent to the block's module
// (ConfigureRequest.Sandbox): its block's, for a module that confines what
// it starts; nil for the others.
func moduleSandbox(p *config.Plugin) *sandbox.Policy {
	if confinesOwn(p) {
		return p.Sandbox
	}
	return nil
}

// logSandboxes says at start how a sandbox block is looser than the
// default, for each block that has one: a warning for what lets a module
// out of its confinement (the host's network; sandbox = "off" is said at
// each launch instead, see warnUnconfined), and at info level the limits
// it lifts, which the block chose on purpose (config.hcl lifts chrome's
// memory_mb). Once, at info level, it says what sandbox this machine gives
// when any module runs confined. Blocks without a sandbox block run in
// their default confinement, said nowhere.
func (h *Host) logSandboxes() {
	status := false
	for i := range h.cfg.Plugins {
		p := &h.cfg.Plugins[i]
		if p.Sandbox != nil && !p.Sandbox.Off {
			log := h.log.With("plugin", p.Name)
			for _, l := range p.Sandbox.Loosened() {
				log.Warn("sandbox: " + l)
			}
			for _, name := range p.Sandbox.Unlimited() {
				log.Info("sandbox: no " + name + " limit, as its block says")
			}
		}
		status = status || h.sandboxOf(p) != nil || confinesOwn(p)
	}
	if status {
		h.log.Info("sandbox", "status", sandbox.Status())
	}
}

// warnUnconfined says, at each launch of a module whose block says
// sandbox = "off", that it runs unconfined.
func (s *supervisor) warnUnconfined() {
	if s.h.cfg.Unconfined(&s.cfg) {
		s.h.log.With("plugin", s.cfg.Name).Warn(`sandbox: starts unconfined (sandbox = "off"): it can read and write whatever the host can`)
	}
}

// explainExit adds a hint to the error of a module that exited while
// starting in its sandbox (a [protocol.ExitedError]), when the paths its
// stderr names point at the sandbox (sandboxHint).
func (s *supervisor) explainExit(err error) {
	var exited *protocol.ExitedError
	pol := s.h.sandboxOf(&s.cfg)
	if pol == nil || !errors.As(err, &exited) {
		return
	}
	seen := *pol // as the module saw it: with its executable, which its start adds
	exe := s.cfg.Path
	if found, err := exec.LookPath(exe); err == nil {
		exe = found
	}
	seen.ReadOnly = append(slices.Clone(seen.ReadOnly), exe)
	exited.Hint = sandboxHint(&s.cfg, &seen, s.h.hintScope(&s.cfg, &seen), exited.Stderr)
}

// hintScope is where sandboxHint may point a block's sandbox. A module's
// stderr is its own to write, so a hint must never be a way to talk an
// operator into showing it what it should not see:
//   - roots: a hint names only a path under the host user's home, the
//     workspace, the config file's directory, /opt, /srv or the temporary
//     directories, where modules and their data live, or a node_modules
//     directory (read-only); never a system directory (/etc, /usr, /var,
//     /root…), which the sandbox shows read-only where a module needs it;
//   - secret: never a path that is, holds or lies in the host's data (the
//     data and artifact directories: the admin token, the database) or the
//     config file, nor one through a dot directory (~/.ssh, ~/.aws,
//     .env…; but for a node_modules directory, which npm caches keep in
//     ~/.cache) or with a name that says it holds a secret (secretNameRE);
//   - exes: never read_write for a directory that holds the module's
//     command or its interpreter, as written or resolved.
type hintScope struct {
	roots, secret, exes []string
}

// hintScope is the scope of the hints for block p, which ran in policy.
func (h *Host) hintScope(p *config.Plugin, policy *sandbox.Policy) hintScope {
	sc := hintScope{roots: []string{"/opt", "/srv", "/tmp", "/var/tmp", os.TempDir()}}
	if home, err := os.UserHomeDir(); err == nil {
		sc.roots = append(sc.roots, home)
	}
	if h.cfg.Workspace != "" {
		sc.roots = append(sc.roots, h.cfg.Workspace)
	}
	if h.cfg.File != "" {
		sc.roots = append(sc.roots, filepath.Dir(h.cfg.File))
		sc.secret = append(sc.secret, h.cfg.File)
	}
	sc.secret = append(sc.secret, policy.Hidden...) // the host's data (hostPaths)
	sc.exes = p.Executables()
	return sc
}

// secretNameRE matches a file or directory name that says it holds a
// secret: keys, tokens, passwords, credentials.
var secretNameRE = regexp.MustCompile(`(?i)secret|token|passw|credential|private|shadow|\.pem$|\.key$|^id_(rsa|dsa|ecdsa|ed25519)`)

// allows reports whether a hint may name path: read-only, or read-write
// when write is set.
func (sc hintScope) allows(path string, write bool) bool {
	forms := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		forms = append(forms, real)
	}
	for _, f := range forms {
		for _, s := range sc.secret {
			if s = filepath.Clean(s); sandbox.Within(s, f) || sandbox.Within(f, s) || sandbox.Within(realOr(s), f) || sandbox.Within(f, realOr(s)) {
				return false
			}
		}
		pkg := !write && nodeModules(f) == f // code: an npm cache such as ~/.cache/… may hold it
		for _, c := range strings.Split(f, "/") {
			if strings.HasPrefix(c, ".") && !pkg || secretNameRE.MatchString(c) {
				return false
			}
		}
		if write {
			for _, e := range sc.exes {
				if sandbox.Within(f, e) || sandbox.Within(f, realOr(e)) {
					return false
				}
			}
		}
		inRoot := slices.ContainsFunc(sc.roots, func(r string) bool { return sandbox.Within(filepath.Clean(r), f) || sandbox.Within(realOr(r), f) })
		if !inRoot && !pkg {
			return false
		}
	}
	return true
}

// realOr is path with its symbolic links resolved, or path when it does
// not resolve.
func realOr(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return filepath.Clean(path)
}

// maxHintPaths bounds the paths of a module's stderr that sandboxHint looks
// at: the stderr is bounded already, this bounds the file system lookups.
const maxHintPaths = 32

// stderrPathRE matches an absolute path in a line of a module's stderr, or
// a file: URL's: after the start of the line, a space, a quote, a bracket
// or an equals sign; up to a space, a quote, a colon (a line number), a
// bracket or a comma.
var stderrPathRE = regexp.MustCompile(`(?:^|[\s'"` + "`" + `(\[<=])(?:file://)?(/[^\s'"` + "`" + `:;,()<>\[\]|]*)`)

// writeRefusedRE matches the errors of a write the sandbox refused.
var writeRefusedRE = regexp.MustCompile(`\b(EROFS|EACCES|EPERM)\b|(?i)read-only file system|permission denied`)

// sandboxHint says how the sandbox of the block likely made its module
// exit while starting, from the paths its stderr lines name, and the
// sandbox block that fixes it; "" when nothing points at the sandbox.
// policy is the sandbox the module ran in. A path points at it when:
//   - it lies in a node_modules directory the sandbox does not show whole
//     (a package loaded from there fails): that node_modules, read-only;
//   - the sandbox does not show it, and the host has it: it, read-only;
//   - a write there was refused and the sandbox shows it read-only: its
//     directory, read-write, but for a package's own directory, which
//     stays read-only (a module that could rewrite its code would run
//     what an agent made it write): a note says to give its data a
//     directory elsewhere.
//
// A path the sandbox hides on purpose (the host's data), the kernel's
// (/proc, /dev, /sys) and whatever scope does not allow are left alone.
func sandboxHint(p *config.Plugin, policy *sandbox.Policy, scope hintScope, lines []string) string {
	var readOnly, readWrite, inPackage []string
	add := func(list *[]string, path string) {
		if !slices.Contains(*list, path) {
			*list = append(*list, path)
		}
	}
	looked := 0
	for _, line := range lines {
		refused := writeRefusedRE.MatchString(line)
		for _, m := range stderrPathRE.FindAllStringSubmatch(line, -1) {
			if looked++; looked > maxHintPaths {
				break
			}
			path := filepath.Clean(strings.TrimRight(m[1], "."))
			if path == "/" || kernelPath(path) {
				continue
			}
			access := policy.AccessTo(path)
			pkg := nodeModules(path)
			switch {
			case access == sandbox.AccessHidden:
			case pkg != "" && policy.AccessTo(pkg) == sandbox.AccessNone && exists(pkg):
				if scope.allows(pkg, false) {
					add(&readOnly, pkg)
				}
			case access == sandbox.AccessNone && exists(path):
				if scope.allows(path, false) {
					add(&readOnly, path)
				}
			case refused && access == sandbox.AccessReadOnly && pkg != "":
				add(&inPackage, path)
			case refused && access == sandbox.AccessReadOnly:
				if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
					path = filepath.Dir(path) // the directory of the file it writes
				}
				if exists(path) && !systemPath(path) && scope.allows(path, true) {
					add(&readWrite, path)
				}
			}
		}
	}
	if len(readOnly)+len(readWrite)+len(inPackage) == 0 {
		return ""
	}
	var b strings.Builder
	block := fmt.Sprintf("%s %s", p.Kind, config.Quote(p.Name))
	b.WriteString("the sandbox is the likely cause:")
	if len(readOnly) > 0 {
		fmt.Fprintf(&b, " it does not show %s, which the module's stderr names;", strings.Join(readOnly, ", "))
	}
	if len(readWrite) > 0 {
		fmt.Fprintf(&b, " it shows %s read-only, where the module writes;", strings.Join(readWrite, ", "))
	}
	if len(readOnly)+len(readWrite) > 0 {
		own := p.Sandbox // the lists the block has already
		if own == nil {
			own = &sandbox.Policy{}
		}
		fmt.Fprintf(&b, " in the block %s, say:\n  sandbox {", block)
		for _, l := range []struct {
			name      string
			has, more []string
		}{{"read_write", own.ReadWrite, readWrite}, {"read_only", own.ReadOnly, readOnly}} {
			if len(l.more) == 0 {
				continue
			}
			var quoted []string
			for _, path := range slices.Concat(l.has, l.more) {
				quoted = append(quoted, config.Quote(path))
			}
			fmt.Fprintf(&b, "\n    %s = [%s]", l.name, strings.Join(quoted, ", "))
		}
		b.WriteString("\n  }")
	}
	if len(inPackage) > 0 {
		if len(readOnly)+len(readWrite) > 0 {
			b.WriteString("\nand")
		}
		fmt.Fprintf(&b, " the module writes inside its own package (%s), which stays read-only: a module that could rewrite its code would run what an agent made it write."+
			" Point its data at a directory of its own (its env; npm's server-memory takes MEMORY_FILE_PATH) and give that directory in read_write (docs/mcp-import.md)",
			strings.Join(inPackage, ", "))
	}
	return b.String()
}

// nodeModules is the outermost node_modules directory path lies in, where
// node looks for the packages a script there loads; "" for none.
func nodeModules(path string) string {
	if i := strings.Index(path+"/", "/node_modules/"); i >= 0 {
		return path[:i+len("/node_modules")]
	}
	return ""
}

// kernelPath reports whether path is in /proc, /dev or /sys, which are the
// kernel's, not the host's files.
func kernelPath(path string) bool {
	return slices.ContainsFunc([]string{"/proc", "/dev", "/sys"}, func(dir string) bool {
		return path == dir || strings.HasPrefix(path, dir+"/")
	})
}

// systemPath reports whether path is in a system directory, which no
// module is given to write.
func systemPath(path string) bool {
	return (&sandbox.Policy{}).Visible(path)
}

// exists reports whether the host has a file at path.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
