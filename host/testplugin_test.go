package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/sdk"
)

// The test binary re-executes itself as a plugin when testPluginEnv names
// one of the behaviours below; pidFileEnv, when set, receives its pid first.
const (
	testPluginEnv = "TOOLHOST_TEST_PLUGIN"
	groupIDEnv    = "TOOLHOST_TEST_GROUP"
	pidFileEnv    = "TOOLHOST_TEST_PIDFILE"
	startFileEnv  = "TOOLHOST_TEST_STARTFILE"   // the sleep tool writes here when it starts
	cancelFileEnv = "TOOLHOST_TEST_CANCELFILE"  // the sleep tool writes here when its ctx ends
	sandboxOutEnv = "TOOLHOST_TEST_SANDBOXFILE" // Configure writes the sandbox it was sent here
	countFileEnv  = "TOOLHOST_TEST_COUNTFILE"   // when set, a count tool appends a line here per call
	readFileEnv   = "TOOLHOST_TEST_READFILE"    // needsfiles reads it as it starts
	writeFileEnv  = "TOOLHOST_TEST_WRITEFILE"   // needsfiles writes it as it starts
)

type sleepArgs struct {
	Ms int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
}

type echoArgs struct {
	Text string `json:"text"`
}

// testGroup is a well-behaved group whose id comes from groupIDEnv.
func testGroup() *sdk.Group {
	id := os.Getenv(groupIDEnv)
	if id == "" {
		id = "testgroup"
	}
	return &sdk.Group{
		ID: id, Description: "tools for the host's tests",
		OnConfigure: func(_ context.Context, req *sdk.ConfigureRequest) error {
			if f := os.Getenv(sandboxOutEnv); f != "" {
				b, _ := json.Marshal(req.Sandbox)
				return os.WriteFile(f, b, 0o644)
			}
			return nil
		},
		Tools: []sdk.Tool{
			sdk.NewTool("noop", "Do nothing.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
				return &sdk.Result{OK: true}, nil
			}),
			sdk.NewTool("echo", "Echo text.", func(_ context.Context, r *sdk.Request[echoArgs]) (*sdk.Result, error) {
				return sdk.Text(r.Args.Text), nil
			}),
			sdk.NewTool("sleep", "Sleep, or until cancelled.", func(ctx context.Context, r *sdk.Request[sleepArgs]) (*sdk.Result, error) {
				if f := os.Getenv(startFileEnv); f != "" {
					_ = os.WriteFile(f, []byte("started"), 0o644)
				}
				select {
				case <-time.After(time.Duration(r.Args.Ms) * time.Millisecond):
					return sdk.Text("slept"), nil
				case <-ctx.Done():
					if f := os.Getenv(cancelFileEnv); f != "" {
						_ = os.WriteFile(f, []byte(ctx.Err().Error()), 0o644)
					}
					return nil, ctx.Err()
				}
			}),
			sdk.NewTool("traced", "Start a span of its own and log a line.", func(ctx context.Context, r *sdk.Request[struct{}]) (*sdk.Result, error) {
				_, span := otel.Tracer("testgroup").Start(ctx, "inner work")
				r.Logger().Warn("traced call")
				span.End()
				return &sdk.Result{OK: true}, nil
			}),
			sdk.NewTool("log", "Log text at warn level.", func(_ context.Context, r *sdk.Request[echoArgs]) (*sdk.Result, error) {
				r.Logger().Warn("plugin says", "text", r.Args.Text)
				return &sdk.Result{OK: true}, nil
			}),
			sdk.NewTool("spawn", "Start a grandchild process that sleeps; return its pid.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
				cmd := exec.Command("sleep", "60")
				if err := cmd.Start(); err != nil {
					return nil, err
				}
				return sdk.Text(strconv.Itoa(cmd.Process.Pid)), nil
			}),
		},
	}
}

type pathArgs struct {
	Path string `json:"path" jsonschema:"a path; ~/ is $HOME"`
}

type addrArgs struct {
	Addr string `json:"addr" jsonschema:"host:port"`
}

type urlArgs struct {
	URL string `json:"url"`
}

// snoopGroup is testGroup plus the tools of a plugin that reaches for what
// is not its own: files, the network, the host's loopback. Each fails with
// tool_exec and the reason when it cannot.
func snoopGroup() *sdk.Group {
	failed := func(err error) (*sdk.Result, error) {
		return sdk.Fail(&sdk.Result{}, sdk.CodeToolExec, "%v", err), nil
	}
	g := testGroup()
	g.ID = "snoop"
	g.Tools = append(g.Tools,
		sdk.NewTool("read_file", "Read a file.", func(_ context.Context, r *sdk.Request[pathArgs]) (*sdk.Result, error) {
			p := r.Args.Path
			if rest, ok := strings.CutPrefix(p, "~/"); ok {
				p = filepath.Join(os.Getenv("HOME"), rest)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return failed(err)
			}
			return sdk.Text(string(b)), nil
		}),
		sdk.NewTool("dial", "Open a TCP connection and close it.", func(_ context.Context, r *sdk.Request[addrArgs]) (*sdk.Result, error) {
			c, err := net.DialTimeout("tcp", r.Args.Addr, 2*time.Second)
			if err != nil {
				return failed(err)
			}
			c.Close()
			return sdk.Text("connected"), nil
		}),
		// http_get goes through the proxy HTTP_PROXY names, when it names
		// one, even to a loopback address (which ProxyFromEnvironment
		// would reach directly); it returns the response's status line.
		sdk.NewTool("http_get", "GET a URL, through HTTP_PROXY when set.", func(ctx context.Context, r *sdk.Request[urlArgs]) (*sdk.Result, error) {
			tr := &http.Transport{}
			if p := os.Getenv("HTTP_PROXY"); p != "" {
				u, err := url.Parse(p)
				if err != nil {
					return failed(err)
				}
				tr.Proxy = http.ProxyURL(u)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.Args.URL, nil)
			if err != nil {
				return failed(err)
			}
			resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				return failed(err)
			}
			resp.Body.Close()
			return sdk.Text(resp.Status), nil
		}),
	)
	return g
}

