package host

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/proctest"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// startHost starts a host on the plugins and closes it when the test ends.
func startHost(t testing.TB, plugins ...config.Plugin) *Host {
	t.Helper()
	cfg := &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: plugins}
	return runHost(t, cfg, testOptions(t))
}

// testOptions log to the test and restart plugins quickly.
func testOptions(t testing.TB) *Options {
	return &Options{
		Logger:         hclog.New(&hclog.LoggerOptions{Output: testLog{t}, Level: hclog.Info}),
		RestartBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		DescribeTimeout: proctest.Patience,
	}
}

// runHost starts a host and closes it when the test ends.
func runHost(t tb, cfg *config.Config, opts *Options) *Host {
	t.Helper()
	h, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

type testLog struct{ t testing.TB }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func callTool(t *testing.T, h *Host, tool string, args any) (*toolhost.Result, error) {
	t.Helper()
	raw, _ := json.Marshal(args)
	return h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: raw})
}

func group(h *Host, id string) (GroupInfo, bool) {
	for _, g := range h.Modules().Groups() {
		if g.ID == id {
			return g, true
		}
	}
	return GroupInfo{}, false
}

func plugin(h *Host, name string) PluginStatus {
	for _, p := range h.Modules().List() {
		if p.Name == name {
			return p
		}
	}
	return PluginStatus{}
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	var pid int
	proctest.Eventually(t, "the plugin wrote its pid", func() bool {
		b, _ := os.ReadFile(file)
		pid, _ = strconv.Atoi(string(b))
		return pid > 0
	})
	return pid
}

func TestLoadAndCall(t *testing.T) {
	h := startHost(t, testPlugin("good", "good", nil))
	g, ok := group(h, "testgroup")
	if !ok {
		t.Fatalf("group not registered: %+v", h.Modules().List())
	}
	if g.Source.Kind != SourcePlugin || g.Source.State != StateRunning || g.Source.Pid == 0 || g.ToolCount != 6 || g.Reserved {
		t.Fatalf("group = %+v", g)
	}
	res, err := callTool(t, h, "echo", map[string]any{"text": "hi"})
	if err != nil || !res.OK || res.Stdout != "hi" {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	if _, err = callTool(t, h, "echo", map[string]any{"text": 3}); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "field text") {
		t.Fatalf("bad arguments: %v", err)
	}
	if _, err := callTool(t, h, "nope", nil); !errors.Is(err, toolhost.ErrUnknownTool) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown tool: err = %v", err)
	}
}

