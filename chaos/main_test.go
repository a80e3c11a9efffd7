package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/store"
)

// TestMain serves a plugin or runs a host when this binary was re-executed
// as one (see pluginEnv and hostEnv), and otherwise runs the tests.
func TestMain(m *testing.M) {
	if b := os.Getenv(pluginEnv); b != "" {
		servePlugin(b)
		os.Exit(0)
	}
	if f := os.Getenv(hostEnv); f != "" {
		runHost(f)
	}
	os.Exit(m.Run())
}

// pluginBlock returns a plugin block running this test binary with the
// behaviour, serving the group id; env adds to its environment.
func pluginBlock(group, behaviour string, env map[string]string) config.Plugin {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	e := map[string]string{pluginEnv: behaviour, groupEnv: group}
	for k, v := range env {
		e[k] = v
	}
	return config.Plugin{
		Name: group, Kind: config.KindPlugin, Path: exe, Env: e,
		Restart: config.RestartOnFailure, MaxRestarts: 3, StartTimeout: proctest.Patience, Config: []byte("{}"),
		Sandbox: &sandbox.Policy{Off: true}, // what chaos breaks is the plugin, not its sandbox
	}
}

// testOptions are host options that keep restarts quick, logging warnings
// and errors to the test's log.
func testOptions(t testing.TB) *host.Options {
	return &host.Options{
		Logger:         hclog.New(&hclog.LoggerOptions{Output: testLog{t}, Level: hclog.Warn}),
		RestartBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, HealthyAfter: time.Minute,
		DescribeTimeout: proctest.Patience,
	}
}

// newConfig returns a config for the plugins with its data in a temporary
// directory and a call timeout far beyond any test's needs. The plugins'
// TMPDIR is a directory removed when the test ends (see socketDir).
func newConfig(t testing.TB, plugins ...config.Plugin) *config.Config {
	tmp := socketDir(t)
	for i := range plugins {
		plugins[i].Env = maps.Clone(plugins[i].Env)
		plugins[i].Env["TMPDIR"] = tmp
	}
	return &config.Config{DataDir: t.TempDir(), Limits: config.Limits{Timeout: time.Minute}, Plugins: plugins}
}

// socketDir returns a directory, removed when the test ends, for plugins'
// TMPDIR: a plugin creates its Unix socket there, and one that dies without
// a word (SIGKILL, os.Exit) leaves it behind. Its path is short, unlike
// t.TempDir's, as a socket's path may not pass 108 bytes.
func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "chaos")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// startHost starts a host and closes it when the test ends.
func startHost(t testing.TB, cfg *config.Config, opts *host.Options) *host.Host {
	t.Helper()
	h, err := host.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("closing the host: %v", err)
		}
	})
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

// newAgent creates a role with the groups and an agent of it, and returns the
// agent's id: calls made as that agent can be told apart in the events.
func newAgent(t testing.TB, h *host.Host, role string, groups ...string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := h.Roles().Get(role); err != nil {
		if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: role, ToolGroups: groups}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := h.Agents().Create(ctx, role, store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// pluginStatus returns the named plugin's status.
func pluginStatus(h *host.Host, name string) host.PluginStatus {
	for _, p := range h.Modules().List() {
		if p.Name == name {
			return p
		}
	}
	return host.PluginStatus{}
}

// call calls a tool as the operator (no agent, no role).
func call(h *host.Host, tool string, args any) (*toolhost.Result, error) {
	raw, _ := json.Marshal(args)
	return h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: raw})
}

// events returns every event of the type (or type prefix ending in ".")
// recorded for the agent. Limit is set above any count a test expects: when
// more events match than Limit, the store returns only the most recent Limit,
// which would hide extra events rather than show them.
func events(t testing.TB, h *host.Host, agent, typ string) []store.Event {
	t.Helper()
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 20
	ev, err := h.Events().List(context.Background(), store.EventFilter{Agent: agent, Type: typ, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) == limit {
		t.Fatalf("%d %s events for %s: the limit, so some may be hidden", limit, typ, agent)
	}
	return ev
}

// cpuTime is the CPU time, user and system, this process has used so far.
func cpuTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rss is this process's resident set size (VmRSS), in bytes.
func rss(t testing.TB) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", sc.Text(), err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// hostGroups are the groups of the host runHost runs.
var hostGroups = []string{"alpha", "beta", "gamma"}

// runHost runs a host with three plugins (the last sandboxed), writes their pids, one a line, to
// pidFile (whole, by a rename) and blocks until the process is killed. Its
// data goes beside pidFile.
func runHost(pidFile string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "chaos host:", err)
		os.Exit(1)
	}
	cfg := &config.Config{DataDir: filepath.Join(filepath.Dir(pidFile), "data"), Limits: config.Limits{Timeout: time.Minute}}
	for _, g := range hostGroups {
		cfg.Plugins = append(cfg.Plugins, pluginBlock(g, behaveGood, nil))
	}
	cfg.Plugins[len(cfg.Plugins)-1].Sandbox = &sandbox.Policy{} // one of them confined: it must die with the host too
	h, err := host.New(cfg, nil)
	if err != nil {
		fail(err)
	}
	if err := h.Start(context.Background()); err != nil {
		fail(err)
	}
	var pids strings.Builder
	for _, p := range h.Modules().List() {
		if p.State != host.StateRunning || p.Pid == 0 {
			fail(fmt.Errorf("plugin %s is not running: %+v", p.Name, p))
		}
		fmt.Fprintln(&pids, p.Pid)
	}
	if err := os.WriteFile(pidFile+".tmp", []byte(pids.String()), 0o644); err != nil {
		fail(err)
	}
	if err := os.Rename(pidFile+".tmp", pidFile); err != nil {
		fail(err)
	}
	for {
		time.Sleep(time.Hour)
	}
}
