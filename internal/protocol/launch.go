package protocol

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/sandbox"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Options say how to start a plugin process.
type Options struct {
	Path         string            // the executable
	Args         []string          // its arguments
	Dir          string            // its working directory; empty means the host's
	Env          map[string]string // added to the inherited allowlist (see inheritedEnv)
	SHA256       string            // when set, the executable's checksum must match (hex)
	StartTimeout time.Duration     // for the handshake; 0 means 10s
	Logger       hclog.Logger      // receives the plugin's log lines at their levels
	// Sandbox, when set, confines the plugin through [sandbox.Command]: a copy
	// of the policy with the executable added read-only and a private socket
	// directory read-write, and Dir only when the policy makes it visible
	// (else the sandbox's HOME). Nil runs the plugin unconfined; Off is refused.
	Sandbox *sandbox.Policy
}

// Process is a running plugin.
type Process struct {
	// Provider calls the plugin's ToolGroup service.
	Provider *Client
	// Pid is the plugin's process id, also its process group id; for a
	// sandboxed plugin, bubblewrap's, whose death ends the sandbox.
	Pid int

	client    *plugin.Client
	cmd       *exec.Cmd
	conn      *grpc.ClientConn
	done      context.Context
	socket    string        // the plugin's unix socket, which a killed plugin leaves behind
	box       *sandbox.Cmd  // the sandbox, when confined
	socketDir string        // the sandboxed plugin's private socket directory
	stderr    output.Stderr // the end of its stderr, for startError
}

// HostPidEnv passes the host's pid to a plugin, which exits when its parent
// is no longer that process.
const HostPidEnv = "TOOLHOST_HOST_PID"

// inheritedEnv names the host variables a plugin inherits; everything else,
// secrets included, stays in the host.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "TOOLHOST_LOG_LEVEL"}

// Launch starts the plugin, completes the handshake and returns it. On error
// no process is left behind.
func Launch(opts Options) (*Process, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if fi, err := os.Stat(opts.Path); err != nil || fi.IsDir() {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "plugin executable %s not found (build it with scripts/build, or fix the block's path)", opts.Path)
	}
	var secure *plugin.SecureConfig
	if opts.SHA256 != "" {
		sum, err := hex.DecodeString(opts.SHA256)
		if err != nil {
			return nil, toolhost.Errorf(toolhost.CodePolicy, "plugin %s: sha256 %q is not hex", opts.Path, opts.SHA256)
		}
		secure = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	env := Environ(opts.Env)
	p := &Process{}
	if opts.Sandbox == nil {
		p.cmd = exec.Command(opts.Path, opts.Args...)
		p.cmd.Dir = opts.Dir
		p.cmd.Env = append(env, HostPidEnv+"="+strconv.Itoa(os.Getpid()))
		// Its own process group, so stopping it reaches its children too; and
		// SIGKILL when the host dies, so nothing is orphaned.
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	} else {
		// go-plugin would check the checksum of its command, bubblewrap:
		// the plugin's own executable is checked here instead.
		if secure != nil {
			switch ok, err := secure.Check(opts.Path); {
			case err != nil:
				return nil, toolhost.Errorf(toolhost.CodeInternal, "plugin %s: checking its sha256: %w", opts.Path, err)
			case !ok:
				return nil, checksumError(opts.Path)
			}
			secure = nil
		}
		if err := p.confine(opts, env); err != nil {
			return nil, err
		}
	}

	cfg := &plugin.ClientConfig{
		HandshakeConfig:  handshake,
		VersionedPlugins: versionedPlugins(nil),
		Cmd:              p.cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     opts.StartTimeout,
		Logger:           escapingLogger{opts.Logger}, // the plugin's text, escaped
		Stderr:           &p.stderr,                   // besides the log: its end, for startError
		SkipHostEnv:      true,
		SecureConfig:     secure,
		GRPCDialOptions:  []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))},
	}
	p.client = plugin.NewClient(cfg)
	rpc, err := p.client.Client()
	if err == nil {
		var raw any
		if raw, err = rpc.Dispense(pluginName); err == nil {
			d := raw.(*dispensed)
			p.Provider, p.conn, p.done = d.client, d.conn, d.done
			p.Pid = p.cmd.Process.Pid
			if rc := p.client.ReattachConfig(); rc != nil && rc.Addr != nil && rc.Addr.Network() == "unix" {
				p.socket = rc.Addr.String()
			}
			return p, nil
		}
	}
	p.Stop()
	return nil, p.startError(err, opts)
}

// confine makes p's command run the plugin in a sandbox of opts.Sandbox
// plus the executable, read-only, and a private directory for the plugin's
// socket, read-write: the plugin finds it in PLUGIN_UNIX_SOCKET_DIR, and the
// host dials the socket at the same path. The plugin starts in opts.Dir when
// the policy makes it visible, else in the sandbox's HOME. It gets no
// HostPidEnv: in its PID namespace its parent is the sandbox's init, which
// os.Getppid keeps reporting until the sandbox dies with bubblewrap. When
// the sandbox cannot be made, the error has code policy and says why (what
// to install, or sandbox = "off"); the plugin never runs unconfined instead.
func (p *Process) confine(opts Options, env []string) error {
	dir, err := os.MkdirTemp("", "toolhost-plugin-")
	if err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "plugin %s: socket directory: %w", opts.Path, err)
	}
	p.socketDir = dir
	pol := *opts.Sandbox
	pol.ReadOnly = append(slices.Clone(pol.ReadOnly), opts.Path)
	pol.ReadWrite = append(slices.Clone(pol.ReadWrite), dir)
	p.box, err = sandbox.Command(context.Background(), &pol, append([]string{opts.Path}, opts.Args...))
	if err == nil {
		if opts.Dir != "" && opts.Sandbox.Visible(opts.Dir) {
			p.box.Dir = opts.Dir
		}
		p.box.Env = append(env, plugin.EnvUnixSocketDir+"="+dir)
		err = p.box.Prepare() // go-plugin starts the exec.Cmd itself
	}
	if err != nil {
		p.release()
		return toolhost.Errorf(toolhost.CodePolicy, "plugin %s: %v", opts.Path, err)
	}
	p.cmd = p.box.Cmd
	return nil
}