func TestCallTimeoutReachesPlugin(t *testing.T) {
	h := startHost(t, testPlugin("good", "good", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := h.Call(ctx, &toolhost.CallRequest{Tool: "sleep", Arguments: []byte(`{"ms":60000}`)})
	if !errors.Is(err, toolhost.ErrTimeout) {
		t.Fatalf("err = %v, want timeout", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = h.Call(ctx, &toolhost.CallRequest{Tool: "sleep", Arguments: []byte(`{"ms":60000}`)})
	if !errors.Is(err, toolhost.ErrCancelled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
}

// TestConfiguredTimeout: the limits block's timeout ends a call with
// timeout, and the plugin's handler sees its context end.
func TestConfiguredTimeout(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "cancelled")
	h := startHost(t, testPlugin("good", "good", map[string]string{cancelFileEnv: mark}))
	h.cfg.Limits.Timeout = 100 * time.Millisecond
	_, err := callTool(t, h, "sleep", map[string]any{"ms": 60000})
	if !errors.Is(err, toolhost.ErrTimeout) || !strings.Contains(err.Error(), "tool sleep timed out after 100ms") {
		t.Fatalf("err = %v, want timeout after 100ms", err)
	}
	proctest.Eventually(t, "the plugin saw its context end", func() bool {
		b, _ := os.ReadFile(mark)
		return len(b) > 0
	})
}

func TestSIGKILLUnregistersFailsInFlightAndRestarts(t *testing.T) {
	env, reached := sleepStarts(t)
	h := startHost(t, testPlugin("good", "good", env))
	g, _ := group(h, "testgroup")
	oldPid := g.Source.Pid

	inflight := make(chan error, 1)
	go func() {
		_, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "sleep", Arguments: []byte(`{"ms":60000}`),
			Context: toolhost.CallContext{CallID: "killed-mid-call"}})
		inflight <- err
	}()
	reached()
	if err := syscall.Kill(oldPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-inflight:
		if !errors.Is(err, toolhost.ErrPluginExited) {
			t.Fatalf("in-flight call: err = %v, want plugin_exited", err)
		}
	case <-time.After(proctest.Patience):
		t.Fatal("in-flight call did not return")
	}
	proctest.Eventually(t, "the group is back with a new process", func() bool {
		g, ok := group(h, "testgroup")
		return ok && g.Source.Pid != oldPid && g.Source.Pid != 0
	})
	g, _ = group(h, "testgroup")
	if g.Source.Restarts != 1 || g.Source.State != StateRunning {
		t.Fatalf("after restart: %+v", g.Source)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, _ := h.Events().List(context.Background(), store.EventFilter{Call: "killed-mid-call"})
	if len(events) != 2 || events[1].Type != store.EventCallFailed || events[1].Payload["error_class"] != "plugin_exited" {
		t.Fatalf("events of the killed call = %+v", events)
	}
	for _, typ := range []string{store.EventPluginExited, store.EventGroupUnregistered, store.EventPluginRestarted} {
		if e, _ := h.Events().List(context.Background(), store.EventFilter{Type: typ}); len(e) != 1 || e[0].Group != "testgroup" {
			t.Errorf("%s events = %+v", typ, e)
		}
	}
	if res, err := callTool(t, h, "echo", map[string]any{"text": "again"}); err != nil || res.Stdout != "again" {
		t.Fatalf("call after restart: %+v, %v", res, err)
	}
}

func TestExitedGroupIsUnlistedUntilBack(t *testing.T) {
	p := testPlugin("good", "good", nil)
	p.Restart = config.RestartNever
	h := startHost(t, p)
	g, _ := group(h, "testgroup")
	if err := syscall.Kill(g.Source.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the group is unregistered", func() bool { _, ok := group(h, "testgroup"); return !ok })
	proctest.Eventually(t, "the plugin is failed", func() bool { return plugin(h, "good").State == StateFailed })
	st := plugin(h, "good")
	if st.Restarts != 0 || st.ErrorCode != toolhost.CodePluginExited || !strings.Contains(st.LastError, "killed") {
		t.Fatalf("status = %+v", st)
	}
	if _, err := callTool(t, h, "echo", map[string]any{"text": "x"}); !errors.Is(err, toolhost.ErrUnknownTool) {
		t.Fatalf("call to an exited group: %v", err)
	}
}

// TestHostilePluginMatrix: every kind of hostile or broken plugin, all in
// one host beside a good one, is refused or contained with its named code,
// its process is gone, and the host goes on serving the good plugin.
func TestHostilePluginMatrix(t *testing.T) {
	cases := []struct {
		behaviour, want string
		code            toolhost.Code
		maxRestarts     int
	}{
		{"reserved", `group id "workspace" is reserved`, toolhost.CodeReservedGroupID, 1},
		{"dupetools", "declared twice", toolhost.CodeInvalidGroupDef, 1},
		{"badschema", `type must be "object"`, toolhost.CodeInvalidGroupDef, 1},
		{"bigspec", "group spec is larger than the limit of 4194304 bytes", toolhost.CodeInvalidGroupDef, 1},
		{"manytools", "group many has 5000 tools, more than the limit of 1000", toolhost.CodeInvalidGroupDef, 1},
		{"junk", `wrote "hello from a plugin that prints to stdout" to stdout`, toolhost.CodeInvalidGroupDef, 1},
		{"nohandshake", "no handshake within the start timeout of 500ms", toolhost.CodeTimeout, 1},
		{"exit", "exited before the handshake (exit status 1)", toolhost.CodePluginExited, 1},
		{"crashloop", "exited before the handshake (exit status 1)", toolhost.CodePluginExited, 3},
		{"slowdescribe", "describe: no answer within 10s", toolhost.CodeTimeout, 1},
	}
	// Each plugin's process is found by its pid file's name in its
	// environment, not by the pid it writes there: the one that never shakes
	// hands may be killed, on a busy machine, before its race-built binary
	// gets that far.
	dir := t.TempDir()
	marker := func(name string) string { return pidFileEnv + "=" + filepath.Join(dir, name) }
	plugins := []config.Plugin{testPlugin("good", "good", map[string]string{pidFileEnv: filepath.Join(dir, "good")})}
	var slow config.Plugin
	for _, c := range cases {
		behaviour := c.behaviour
		if behaviour == "crashloop" {
			behaviour = "exit"
		}
		p := testPlugin(c.behaviour, behaviour, map[string]string{pidFileEnv: filepath.Join(dir, c.behaviour)})
		// Only the plugin that never shakes hands waits for the timeout: eleven
		// race-built test binaries starting at once on a busy machine may take
		// seconds to answer (bigspec once took more than 500ms, and was refused
		// for that instead of for its spec).
		p.StartTimeout, p.MaxRestarts = proctest.Patience, c.maxRestarts
		if c.behaviour == "nohandshake" {
			p.StartTimeout = 500 * time.Millisecond
		}
		if c.behaviour == "slowdescribe" {
			slow = p
			continue
		}
		plugins = append(plugins, p)
	}
	// slowdescribe has a host of its own, whose describe timeout (10s) is
	// what it tests; the others' host waits as long as a loaded machine
	// needs for their answers (bigspec's 10 MiB, manytools' 5000 tools).
	opts := testOptions(t)
	opts.DescribeTimeout = proctest.Patience
	h := runHost(t, &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: plugins}, opts)
	opts = testOptions(t)
	opts.DescribeTimeout = 10 * time.Second
	hosts := map[string]*Host{"slowdescribe": runHost(t, &config.Config{Plugins: []config.Plugin{slow}}, opts)}
	// The marker finds a live plugin: its absence below means the process is
	// gone, not that the search is blind.
	if g, _ := group(h, "testgroup"); !slices.Equal(proctest.WithEnv(marker("good")), []int{g.Source.Pid}) {
		t.Fatalf("processes marked as the good plugin = %v, want its pid %d", proctest.WithEnv(marker("good")), g.Source.Pid)
	}
	for _, c := range cases {
		t.Run(c.behaviour, func(t *testing.T) {
			h := cmp.Or(hosts[c.behaviour], h)
			proctest.Eventually(t, "the plugin is failed", func() bool { return plugin(h, c.behaviour).State == StateFailed })
			st := plugin(h, c.behaviour)
			t.Logf("%s: %s", st.ErrorCode, st.LastError)
			if !strings.Contains(st.LastError, c.want) || st.ErrorCode != c.code {
				t.Fatalf("status = %+v, want error containing %q with code %q", st, c.want, c.code)
			}
			if c.behaviour == "crashloop" && st.Restarts != c.maxRestarts {
				t.Errorf("restarts = %d, want %d", st.Restarts, c.maxRestarts)
			}
			proctest.Eventually(t, "its process is gone", func() bool { return len(proctest.WithEnv(marker(c.behaviour))) == 0 })
		})
	}
	if res, err := callTool(t, h, "echo", map[string]any{"text": "ok"}); err != nil || !res.OK {
		t.Fatalf("host stopped serving: %+v, %v", res, err)
	}
	if ids := h.mgr.IDs(); len(ids) != 1 || ids[0] != "testgroup" {
		t.Fatalf("registered groups = %v", ids)
	}
}

// TestUpdateKeepsTheToolsCallable: a group that its source describes anew
// (an MCP server's tools/list_changed; a server may send it as often as it
// likes) is replaced in one step. Before, it was unregistered and then
// registered: calls in between failed with unknown_tool (a reference MCP
// server's own list_changed at start once failed TestMCPReferenceServers).
func TestUpdateKeepsTheToolsCallable(t *testing.T) {
	h := startHost(t, testPlugin("good", "good", nil))
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			old, _ := h.mgr.Get("testgroup")
			g := &Group{Spec: old.Spec, Kind: old.Kind, SourceName: old.SourceName, Provider: old.Provider, conf: old.conf, refused: old.refused}
			g.Spec.Description = "version " + strconv.Itoa(i)
			if err := h.update(old, g); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	unknown := 0
	for range 300 {
		if _, err := callTool(t, h, "echo", map[string]any{"text": "x"}); errors.Is(err, toolhost.ErrUnknownTool) {
			unknown++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	if unknown > 0 {
		t.Fatalf("%d of 300 calls found the tool gone while its group was updated", unknown)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if evs, _ := h.Events().List(context.Background(), store.EventFilter{Type: store.EventGroupUnregistered}); len(evs) != 0 {
		t.Fatalf("an update recorded %d group.unregistered events", len(evs))
	}
}

func TestUnloadStopsAndUnregisters(t *testing.T) {
	h := startHost(t, testPlugin("good", "good", nil))
	g, _ := group(h, "testgroup")
	if err := h.Modules().Unload("testgroup"); err != nil {
		t.Fatal(err)
	}
	if _, ok := group(h, "testgroup"); ok {
		t.Fatal("group still registered after Unload")
	}
	if st := plugin(h, "good"); st.State != StateStopped || st.Pid != 0 {
		t.Fatalf("status = %+v", st)
	}
	if proctest.Alive(g.Source.Pid) {
		t.Fatal("process alive after Unload")
	}
	if err := h.Modules().Unload("testgroup"); !errors.Is(err, toolhost.ErrValidation) {
		t.Fatalf("second unload: %v", err)
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	h := startHost(t, testPlugin("good", "good", nil))
	g, _ := group(h, "testgroup")
	res, err := callTool(t, h, "spawn", nil)
	if err != nil || !res.OK {
		t.Fatalf("spawn: %+v, %v", res, err)
	}
	grandchild, _ := strconv.Atoi(res.Stdout)
	if !proctest.Alive(grandchild) {
		t.Fatal("grandchild not running")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if proctest.Alive(g.Source.Pid) {
		t.Error("plugin alive after Close")
	}
	proctest.Eventually(t, "the grandchild is gone", func() bool { return !proctest.Alive(grandchild) })
}

func TestDuplicateGroupReplacesAndSurvivesOldExit(t *testing.T) {
	env := map[string]string{groupIDEnv: "shared"}
	h := startHost(t, testPlugin("first", "good", env))
	first := plugin(h, "first").Pid
	second := testPlugin("second", "good", env)
	h2 := h // a second supervisor on the same host, as a later config block would be
	s := newSupervisor(h2, second)
	h.mu.Lock()
	h.plugins = append(h.plugins, s)
	h.mu.Unlock()
	go s.run()
	<-s.ready
	g, _ := group(h, "shared")
	if g.Source.Name != "second" {
		t.Fatalf("group source = %+v, want the replacing plugin", g.Source)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the first plugin has exited", func() bool { return !proctest.Alive(first) && plugin(h, "first").Pid != first })
	if g, ok := group(h, "shared"); !ok || g.Source.Name == "" {
		t.Fatalf("the replaced plugin's exit removed the group: %+v", h.Modules().Groups())
	}
}

func TestRegisterInProcess(t *testing.T) {
	h := startHost(t)
	g := &sdk.Group{ID: "console", Description: "in-process", Tools: []sdk.Tool{
		sdk.NewTool("console_print", "Print.", func(_ context.Context, r *sdk.Request[echoArgs]) (*sdk.Result, error) {
			return sdk.Text(r.Args.Text), nil
		}),
	}}
	if err := h.Modules().Register(context.Background(), g); err != nil {
		t.Fatalf("runtime group with a reserved id: %v", err)
	}
	info, ok := group(h, "console")
	if !ok || info.Source.Kind != SourceRuntime || !info.Reserved {
		t.Fatalf("group = %+v", info)
	}
	if res, err := callTool(t, h, "console_print", map[string]any{"text": "hello"}); err != nil || res.Stdout != "hello" {
		t.Fatalf("call: %+v, %v", res, err)
	}
	if err := h.Modules().Unload("console"); err != nil {
		t.Fatal(err)
	}
	if _, ok := group(h, "console"); ok {
		t.Fatal("runtime group still registered")
	}
}

// testHostEnv makes the test binary run a host with one plugin (whose pid it
// writes to the named file) until it is killed.
const testHostEnv = "TOOLHOST_TEST_HOST"

func runTestHost(pidFile string) {
	h, err := New(&config.Config{Plugins: []config.Plugin{testPlugin("good", "good", map[string]string{pidFileEnv: pidFile})}}, nil)
	if err == nil {
		err = h.Start(context.Background())
	}
	if err != nil {
		panic(err)
	}
	select {}
}

// TestHostKilledLeavesNoPlugin: SIGKILL a host; its plugin must be gone soon
// after, though nothing stopped it.
func TestHostKilledLeavesNoPlugin(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), testHostEnv+"="+pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pluginPid := readPid(t, pidFile)
	proctest.Eventually(t, "the plugin runs", func() bool { return proctest.Alive(pluginPid) })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	proctest.Eventually(t, "the orphaned plugin is gone", func() bool { return !proctest.Alive(pluginPid) })
}

// TestSHA256Pinning: a pinned plugin runs when its executable matches and
// is refused with policy when it does not, sandboxed or not (in a sandbox,
// the plugin's executable is checked, not bubblewrap).
func TestSHA256Pinning(t *testing.T) {
	exe, _ := os.Executable()
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	for _, tt := range []struct {
		name string
		pol  *sandbox.Policy
	}{{"unconfined", nil}, {"sandboxed", &sandbox.Policy{}}} {
		t.Run(tt.name, func(t *testing.T) {
			pinned := testPlugin("pinned", "good", nil)
			pinned.SHA256, pinned.Sandbox = hex.EncodeToString(sum[:]), tt.pol
			wrong := testPlugin("wrong", "good", map[string]string{groupIDEnv: "other"})
			wrong.SHA256, wrong.Sandbox = strings.Repeat("ab", 32), tt.pol
			h := startHost(t, pinned, wrong)
			if st := plugin(h, "pinned"); st.State != StateRunning {
				t.Fatalf("pinned plugin with the right checksum: %+v", st)
			}
			st := plugin(h, "wrong")
			if st.State != StateFailed || st.ErrorCode != toolhost.CodePolicy || !strings.Contains(st.LastError, "does not match its pinned sha256") || st.Restarts != 0 {
				t.Fatalf("plugin with the wrong checksum: %+v", st)
			}
		})
	}
}

// TestPluginLogsKeepTheirLevels: a plugin's log line reaches the host's
// logger at the level the plugin logged it, with the call's id when the
// handler logs through its request.
func TestPluginLogsKeepTheirLevels(t *testing.T) {
	var buf proctest.Buffer
	cfg := &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{testPlugin("good", "good", nil)}}
	h, err := New(cfg, &Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res, err := callTool(t, h, "log", map[string]any{"text": "hello host"}); err != nil || !res.OK {
		t.Fatalf("log: %+v, %v", res, err)
	}
	proctest.Eventually(t, "the plugin's line is logged", func() bool {
		// The relayed fields come in no fixed order.
		for _, line := range strings.Split(buf.String(), "\n") {
			if regexp.MustCompile(`\[WARN\] +good(\.[a-z.-]+)?: plugin says: `).MatchString(line) &&
				regexp.MustCompile(`\bcall_id=call_[0-9a-f]+\b`).MatchString(line) && strings.Contains(line, `text="hello host"`) {
				return true
			}
		}
		return false
	})
}
