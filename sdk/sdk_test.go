package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/internal/rpcplugin"
	"github.com/toolhost/toolhost/netpolicy"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// serveEnv makes the test binary serve a group (see TestMain).
const serveEnv = "SDK_TEST_SERVE"

func TestMain(m *testing.M) {
	switch os.Getenv(serveEnv) {
	case "":
		os.Exit(m.Run())
	case "invalid":
		sdk.Serve(&sdk.Group{ID: "Not Valid", Description: "x"}, nil)
	default:
		sdk.Serve(testGroup(), nil)
	}
	os.Exit(0)
}

type greetArgs struct {
	Name  string `json:"name" jsonschema:"who to greet"`
	Times int    `json:"times,omitempty" jsonschema:"how many times (default 1)"`
}

type blockArgs struct{}

// cancelled receives a value when the block tool sees its context end.
var cancelled = make(chan error, 1)

func testGroup() *sdk.Group {
	return &sdk.Group{
		ID: "greeter", Description: "Greetings.", Version: "1.2.3",
		Tools: []sdk.Tool{
			sdk.NewTool("greet", "Greet someone.", func(_ context.Context, r *sdk.Request[greetArgs]) (*sdk.Result, error) {
				n := max(r.Args.Times, 1)
				return sdk.Text(strings.Repeat("hello "+r.Args.Name+" ", n)), nil
			}, sdk.Timeout(5*time.Second), sdk.RequiresApproval()),
			sdk.NewTool("whoami", "Report the call context.", func(_ context.Context, r *sdk.Request[struct{}]) (*sdk.Result, error) {
				return sdk.JSON(r.Call)
			}, sdk.NeedsAgent(), sdk.Optional()),
			sdk.NewTool("fail", "Fail in the requested way.", func(_ context.Context, r *sdk.Request[struct {
				How string `json:"how"`
			}]) (*sdk.Result, error) {
				switch r.Args.How {
				case "policy":
					return nil, sdk.Errorf(sdk.CodePolicy, "not allowed here")
				case "panic":
					panic("boom")
				}
				return nil, errors.New("it broke")
			}),
			sdk.NewTool("block", "Block until cancelled.", func(ctx context.Context, _ *sdk.Request[blockArgs]) (*sdk.Result, error) {
				<-ctx.Done()
				cancelled <- ctx.Err()
				return nil, ctx.Err()
			}),
		},
	}
}