// hostile is a provider that reports whatever spec it is given, bypassing
// the SDK's own checks.
type hostile struct {
	spec     toolhost.GroupSpec
	describe func()
}

func (h *hostile) Describe(context.Context, *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	if h.describe != nil {
		h.describe()
	}
	return &h.spec, nil
}
func (h *hostile) Configure(context.Context, *toolhost.ConfigureRequest) error { return nil }
func (h *hostile) Call(context.Context, *toolhost.CallRequest) (*toolhost.Result, error) {
	return &toolhost.Result{OK: true}, nil
}

// serveTestPlugin runs as the named test plugin.
func serveTestPlugin(name string) {
	if f := os.Getenv(pidFileEnv); f != "" {
		_ = os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Info})
	obj := []byte(`{"type":"object"}`)
	switch name {
	case "good":
		g := testGroup()
		if f := os.Getenv(countFileEnv); f != "" {
			g.Tools = append(g.Tools, countTool(f))
		}
		sdk.Serve(g, nil)
	case "snoop":
		sdk.Serve(snoopGroup(), nil)
	case "bigoutput":
		sdk.Serve(bigOutputGroup(), nil)
	case "reserved":
		os.Setenv(groupIDEnv, "workspace")
		sdk.Serve(testGroup(), nil)
	case "junk":
		fmt.Println("hello from a plugin that prints to stdout")
		sdk.Serve(testGroup(), nil)
	case "nohandshake":
		time.Sleep(time.Hour)
	case "exit":
		os.Exit(1)
	case "needsfiles":
		// A module that reads its settings and writes its state as it
		// starts, and exits when it cannot, saying why on its stderr.
		if f := os.Getenv(readFileEnv); f != "" {
			if _, err := os.ReadFile(f); err != nil {
				fmt.Fprintf(os.Stderr, "cannot load its settings: %v\n", err)
				os.Exit(1)
			}
		}
		if f := os.Getenv(writeFileEnv); f != "" {
			if err := os.WriteFile(f, []byte("state"), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "cannot keep its state: %v\n", err)
				os.Exit(1)
			}
		}
		sdk.Serve(testGroup(), nil)
	case "hostilestderr":
		hostileStderr(os.Stderr)
		os.Exit(1)
	case "hostilelog":
		hostileLog(os.Stderr)
		os.Exit(1)
	case "dupetools":
		protocol.Serve(&hostile{spec: toolhost.GroupSpec{ID: "dupes", Tools: []toolhost.ToolSpec{
			{Name: "a", InputSchema: obj}, {Name: "a", InputSchema: obj}}}}, logger)
	case "badschema":
		protocol.Serve(&hostile{spec: toolhost.GroupSpec{ID: "badschema", Tools: []toolhost.ToolSpec{
			{Name: "a", InputSchema: []byte(`{"type":"array"}`)}}}}, logger)
	case "bigspec":
		protocol.Serve(&hostile{spec: toolhost.GroupSpec{ID: "big", Description: strings.Repeat("x", 10<<20)}}, logger)
	case "manytools":
		spec := toolhost.GroupSpec{ID: "many"}
		for i := range 5000 {
			spec.Tools = append(spec.Tools, toolhost.ToolSpec{Name: fmt.Sprintf("t%d", i), InputSchema: obj})
		}
		protocol.Serve(&hostile{spec: spec}, logger)
	case "slowdescribe":
		protocol.Serve(&hostile{spec: toolhost.GroupSpec{ID: "slow"}, describe: func() { time.Sleep(time.Hour) }}, logger)
	default:
		fmt.Fprintf(os.Stderr, "unknown test plugin %q\n", name)
		os.Exit(2)
	}
}

// countTool appends a line to the file at path per call, so that a test
// counts the calls that reached the plugin.
func countTool(path string) sdk.Tool {
	return sdk.NewTool("count", "Count a call.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		_, err = f.WriteString("call\n")
		return &sdk.Result{OK: true}, err
	})
}

// sleepStarts returns the env that makes the sleep tool say when it starts,
// and a wait until a call of it has.
func sleepStarts(t *testing.T) (map[string]string, func()) {
	f := filepath.Join(t.TempDir(), "started")
	return map[string]string{startFileEnv: f}, func() {
		t.Helper()
		proctest.Eventually(t, "the call reached the plugin", func() bool { _, err := os.Stat(f); return err == nil })
	}
}

// testPlugin returns a config block that runs this test binary as the named
// test plugin, unconfined (sandbox = "off"): the sandbox tests confine it
// themselves.
func testPlugin(name, behaviour string, env map[string]string) config.Plugin {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	e := map[string]string{testPluginEnv: behaviour}
	for k, v := range env {
		e[k] = v
	}
	return config.Plugin{
		Name: name, Kind: config.KindPlugin, Path: exe, Env: e,
		Restart: config.RestartOnFailure, MaxRestarts: 3, StartTimeout: proctest.Patience, Config: []byte("{}"),
		Sandbox: &sandbox.Policy{Off: true},
	}
}
