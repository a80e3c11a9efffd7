package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/toolhost/toolhost/netpolicy"
	"github.com/toolhost/toolhost/sandbox/internal/stage"
)

// Paths inside every sandbox.
const (
	// homeDir is HOME inside: a fresh tmpfs, as is /tmp.
	homeDir = "/home/sandbox"
	// defaultPath is PATH inside when the command's environment has none.
	defaultPath = "/usr/local/bin:/usr/bin:/bin"
)

// systemDirs are bound read-only when the host has them (a symlink, as
// /bin is on a merged-/usr system, is recreated as one).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// Cmd is a command that runs confined by a [Policy]. Set Dir, Env, Stdin,
// Stdout and Stderr of the embedded [exec.Cmd] as usual, then [Cmd.Start] and [Cmd.Wait]
// (or [Cmd.Run]). Dir must be inside the policy's paths; "" means HOME inside.
// Env is the command's whole environment (nil: empty), but for HOME and
// TMPDIR (and the proxy variables with [NetworkAllowed]), which the sandbox
// sets, and PATH, which it sets when Env has none.
//
// A caller that hands the exec.Cmd to code that starts it (go-plugin) calls
// [Cmd.Prepare] first and [Cmd.Close] after the process has exited.
type Cmd struct {
	*exec.Cmd

	policy   Policy
	argv     []string
	prepared bool
	prepErr  error  // Prepare's outcome
	tmp      string // the host-side directory of the proxy's socket
	proxy    *netpolicy.Proxy
	cgroup   *cgroup
	hostEnd  *os.File // the write end of the host's pipe (see lifeline.go)
	status   *os.File // a read end of bubblewrap's --json-status-fd
	// inherited are this process's copies of what only bubblewrap and the
	// stage hold once bubblewrap started.
	inherited []*os.File
	closed    sync.Once
}

// Command returns a [Cmd] that runs argv confined by p. It fails, naming what
// to install or enable, when bubblewrap cannot run here, and for a [Policy]
// that is Off or invalid. When the context is done, the sandbox ends: every
// process in it is killed.
func Command(ctx context.Context, p *Policy, argv []string) (*Cmd, error) {
	if p == nil {
		p = &Policy{}
	}
	if p.Off {
		return nil, errors.New("sandbox: the policy is off; run the command without the sandbox")
	}
	if len(argv) == 0 {
		return nil, errors.New("sandbox: no command")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	bwrap, err := bwrapPath()
	if err != nil {
		return nil, err
	}
	c := &Cmd{Cmd: exec.CommandContext(ctx, bwrap), policy: *p, argv: argv}
	c.policy.Limits = p.Limits.withDefaults()
	// bwrap in a process group of its own, and without a parent-death
	// signal: the sandbox ends with this process, or when Cancel or Close
	// closes the host's pipe, through the stage (see lifeline.go).
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return c.hostEnd.Close() }
	return c, nil
}

// Start prepares the sandbox and starts the command; [Cmd.Wait] releases what
// Start made.
func (c *Cmd) Start() error {
	if err := c.Prepare(); err != nil {
		return err
	}
	if err := c.Cmd.Start(); err != nil {
		c.Close()
		return err
	}
	c.closeInherited()
	if c.cgroup != nil {
		c.cgroup.adopt()
	}
	return nil
}

// Wait waits for the command to exit, then releases the sandbox's proxy
// and cgroup.
func (c *Cmd) Wait() error {
	defer c.Close()
	return c.Cmd.Wait()
}

// Run starts the command and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Refusals are the connections the sandbox's proxy refused so far (with
// [NetworkAllowed]), for a message that says why a download failed.
func (c *Cmd) Refusals() []netpolicy.Refusal {
	if c.proxy == nil {
		return nil
	}
	return c.proxy.Since(0)
}

// Prepare makes the sandbox's proxy and cgroup and writes bwrap's arguments
// and environment from the Cmd's Dir and Env. [Cmd.Start] calls it; call it
// yourself only to start the [exec.Cmd] some other way, and [Cmd.Close] after.
func (c *Cmd) Prepare() error {
	if !c.prepared {
		c.prepared = true
		if c.prepErr = c.prepare(); c.prepErr != nil {
			c.Close()
		}
	}
	return c.prepErr
}

