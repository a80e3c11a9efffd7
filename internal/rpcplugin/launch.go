package rpcplugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/proto"
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
}

// Process is a running plugin.
type Process struct {
	// Provider calls the plugin's ToolGroup service.
	Provider *proto.Client
	// Pid is the plugin's process id, also its process group id.
	Pid int

	client *plugin.Client
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	done   context.Context
	socket string // the plugin's unix socket, which a killed plugin leaves behind
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
	cmd := exec.Command(opts.Path, opts.Args...)
	cmd.Dir = opts.Dir
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range opts.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, HostPidEnv+"="+strconv.Itoa(os.Getpid()))
	// Its own process group, so stopping it reaches its children too; and
	// SIGKILL when the host dies, so nothing is orphaned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	cfg := &plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: versionedPlugins(nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     opts.StartTimeout,
		Logger:           opts.Logger,
		SkipHostEnv:      true,
		GRPCDialOptions:  []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))},
	}
	if opts.SHA256 != "" {
		sum, err := hex.DecodeString(opts.SHA256)
		if err != nil {
			return nil, toolhost.Errorf(toolhost.CodePolicy, "plugin %s: sha256 %q is not hex", opts.Path, opts.SHA256)
		}
		cfg.SecureConfig = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	client := plugin.NewClient(cfg)
	p := &Process{client: client, cmd: cmd}
	rpc, err := client.Client()
	if err == nil {
		var raw any
		if raw, err = rpc.Dispense(pluginName); err == nil {
			d := raw.(*dispensed)
			p.Provider, p.conn, p.done = d.client, d.conn, d.done
			p.Pid = cmd.Process.Pid
			if rc := client.ReattachConfig(); rc != nil && rc.Addr != nil && rc.Addr.Network() == "unix" {
				p.socket = rc.Addr.String()
			}
			return p, nil
		}
	}
	p.Stop()
	return nil, p.startError(err, opts)
}

// startError explains why a plugin did not start, in place of go-plugin's
// generic notes, with a code: policy for a checksum mismatch, plugin_exited
// when it died first, timeout when it never answered, invalid_group_def when
// it answered with something other than the handshake.
func (p *Process) startError(err error, opts Options) error {
	msg := err.Error()
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return toolhost.Errorf(toolhost.CodePolicy, "plugin %s: the executable does not match its pinned sha256", opts.Path)
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return toolhost.Errorf(toolhost.CodeTimeout, "plugin %s: no handshake within the start timeout of %s", opts.Path, opts.StartTimeout)
	case strings.Contains(msg, "exited before we could connect"), strings.Contains(msg, "Failed to read any lines"):
		return toolhost.Errorf(toolhost.CodePluginExited, "plugin %s: exited before the handshake (%s)", opts.Path, p.exitStatus())
	case strings.HasPrefix(msg, unrecognized):
		line, _, _ := strings.Cut(strings.TrimPrefix(msg, unrecognized), "\n")
		return toolhost.Errorf(toolhost.CodeInvalidGroupDef,
			"plugin %s: did not complete the handshake: it wrote %q to stdout (a plugin serves with sdk.Serve and never writes to stdout)", opts.Path, line)
	case strings.Contains(msg, "Incompatible API version"):
		return toolhost.Errorf(toolhost.CodeInvalidGroupDef, "plugin %s: %v", opts.Path, err)
	}
	return toolhost.Errorf(toolhost.CodeInternal, "plugin %s: start: %w", opts.Path, err)
}

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
// only after Exited is done.
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
	p.KillGroup()
	if p.socket != "" {
		_ = os.Remove(p.socket)
	}
}

// KillGroup sends SIGKILL to the plugin's process group, reaching children
// the plugin started.
func (p *Process) KillGroup() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}