func TestSpecDerivedFromTypes(t *testing.T) {
	p := sdktest.New(t, testGroup(), nil)
	if p.Spec.ID != "greeter" || p.Spec.Version != "1.2.3" || len(p.Spec.Tools) != 4 {
		t.Fatalf("spec = %+v", p.Spec)
	}
	greet, whoami := p.Spec.Tools[0], p.Spec.Tools[1]
	if greet.Timeout != 5*time.Second || !greet.RequiresApproval || greet.Optional {
		t.Errorf("greet spec = %+v", greet)
	}
	if !whoami.NeedsAgent || !whoami.Optional {
		t.Errorf("whoami spec = %+v", whoami)
	}
	var schema struct {
		Type                 string                       `json:"type"`
		Required             []string                     `json:"required"`
		AdditionalProperties any                          `json:"additionalProperties"`
		Properties           map[string]map[string]string `json:"properties"`
	}
	if err := json.Unmarshal(greet.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || len(schema.Required) != 1 || schema.Required[0] != "name" ||
		schema.Properties["name"]["description"] != "who to greet" || schema.Properties["times"]["type"] != "integer" {
		t.Errorf("schema = %s", greet.InputSchema)
	}
}

func TestArgumentsAreValidated(t *testing.T) {
	p := sdktest.New(t, testGroup(), nil)
	if got := sdktest.OK(t, p.Call("greet", greetArgs{Name: "ann", Times: 2})); got != "hello ann hello ann " {
		t.Errorf("greet = %q", got)
	}
	for _, tc := range []struct {
		args any
		want string
	}{
		{map[string]any{}, "name"},
		{map[string]any{"name": 3}, "name"},
		{map[string]any{"name": "x", "times": "many"}, "times"},
		{map[string]any{"name": "x", "extra": true}, "extra"},
	} {
		msg := sdktest.Fails(t, p.Call("greet", tc.args), sdk.CodeValidation)
		if !strings.Contains(msg, tc.want) {
			t.Errorf("args %v: message %q does not name %q", tc.args, msg, tc.want)
		}
	}
	res, err := p.Do(context.Background(), &toolhost.CallRequest{Tool: "greet", Arguments: []byte("{")})
	if err != nil {
		t.Fatal(err)
	}
	sdktest.Fails(t, res, sdk.CodeValidation)
}

func TestHandlerErrorsBecomeResults(t *testing.T) {
	p := sdktest.New(t, testGroup(), nil)
	if msg := sdktest.Fails(t, p.Call("fail", map[string]string{"how": "policy"}), sdk.CodePolicy); msg != "not allowed here" {
		t.Errorf("policy message = %q", msg)
	}
	if msg := sdktest.Fails(t, p.Call("fail", map[string]string{"how": "plain"}), sdk.CodeToolExec); msg != "it broke" {
		t.Errorf("plain error message = %q", msg)
	}
	if msg := sdktest.Fails(t, p.Call("fail", map[string]string{"how": "panic"}), sdk.CodeToolExec); !strings.Contains(msg, "panicked: boom") {
		t.Errorf("panic message = %q", msg)
	}
	sdktest.OK(t, p.Call("greet", greetArgs{Name: "still serving"}))
	_, err := p.Do(context.Background(), &toolhost.CallRequest{Tool: "nope", Arguments: []byte("{}")})
	if !errors.Is(err, toolhost.ErrUnknownTool) {
		t.Errorf("unknown tool: err = %v", err)
	}
}

func TestCallContextReachesHandler(t *testing.T) {
	p := sdktest.New(t, testGroup(), nil)
	cc := toolhost.CallContext{CallID: "c1", AgentID: "a1", Role: "dev", Session: "s1", WorkspaceDir: "/w", Sandboxed: true, Channel: "mcp"}
	res, err := p.Do(context.Background(), &toolhost.CallRequest{Tool: "whoami", Context: cc})
	if err != nil {
		t.Fatal(err)
	}
	var got toolhost.CallContext
	if err := json.Unmarshal([]byte(sdktest.OK(t, res)), &got); err != nil || got != cc {
		t.Fatalf("handler saw %+v (%v), want %+v", got, err, cc)
	}
}

func TestCancellationReachesHandler(t *testing.T) {
	p := sdktest.New(t, testGroup(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// The caller sees its deadline either as the RPC's error or, when the
	// handler's answer to its own cancelled context wins the race, as that
	// answer: a result failing with timeout.
	res, err := p.Do(ctx, &toolhost.CallRequest{Tool: "block", Arguments: []byte("{}")})
	if !errors.Is(err, toolhost.ErrTimeout) && (err != nil || res.OK || res.Error.Code != toolhost.CodeTimeout) {
		t.Fatalf("res = %+v, err = %v, want timeout", res, err)
	}
	select {
	case err := <-cancelled:
		if err == nil {
			t.Fatal("handler context ended without an error")
		}
	case <-time.After(proctest.Patience):
		t.Fatal("the handler's context was never cancelled")
	}
}

func TestToolsForChoosesPerContext(t *testing.T) {
	admin := sdk.NewTool("drop_tables", "Admin only.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
		return sdk.Text("dropped"), nil
	})
	hello := sdk.NewTool("hello", "For everyone.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
		return sdk.Text("hi"), nil
	})
	g := &sdk.Group{ID: "factory", Description: "Tools per role.", ToolsFor: func(_ context.Context, cc sdk.CallContext) ([]sdk.Tool, error) {
		if cc.Role == "admin" {
			return []sdk.Tool{hello, admin}, nil
		}
		return []sdk.Tool{hello}, nil
	}}
	p := sdktest.New(t, g, nil)
	if n := len(p.Describe(toolhost.CallContext{Role: "admin"}).Tools); n != 2 {
		t.Errorf("admin sees %d tools, want 2", n)
	}
	if n := len(p.Spec.Tools); n != 1 {
		t.Errorf("default context sees %d tools, want 1", n)
	}
	res, err := p.Do(context.Background(), &toolhost.CallRequest{Tool: "drop_tables", Context: toolhost.CallContext{Role: "admin"}})
	if err != nil || sdktest.OK(t, res) != "dropped" {
		t.Fatalf("admin call: %+v, %v", res, err)
	}
	if _, err := p.Do(context.Background(), &toolhost.CallRequest{Tool: "drop_tables", Context: toolhost.CallContext{Role: "guest"}}); !errors.Is(err, toolhost.ErrUnknownTool) {
		t.Fatalf("guest call: err = %v, want unknown_tool", err)
	}
}

func TestBadInputTypeIsInvalidGroupDef(t *testing.T) {
	g := &sdk.Group{ID: "bad", Description: "x", Tools: []sdk.Tool{
		sdk.NewTool("chan", "Channels have no schema.", func(context.Context, *sdk.Request[chan int]) (*sdk.Result, error) { return nil, nil }),
	}}
	_, err := g.Describe(context.Background(), &toolhost.DescribeRequest{})
	if !errors.Is(err, toolhost.ErrInvalidGroupDef) {
		t.Fatalf("err = %v, want invalid_group_def", err)
	}
}

// startRaw starts the test binary as a plugin without a host: the magic cookie
// set, stdout and stderr piped.
func startRaw(t *testing.T, mode string) (*exec.Cmd, *bufio.Reader, *strings.Builder) {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serveEnv+"="+mode, rpcplugin.Handshake().MagicCookieKey+"="+rpcplugin.Handshake().MagicCookieValue,
		"PLUGIN_PROTOCOL_VERSIONS=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(stdout), stderr
}

// TestStdoutCarriesOnlyTheHandshake: the only line a plugin writes to stdout
// is go-plugin's handshake; its log is JSON on stderr.
func TestStdoutCarriesOnlyTheHandshake(t *testing.T) {
	cmd, stdout, _ := startRaw(t, "good")
	line, err := stdout.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^1\|1\|unix\|[^|]+\|grpc\|`).MatchString(line) {
		t.Fatalf("first stdout line %q is not the handshake", line)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	rest, _ := stdout.ReadString(0)
	if rest != "" {
		t.Fatalf("plugin wrote %q to stdout after the handshake", rest)
	}
}

func TestServeRefusesAnInvalidGroup(t *testing.T) {
	cmd, _, stderr := startRaw(t, "invalid")
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("wait = %v, want exit status 1", err)
	}
	if !strings.Contains(stderr.String(), `group id "Not Valid" does not match`) {
		t.Fatalf("stderr = %q", stderr.String())
	}
}

// TestPluginExitsWhenItsParentDies: a shell starts the plugin in the
// background and exits without stopping it; the orphaned plugin must notice
// and exit by itself (no parent-death signal is involved here). The shell
// passes its pid as a host does, since it may exit before the plugin runs.
func TestPluginExitsWhenItsParentDies(t *testing.T) {
	exe, _ := os.Executable()
	sh := exec.Command("sh", "-c", `TOOLHOST_HOST_PID=$$ "$0" >/dev/null 2>&1 & echo $!`, exe)
	sh.Env = append(os.Environ(), serveEnv+"=good", rpcplugin.Handshake().MagicCookieKey+"="+rpcplugin.Handshake().MagicCookieValue,
		"PLUGIN_PROTOCOL_VERSIONS=1")
	out, err := sh.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("pid %q: %v", out, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	proctest.Eventually(t, fmt.Sprintf("the orphaned plugin %d is gone", pid), func() bool { return !proctest.Alive(pid) })
}

func TestFailKeepsOutput(t *testing.T) {
	res := sdk.Fail(&sdk.Result{Stdout: "partial", ExitCode: 2}, sdk.CodeTimeout, "ran past %ds", 5)
	if res.OK || res.Stdout != "partial" || res.ExitCode != 2 || res.Error.Code != sdk.CodeTimeout || res.Error.Message != "ran past 5s" {
		t.Fatalf("Fail = %+v", res)
	}
	if res := sdk.Fail(sdk.Text("out"), sdk.CodeToolExec, "failed"); res.ExitCode != 1 {
		t.Fatalf("a failed result kept exit code 0: %+v", res)
	}
}

// TestBinaryOutputCrossesTheWire: output that is not UTF-8 (binary, a rune cut
// in half) reaches the caller with the bad bytes replaced, instead of failing
// to encode.
func TestBinaryOutputCrossesTheWire(t *testing.T) {
	g := &sdk.Group{ID: "bin", Description: "Binary output.", Tools: []sdk.Tool{
		sdk.NewTool("dump", "Dump bytes.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
			return &sdk.Result{OK: true, Stdout: "ok\xff\xfe", Stderr: "caf\xc3"}, nil
		}),
	}}
	res := sdktest.New(t, g, nil).Call("dump", nil)
	if res.Stdout != "ok\uFFFD" || res.Stderr != "caf\uFFFD" {
		t.Fatalf("stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

func TestConfigureCarriesHostPaths(t *testing.T) {
	var got []string
	g := testGroup()
	g.OnConfigure = func(_ context.Context, req *sdk.ConfigureRequest) error {
		got = req.HostPaths
		return nil
	}
	want := []string{"/srv/toolhost/data", "/var/lib/other"}
	sdktest.New(t, g, &sdktest.Options{HostPaths: want})
	if !slices.Equal(got, want) {
		t.Fatalf("OnConfigure saw host paths %q, want %q", got, want)
	}
}

// TestConfigureCarriesSandbox: the sandbox a host sends reaches the module
// whole over gRPC, and none stays none.
func TestConfigureCarriesSandbox(t *testing.T) {
	want := &sandbox.Policy{
		ReadWrite: []string{"/srv/work"}, ReadOnly: []string{"/opt/refs"}, Network: sandbox.NetworkAllowed,
		Config: netpolicy.Config{AllowHosts: []string{"example.com"}, DenyHosts: []string{"bad.example.com"}},
		Limits: sandbox.Limits{Processes: 8, MemoryMB: -1},
	}
	for _, tt := range []struct {
		name string
		send *sandbox.Policy
	}{{"a sandbox block", want}, {"sandbox off", &sandbox.Policy{Off: true}}, {"no sandbox block", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			var got *sandbox.Policy
			g := testGroup()
			g.OnConfigure = func(_ context.Context, req *sdk.ConfigureRequest) error {
				got = req.Sandbox
				return nil
			}
			sdktest.New(t, g, &sdktest.Options{Sandbox: tt.send})
			if !reflect.DeepEqual(got, tt.send) {
				t.Fatalf("OnConfigure saw sandbox %+v, want %+v", got, tt.send)
			}
		})
	}
}

func TestHostPathsCheck(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data/f", "data/sub/g", "data2/f", "other/f"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"d": "data", "t": "data/sub/g", "o": "other"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Named through a link, the host path resolves to the directory itself.
	hp, err := sdk.ResolveHostPaths([]string{filepath.Join(dir, "d"), filepath.Join(dir, "missing", "..", "later")})
	if err != nil {
		t.Fatal(err)
	}
	if want := (sdk.HostPaths{filepath.Join(dir, "data"), filepath.Join(dir, "later")}); !slices.Equal(hp, want) {
		t.Fatalf("resolved %q, want %q", hp, want)
	}
	for _, tc := range []struct {
		open string
		held bool
	}{
		{"data", true},
		{"data/f", true},
		{"data/sub/g", true},
		{"d", true},
		{"d/sub", true},
		{"t", true},
		{"other/../data/f", true},
		{"data2/f", false}, // a sibling sharing the prefix
		{"o/f", false},
		{".", false},
	} {
		t.Run(tc.open, func(t *testing.T) {
			f, err := os.Open(filepath.Join(dir, tc.open))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			real, err := hp.Check(f)
			if held := errors.Is(err, sdk.ErrHostPath); held != tc.held || !held && err != nil {
				t.Fatalf("Check = %q, %v; want held %v", real, err, tc.held)
			}
			if !tc.held && !strings.HasPrefix(real, dir) {
				t.Errorf("Check placed %s at %q, outside %s", tc.open, real, dir)
			}
		})
	}
	if real, err := (sdk.HostPaths{}).Check(os.Stdin); real != "" || err != nil {
		t.Errorf("no host paths: Check = %q, %v; want nothing", real, err)
	}
	if _, err := sdk.ResolveHostPaths([]string{"data"}); toolhost.CodeOf(err) != toolhost.CodeValidation {
		t.Errorf("a relative host path: %v, want a validation error", err)
	}
}

// TestAnnotations: the annotation options state MCP's four hints, the ones
// not given false, and a title; they reach the host over gRPC.
func TestAnnotations(t *testing.T) {
	noop := func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return &sdk.Result{OK: true}, nil }
	g := &sdk.Group{ID: "hints", Description: "Hints.", Tools: []sdk.Tool{
		sdk.NewTool("look", "Look.", noop, sdk.ReadOnly(), sdk.Title("Look around")),
		sdk.NewTool("fetch", "Fetch.", noop, sdk.ReadOnly(), sdk.Idempotent(), sdk.OpenWorld()),
		sdk.NewTool("wipe", "Wipe.", noop, sdk.Destructive()),
		sdk.NewTool("note", "Note.", noop, sdk.Additive()),
		sdk.NewTool("plain", "Plain.", noop),
	}}
	p := sdktest.New(t, g, nil) // Describe over a real gRPC connection
	want := map[string]string{
		"look":  `{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`,
		"fetch": `{"destructiveHint":false,"idempotentHint":true,"openWorldHint":true,"readOnlyHint":true}`,
		"wipe":  `{"destructiveHint":true,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`,
		"note":  `{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`,
		"plain": ``,
	}
	for _, tool := range p.Spec.Tools {
		if got := string(tool.Annotations); got != want[tool.Name] {
			t.Errorf("%s: annotations %s, want %s", tool.Name, got, want[tool.Name])
		}
		if (tool.Title == "Look around") != (tool.Name == "look") {
			t.Errorf("%s: title %q", tool.Name, tool.Title)
		}
	}
}

type sum struct {
	Total int    `json:"total" jsonschema:"the sum"`
	Note  string `json:"note,omitempty"`
}

// TestStructuredOutput: a structured tool's output type becomes its output
// schema, and each result carries the value as structured content, which
// validates against that schema, and as JSON text.
func TestStructuredOutput(t *testing.T) {
	g := &sdk.Group{ID: "typed", Description: "Typed.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("add", "Add.", func(_ context.Context, r *sdk.Request[struct {
			A int `json:"a"`
			B int `json:"b"`
		}]) (sum, error) {
			if r.Args.A < 0 {
				return sum{}, sdk.Errorf(sdk.CodeValidation, "field a: negative")
			}
			return sum{Total: r.Args.A + r.Args.B}, nil
		}, sdk.ReadOnly()),
	}}
	p := sdktest.New(t, g, nil) // over a real gRPC connection
	var schema jsonschema.Schema
	if err := json.Unmarshal(p.Spec.Tools[0].OutputSchema, &schema); err != nil {
		t.Fatalf("output schema %q: %v", p.Spec.Tools[0].OutputSchema, err)
	}
	if schema.Type != "object" || !slices.Equal(schema.Required, []string{"total"}) || schema.Properties["total"].Description != "the sum" {
		t.Errorf("output schema = %s", p.Spec.Tools[0].OutputSchema)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	res := p.Call("add", map[string]int{"a": 2, "b": 3})
	sc, ok := res.Meta[toolhost.MetaStructuredContent]
	if !res.OK || !ok {
		t.Fatalf("result = %+v, want structured content", res)
	}
	if err := resolved.Validate(sc); err != nil {
		t.Errorf("structured content %v does not match the output schema: %v", sc, err)
	}
	var text any
	if err := json.Unmarshal([]byte(res.Stdout), &text); err != nil || !reflect.DeepEqual(text, sc) {
		t.Errorf("stdout %q is not the structured content %v (%v)", res.Stdout, sc, err)
	}
	if msg := sdktest.Fails(t, p.Call("add", map[string]int{"a": -1, "b": 0}), sdk.CodeValidation); !strings.Contains(msg, "negative") {
		t.Errorf("failure message %q", msg)
	}
}

// TestStructuredOutputMustBeAnObject: MCP's outputSchema is an object, so a
// tool whose output type is not a struct or a map is an invalid group.
func TestStructuredOutputMustBeAnObject(t *testing.T) {
	g := &sdk.Group{ID: "bad", Description: "x", Tools: []sdk.Tool{
		sdk.NewStructuredTool("count", "Count.", func(context.Context, *sdk.Request[struct{}]) (int, error) { return 1, nil }),
	}}
	_, err := g.Describe(context.Background(), &toolhost.DescribeRequest{})
	if !errors.Is(err, toolhost.ErrInvalidGroupDef) || !strings.Contains(err.Error(), "output") {
		t.Fatalf("err = %v, want invalid_group_def about the output type", err)
	}
}

// TestOutputWriters: what a handler writes to Stdout and Stderr reaches a
// host that takes output as it comes in pieces of at most 32 KiB, before the
// result's own; for a caller that does not, the last 8 MiB of each are kept
// and put before the result's own output.
func TestOutputWriters(t *testing.T) {
	const n = 10 << 20
	want := make([]byte, n)
	for i := range want {
		want[i] = 'a' + byte(i%26)
	}
	g := &sdk.Group{ID: "pour", Description: "Pours output.", Tools: []sdk.Tool{
		sdk.NewTool("pour", "Write 10 MiB.", func(_ context.Context, r *sdk.Request[struct{}]) (*sdk.Result, error) {
			for b := want; len(b) > 0; b = b[min(len(b), 100<<10):] {
				_, _ = r.Stdout().Write(b[:min(len(b), 100<<10)])
			}
			_, _ = fmt.Fprint(r.Stderr(), "err")
			return sdk.Text("end"), nil
		}, sdk.KeepTail()),
	}}
	p := sdktest.New(t, g, nil)

	res := p.Call("pour", nil)
	if len(res.Stdout) != 8<<20+3 || res.Stdout != string(want[n-8<<20:])+"end" || res.Stderr != "err" || !res.TruncatedBytes {
		t.Errorf("kept: %d bytes of stdout (truncated %v), stderr %q", len(res.Stdout), res.TruncatedBytes, res.Stderr)
	}

	var stdout, stderr []byte
	pieces, largest := 0, 0
	ctx := toolhost.WithOutput(context.Background(), func(isErr bool, b []byte) error {
		pieces, largest = pieces+1, max(largest, len(b))
		if isErr {
			stderr = append(stderr, b...)
		} else {
			stdout = append(stdout, b...)
		}
		return nil
	})
	res, err := p.Do(ctx, &toolhost.CallRequest{Tool: "pour", Arguments: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout, want) || string(stderr) != "err" || res.Stdout != "end" || res.Stderr != "" || res.TruncatedBytes {
		t.Errorf("streamed: %d bytes of stdout, stderr %q; result stdout %q, stderr %q, truncated %v", len(stdout), stderr, res.Stdout, res.Stderr, res.TruncatedBytes)
	}
	if largest > 32<<10 {
		t.Errorf("%d pieces, the largest %d bytes", pieces, largest)
	}
}