// Environ is the environment of a module's process: the host variables it
// inherits (see inheritedEnv) and extra, its block's env.
func Environ(extra map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// checksumError is the refusal of an executable that is not the pinned one.
func checksumError(path string) error {
	return toolhost.Errorf(toolhost.CodePolicy, "plugin %s: the executable does not match its pinned sha256", path)
}

// startError explains why a plugin did not start, in place of go-plugin's
// generic notes, with a code: policy for a checksum mismatch, plugin_exited
// when it died first, timeout when it never answered, invalid_group_def when
// it answered with something other than the handshake.
func (p *Process) startError(err error, opts Options) error {
	msg := err.Error()
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return checksumError(opts.Path)
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return toolhost.Errorf(toolhost.CodeTimeout, "plugin %s: no handshake within the start timeout of %s", opts.Path, opts.StartTimeout)
	case strings.Contains(msg, "exited before we could connect"), strings.Contains(msg, "Failed to read any lines"):
		return WithStderr(toolhost.Errorf(toolhost.CodePluginExited, "plugin %s: exited before the handshake (%s)", opts.Path, p.exitStatus()), &p.stderr)
	case strings.HasPrefix(msg, unrecognized):
		line, _, _ := strings.Cut(strings.TrimPrefix(msg, unrecognized), "\n")
		return toolhost.Errorf(toolhost.CodeInvalidGroupDef,
			"plugin %s: did not complete the handshake: it wrote %q to stdout (a plugin serves with sdk.Serve and never writes to stdout)", opts.Path, line)
	case strings.Contains(msg, "Incompatible API version"):
		return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "plugin %s: %v", opts.Path, err)
	}
	return toolhost.Errorf(toolhost.CodeInternal, "plugin %s: start: %w", opts.Path, err)
}

// ExitedError is the error of a module that exited while starting, with
// the last lines of its stderr and, when the host has found one, a hint at
// the cause. Its code is its Err's (plugin_exited).
type ExitedError struct {
	// Err is the error without them.
	Err error
	// Stderr are the last lines the module wrote to its stderr, bounded
	// and escaped ([output.Stderr.Lines]): its own text, untrusted.
	Stderr []string
	// Hint says what likely made it exit and how to fix it (a sandbox
	// that hides what it needs), or is empty.
	Hint string
}

// WithStderr is err with the last lines of the stderr the module wrote
// (stderr), or err itself when it wrote none.
func WithStderr(err error, stderr *output.Stderr) error {
	lines := stderr.Lines()
	if len(lines) == 0 {
		return err
	}
	return &ExitedError{Err: err, Stderr: lines}
}

// Error is Err's message, then the stderr lines, each on a line of its
// own, indented, then the hint.
func (e *ExitedError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	b.WriteString("\nthe last lines of its stderr:")
	for _, l := range e.Stderr {
		b.WriteString("\n  " + l)
	}
	if e.Hint != "" {
		b.WriteString("\n" + e.Hint)
	}
	return b.String()
}

// Unwrap returns Err.
func (e *ExitedError) Unwrap() error { return e.Err }

// unrecognized starts go-plugin's error for a first stdout line that is not
// the handshake.
const unrecognized = "Unrecognized remote plugin message: "

func (p *Process) exitStatus() string {
	if err := p.ExitError(); err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// Exited is cancelled once the plugin process has exited (go-plugin's done
// context): exit is observed, not polled.
func (p *Process) Exited() context.Context { return p.done }

// ExitError describes how the process ended: nil for exit status 0. Call it
// only after [Process.Exited] is done.
func (p *Process) ExitError() error {
	st := p.cmd.ProcessState
	if st == nil || st.Success() {
		return nil
	}
	return errors.New(st.String())
}

// Ping is a raw gRPC round trip to the plugin (go-plugin's health service),
// the baseline a tool call is measured against.
func (p *Process) Ping(ctx context.Context) error {
	_, err := healthpb.NewHealthClient(p.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "plugin"})
	return err
}

// Stop asks the plugin to exit, kills it after a grace period, and then kills
// whatever is left of its process group. It blocks until the process is gone,
// and releases the connection and its goroutines and the plugin's socket
// file. Call it also for a plugin that exited by itself (at once then).
func (p *Process) Stop() {
	p.client.Kill()
	p.killGroup()
	if p.socket != "" {
		_ = os.Remove(p.socket)
	}
	p.release()
}

// release frees what a sandboxed plugin holds besides its process: the
// sandbox's proxy and cgroup, and the socket directory.
func (p *Process) release() {
	if p.box != nil {
		p.box.Close()
	}
	if p.socketDir != "" {
		_ = os.RemoveAll(p.socketDir)
	}
}

// killGroup sends SIGKILL to the plugin's process group, reaching children
// the plugin started.
func (p *Process) killGroup() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}