func (c *Cmd) prepare() error {
	exe, err := executable()
	if err != nil {
		return err
	}
	st := stage.Spec{Rlimits: c.policy.Limits.rlimits(), Argv: c.argv}
	b := &args{}
	b.add("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--disable-userns",
		"--as-pid-1", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox")
	if c.policy.network() != NetworkHost {
		b.add("--unshare-net")
	}
	for _, d := range systemDirs {
		b.mirror(d)
	}
	etc, err := etcDir()
	if err != nil {
		return err
	}
	b.add("--ro-bind", etc, "/etc")
	size := strconv.Itoa(max(c.policy.Limits.FileSizeMB, 0) << 20)
	b.add("--dev", "/dev", "--proc", "/proc")
	for _, d := range []string{"/tmp", homeDir} {
		if size != "0" {
			b.add("--size", size)
		}
		b.add("--tmpfs", d)
	}
	b.add("--ro-bind", exe, stage.InitPath)
	b.bindPaths(c.policy.ReadWrite, c.policy.ReadOnly)
	for _, p := range c.policy.Hidden {
		if c.policy.Visible(p) { // elsewhere it is not there to hide
			b.hide(p)
		}
	}
	st.ReadOnly = slices.Concat(b.system, []string{"/etc", "/dev", "/proc", stage.RunDir}, c.policy.ReadOnly)
	st.ReadWrite = append([]string{"/tmp", homeDir, "/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts", "/dev/shm"}, c.policy.ReadWrite...)

	dir := c.Dir
	if dir == "" {
		dir = homeDir
	} else if !c.policy.Visible(dir) {
		return fmt.Errorf("sandbox: the working directory %s is not inside the sandbox's read_write or read_only paths", dir)
	}
	b.add("--chdir", dir)
	c.Dir = ""

	env := make([]string, 0, len(c.Env)+8)
	for _, kv := range c.Env {
		switch k, _, _ := strings.Cut(kv, "="); strings.ToUpper(k) {
		case "HOME", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY":
		default:
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+homeDir, "TMPDIR=/tmp")
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		env = append(env, "PATH="+defaultPath)
	}
	if c.policy.network() == NetworkAllowed {
		if err := c.startProxy(); err != nil {
			return err
		}
		b.add("--ro-bind", filepath.Join(c.tmp, "proxy.sock"), stage.ProxyPath)
		st.Bridge = true
		url := "http://127.0.0.1:" + strconv.Itoa(stage.BridgePort)
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
			env = append(env, k+"="+url)
		}
	}
	c.Env = env
	if err := c.tieLife(b, &st); err != nil {
		return err
	}

	if c.policy.Limits.Processes > 0 && os.Geteuid() == 0 {
		// The kernel exempts root from RLIMIT_NPROC: a pids cgroup holds
		// the limit. Start moves bubblewrap's child into it while the
		// sandbox is set up (bwrap reports the child's pid on --info-fd);
		// the stage checks, and joins itself through the inherited
		// cgroup.procs when it is not in yet.
		cg, err := newCgroup(c.policy.Limits.Processes)
		if err != nil {
			return err
		}
		c.cgroup = cg
		st.CgroupFD, st.Cgroup = c.pass(cg.procs), filepath.Base(cg.dir)
		b.add("--info-fd", strconv.Itoa(c.pass(cg.infoW)))
		st.Close = append(st.Close, c.pass(cg.info)) // bwrap's, against SIGPIPE (see lifeline.go)
	}
	spec, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	b.add("--", stage.InitPath, string(spec))
	c.Args = append([]string{c.Path}, b.list...)
	return nil
}

// Visible reports whether the host path is inside a path bound into the
// sandbox, at the same path: ReadWrite, ReadOnly or a system directory.
func (p *Policy) Visible(path string) bool {
	for _, list := range [][]string{p.ReadWrite, p.ReadOnly, systemDirs} {
		for _, p := range list {
			if Within(p, path) {
				return true
			}
		}
	}
	return false
}

// Access is what a sandboxed process can do at a host path.
type Access int

// The accesses, from none to all.
const (
	// AccessNone: the sandbox does not show the host's file there (the
	// process sees nothing, or the sandbox's own /tmp, HOME or /etc).
	AccessNone Access = iota
	// AccessHidden: a [Policy.Hidden] path covers it.
	AccessHidden
	// AccessReadOnly: a read-only path or a system directory shows it.
	AccessReadOnly
	// AccessReadWrite: a read-write path shows it.
	AccessReadWrite
)

