// Package sdktest runs a plugin's group the way the host does, for the
// module author's own tests: in-process over a real gRPC connection ([New]), or
// as a real subprocess through the plugin handshake ([Exec], after [Build]).
//
//	func TestAdd(t *testing.T) {
//		p := sdktest.New(t, group, nil)
//		out := sdktest.OK(t, p.Call("add", map[string]any{"a": 1, "b": 2}))
//		if out != "3" {
//			t.Fatalf("add = %q", out)
//		}
//	}
package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// Options tune how a plugin is run; nil means defaults.
type Options struct {
	// Config is passed to the group's Configure, encoded as JSON; nil means {}.
	Config any
	// HostPaths are passed to Configure as the paths the host keeps to itself
	// ([toolhost.ConfigureRequest.HostPaths]), as a host passes its data
	// directory.
	HostPaths []string
	// Sandbox is passed to Configure as the sandbox of the processes the
	// module starts ([toolhost.ConfigureRequest.Sandbox]), as a host passes
	// the command module's.
	Sandbox *sandbox.Policy
	// Env is added to a subprocess's environment ([Exec] only).
	Env map[string]string
	// Args are a subprocess's arguments ([Exec] only).
	Args []string
	// Timeout bounds each call made through [Plugin.Call]; default 30s.
	Timeout time.Duration
}

// Plugin is a configured, described group ready to be called.
type Plugin struct {
	t        testing.TB
	provider toolhost.Provider
	proc     *protocol.Process
	timeout  time.Duration
	// Spec is the group as the plugin described it in an empty context.
	Spec *toolhost.GroupSpec
}

// New serves g in-process over a gRPC connection in memory, configures and
// describes it, and fails the test if the group breaks the protocol's limits.
func New(t testing.TB, g *sdk.Group, opts *Options) *Plugin {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(protocol.MaxMessageBytes))
	protocol.Register(srv, g)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///sdktest",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(protocol.MaxMessageBytes)))
	if err != nil {
		t.Fatalf("sdktest: dial: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return setup(t, protocol.NewClient(conn), nil, opts)
}

// Exec starts the plugin executable at path as a subprocess, exactly as the
// host does (handshake, own process group, scrubbed environment), configures
// and describes it. The process is stopped when the test ends; its log lines
// go to the test log.
func Exec(t testing.TB, path string, opts *Options) *Plugin {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	proc, err := protocol.Launch(protocol.Options{
		Path: path, Args: opts.Args, Env: opts.Env,
		Logger: hclog.New(&hclog.LoggerOptions{Name: filepath.Base(path), Output: testWriter{t}, Level: hclog.Debug}),
	})
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	t.Cleanup(proc.Stop)
	return setup(t, proc.Provider, proc, opts)
}

// Build compiles the main package pkg (a path as `go build` takes it, such as
// "." or "./cmd/notes") into a temporary directory and returns the binary.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plugin")
	cmd := exec.Command("go", "build", "-o", out, pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sdktest: go build %s: %v\n%s", pkg, err, stderr.String())
	}
	return out
}

func setup(t testing.TB, p toolhost.Provider, proc *protocol.Process, opts *Options) *Plugin {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	cfg := []byte("{}")
	if opts.Config != nil {
		var err error
		if cfg, err = json.Marshal(opts.Config); err != nil {
			t.Fatalf("sdktest: encode config: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Configure(ctx, &toolhost.ConfigureRequest{Config: cfg, HostPaths: opts.HostPaths, Sandbox: opts.Sandbox}); err != nil {
		t.Fatalf("sdktest: configure: %v", err)
	}
	pl := &Plugin{t: t, provider: p, proc: proc, timeout: opts.Timeout}
	if pl.timeout <= 0 {
		pl.timeout = 30 * time.Second
	}
	pl.Spec = pl.Describe(toolhost.CallContext{})
	return pl
}

// Describe returns the group as seen from cc, and fails the test if the
// spec breaks the protocol's limits.
func (p *Plugin) Describe(cc toolhost.CallContext) *toolhost.GroupSpec {
	p.t.Helper()
	spec, err := p.provider.Describe(context.Background(), &toolhost.DescribeRequest{Context: cc})
	if err == nil {
		err = protocol.ValidateGroup(spec)
	}
	if err != nil {
		p.t.Fatalf("sdktest: describe: %v", err)
	}
	return spec
}

// Call calls a tool with args (anything that encodes to a JSON object) and
// returns its result; it fails the test if the call could not be carried out.
func (p *Plugin) Call(tool string, args any) *sdk.Result {
	p.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		p.t.Fatalf("sdktest: encode arguments: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	res, err := p.Do(ctx, &toolhost.CallRequest{Tool: tool, Arguments: raw, Context: toolhost.CallContext{CallID: "sdktest"}})
	if err != nil {
		p.t.Fatalf("sdktest: call %s: %v", tool, err)
	}
	return res
}

// Do makes a call as the host would, returning the transport error if any.
func (p *Plugin) Do(ctx context.Context, req *toolhost.CallRequest) (*sdk.Result, error) {
	return p.provider.Call(ctx, req)
}

// Pid returns the subprocess's pid, or 0 for an in-process plugin.
func (p *Plugin) Pid() int {
	if p.proc == nil {
		return 0
	}
	return p.proc.Pid
}

// OK fails the test unless res succeeded, and returns its stdout.
func OK(t testing.TB, res *sdk.Result) string {
	t.Helper()
	if !res.OK {
		t.Fatalf("result not ok: %s", describe(res))
	}
	return res.Stdout
}

// Fails fails the test unless res failed with the code, and returns the
// error message.
func Fails(t testing.TB, res *sdk.Result, code sdk.Code) string {
	t.Helper()
	if res.OK || res.Error == nil || res.Error.Code != code {
		t.Fatalf("want a result failing with %s, got %s", code, describe(res))
	}
	return res.Error.Message
}

func describe(res *sdk.Result) string {
	b, _ := json.Marshal(res)
	return string(b)
}

// testWriter sends a subprocess's log lines to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