// AccessTo says what a process in a sandbox of p can do at the host path,
// from the mounts the sandbox makes: as bindPaths binds them, the most
// specific of ReadWrite, ReadOnly and the system directories decides (a
// path in both lists is read-only), and a Hidden path covers what it holds.
func (p *Policy) AccessTo(path string) Access {
	path = filepath.Clean(path)
	for _, h := range p.Hidden {
		if Within(h, path) && p.Visible(h) {
			return AccessHidden
		}
	}
	best, access := -1, AccessNone
	for _, l := range []struct {
		paths  []string
		access Access
	}{{p.ReadWrite, AccessReadWrite}, {p.ReadOnly, AccessReadOnly}, {systemDirs, AccessReadOnly}} {
		for _, m := range l.paths {
			if d := strings.Count(filepath.Clean(m), "/"); Within(m, path) && d >= best {
				best, access = d, l.access
			}
		}
	}
	return access
}

// Within reports whether path is dir or lies under it (both absolute).
func Within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// startProxy starts the filtering proxy on a unix socket in a private
// directory of the host's.
func (c *Cmd) startProxy() error {
	pol, err := netpolicy.Compile(c.policy.Config)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if c.tmp, err = os.MkdirTemp("", "toolhost-sandbox-"); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	c.proxy, err = netpolicy.NewProxy(proxyDialer(pol), &netpolicy.ProxyOptions{Socket: filepath.Join(c.tmp, "proxy.sock")})
	if err != nil {
		return fmt.Errorf("sandbox: proxy: %w", err)
	}
	return nil
}

// proxyDialer is how a sandbox's proxy connects out; tests replace it with
// one that resolves and dials without leaving loopback.
var proxyDialer = func(p *netpolicy.Policy) *netpolicy.Dialer { return &netpolicy.Dialer{Policy: p} }

// Close ends the sandbox if it still runs, and releases its proxy, its
// socket directory and its cgroup. [Cmd.Wait] calls it; it is safe to call more
// than once.
func (c *Cmd) Close() {
	c.closed.Do(func() {
		for _, f := range []*os.File{c.hostEnd, c.status} {
			if f != nil {
				_ = f.Close()
			}
		}
		c.closeInherited()
		if c.proxy != nil {
			_ = c.proxy.Close()
		}
		if c.tmp != "" {
			_ = os.RemoveAll(c.tmp)
		}
		if c.cgroup != nil {
			c.cgroup.release()
		}
	})
}

// args builds bwrap's command line.
type args struct {
	list   []string
	system []string // the system directories there, bound or recreated as symlinks
}

func (b *args) add(a ...string) { b.list = append(b.list, a...) }

// bindPaths binds each path at its own path, read-write or read-only,
// parents before what they hold, so that the most specific path decides (a
// read-only directory inside a read-write one stays read-only, and the
// other way round); a path in both lists is read-only.
func (b *args) bindPaths(rw, ro []string) {
	type bind struct {
		path string
		op   string
	}
	var all []bind
	for _, p := range rw {
		all = append(all, bind{filepath.Clean(p), "--bind"})
	}
	for _, p := range ro {
		all = append(all, bind{filepath.Clean(p), "--ro-bind"})
	}
	slices.SortStableFunc(all, func(x, y bind) int {
		return cmp.Compare(strings.Count(x.path, "/"), strings.Count(y.path, "/"))
	})
	for _, m := range all {
		b.add(m.op, m.path, m.path)
	}
}

// mirror binds the host's system directory p read-only at the same path,
// recreating a symlink as a symlink; a path the host lacks is skipped.
func (b *args) mirror(p string) {
	fi, err := os.Lstat(p)
	if err != nil {
		return
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return
		}
		b.add("--symlink", target, p)
	} else {
		b.add("--ro-bind", p, p)
	}
	b.system = append(b.system, p)
}

// hide covers p, when it exists, with an empty read-only directory or file.
func (b *args) hide(p string) {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
	case fi.IsDir():
		b.add("--perms", "0000", "--tmpfs", p, "--remount-ro", p)
	default:
		b.add("--ro-bind", "/dev/null", p)
	}
}

// executable is this binary, bound into every sandbox as its stage.
var executable = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fmt.Errorf("sandbox: cannot find this program's executable: %w", err)
	}
	return exe, nil
})
