package host

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/toolhost/toolhost/sandbox"
)

// sandboxedPlugin is testPlugin confined by pol, with a marker argument of
// its own: every process of its sandbox carries the marker on its command
// line (bubblewrap's holds the plugin's), so markedProcs finds them all.
func sandboxedPlugin(name, behaviour string, pol *sandbox.Policy, env map[string]string) (config.Plugin, string) {
	p := testPlugin(name, behaviour, env)
	p.Sandbox = pol
	p.Args = []string{"sandbox-test-" + rand.Text()}
	return p, p.Args[0]
}

// markedProcs returns the live processes whose command line holds marker,
// with their arguments.
func markedProcs(marker string) map[int][]string {
	out := map[int][]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) && proctest.Alive(pid) {
			out[pid] = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		}
	}
	return out
}

// sandboxedPid finds the plugin itself among the processes of a sandbox:
// the one running this test binary with just the marker.
func sandboxedPid(t *testing.T, marker string) int {
	t.Helper()
	exe, _ := os.Executable()
	var pid int
	proctest.Eventually(t, "the sandboxed plugin runs", func() bool {
		for p, args := range markedProcs(marker) {
			if slices.Equal(args, []string{exe, marker}) {
				pid = p
				return true
			}
		}
		return false
	})
	return pid
}

// environ is a process's environment.
func environ(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// TestSandboxConfinesPlugin: a plugin that reaches for a private key under
// $HOME, a service on the host's loopback and the host's database gets all
// three with sandbox = "off", and none of them in a sandbox, where it still
// serves its other tools: a block that says nothing about its sandbox runs
// in the default one (it got all three before). A read_write root is
// reachable; with network "allowed" the proxy refuses the host's loopback.
func TestSandboxConfinesPlugin(t *testing.T) {
	const secret = "sandbox-test-marker in id_rsa"
	home := t.TempDir()
	key := filepath.Join(home, ".ssh", "id_rsa")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "loopback service") }))
	defer srv.Close()

	// The attacks; a row's reach says which succeed, with what output.
	attacks := func(root, data string) []struct {
		name, tool string
		args       map[string]any
	} {
		return []struct {
			name, tool string
			args       map[string]any
		}{
			{"ssh key through $HOME", "read_file", map[string]any{"path": "~/.ssh/id_rsa"}},
			{"ssh key by its path", "read_file", map[string]any{"path": key}},
			{"host loopback", "dial", map[string]any{"addr": srv.Listener.Addr().String()}},
			{"host loopback over HTTP", "http_get", map[string]any{"url": srv.URL}},
			{"host database", "read_file", map[string]any{"path": filepath.Join(data, "toolhost.db")}},
			{"file in the root", "read_file", map[string]any{"path": filepath.Join(root, "notes.txt")}},
		}
	}
	rows := []struct {
		name    string
		sandbox func(root string) *sandbox.Policy
		reach   map[string]string // attack → a part of its output; the others are refused
	}{{
		name:    "no sandbox block",
		sandbox: func(string) *sandbox.Policy { return nil },
	}, {
		name:    "sandbox off",
		sandbox: func(string) *sandbox.Policy { return &sandbox.Policy{Off: true} },
		reach: map[string]string{"ssh key through $HOME": secret, "ssh key by its path": secret, "host loopback": "connected",
			"host loopback over HTTP": "200 OK", "host database": "SQLite format 3", "file in the root": "notes"},
	}, {
		name:    "sandbox {}",
		sandbox: func(string) *sandbox.Policy { return &sandbox.Policy{} },
	}, {
		name:    "read_write root",
		sandbox: func(root string) *sandbox.Policy { return &sandbox.Policy{ReadWrite: []string{root}} },
		reach:   map[string]string{"file in the root": "notes"},
	}, {
		name:    "network allowed",
		sandbox: func(string) *sandbox.Policy { return &sandbox.Policy{Network: sandbox.NetworkAllowed} },
		reach:   map[string]string{"host loopback over HTTP": "403 Forbidden"},
	}}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("notes"), 0o644); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(t.TempDir(), "data")
			p, _ := sandboxedPlugin("snoop", "snoop", row.sandbox(root), nil)
			cfg := &config.Config{DataDir: data, Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{p}}
			h := runHost(t, cfg, testOptions(t))
			if st := plugin(h, "snoop"); st.State != StateRunning {
				t.Fatalf("plugin not running: %+v", st)
			}
			for _, a := range attacks(root, data) {
				res, err := callTool(t, h, a.tool, a.args)
				want, reach := row.reach[a.name]
				switch {
				case err != nil:
					t.Errorf("%s: %v", a.name, err)
				case reach && (!res.OK || !strings.Contains(res.Stdout, want)):
					t.Errorf("%s: want %q, got ok=%v %.60q %s", a.name, want, res.OK, res.Stdout, errorMessage(res))
				case !reach && res.OK:
					t.Errorf("%s: not refused: %.60q", a.name, res.Stdout)
				default:
					t.Logf("%s: ok=%v %.40q %s", a.name, res.OK, res.Stdout, errorMessage(res))
				}
			}
			if res, err := callTool(t, h, "echo", map[string]any{"text": "still here"}); err != nil || res.Stdout != "still here" {
				t.Fatalf("echo: %+v, %v", res, err)
			}
		})
	}
}

// TestSandboxHoldsModuleToItsConfigNetwork: a block's config {} says its
// network policy once (allow_hosts = ["127.0.0.1"], as chrome's README
// does for a local server) and its sandbox's proxy applies it: a module
// that ignores its config and fetches whatever a tool argument names (as a
// compromised one would) reaches the listed address and nothing else, not
// the host's other loopback addresses, by address or by name, nor anything
// around the proxy. Before, the sandbox refused the listed address until
// its block repeated allow_hosts. (That the proxy's rules are the config's
// is TestSandboxTakesModuleNetwork's; a public name is not fetched here even
// to see it refused: were it let through, the test would reach out.)
func TestSandboxHoldsModuleToItsConfigNetwork(t *testing.T) {
	serve := func(ip string) (string, *atomic.Int32) {
		var hits atomic.Int32
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			fmt.Fprint(w, "dev server")
		})}}
		srv.Start()
		t.Cleanup(srv.Close)
		return ln.Addr().String(), &hits
	}
	dev, devHits := serve("127.0.0.1")
	victim, victimHits := serve("127.0.0.2")
	_, victimPort, _ := net.SplitHostPort(victim)

	p, _ := sandboxedPlugin("snoop", "snoop", &sandbox.Policy{Network: sandbox.NetworkAllowed}, nil)
	p.Config = []byte(`{"allow_hosts": ["127.0.0.1"]}`)
	h := runHost(t, &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{p}}, testOptions(t))
	if st := plugin(h, "snoop"); st.State != StateRunning {
		t.Fatalf("plugin not running: %+v", st)
	}
	if res, err := callTool(t, h, "http_get", map[string]any{"url": "http://" + dev + "/"}); err != nil || !res.OK || res.Stdout != "200 OK" || devHits.Load() != 1 {
		t.Fatalf("the address the config allows: %+v, %v (%d requests reached it)", res, err, devHits.Load())
	}
	for _, a := range []struct{ name, tool, arg string }{
		{"another loopback address", "http_get", "http://" + victim + "/"},
		{"a name for it", "http_get", "http://localhost:" + victimPort + "/"},
		{"IPv6 loopback", "http_get", "http://[::1]:" + victimPort + "/"},
		{"around the proxy", "dial", victim},
		{"the allowed address around the proxy", "dial", dev},
	} {
		key := map[string]string{"http_get": "url", "dial": "addr"}[a.tool]
		res, err := callTool(t, h, a.tool, map[string]any{key: a.arg})
		switch {
		case err != nil:
			t.Errorf("%s: %v", a.name, err)
		case res.OK && res.Stdout != "403 Forbidden":
			t.Errorf("%s (%s %s): not refused: %q", a.name, a.tool, a.arg, res.Stdout)
		default:
			t.Logf("%s: refused: %q %s", a.name, res.Stdout, errorMessage(res))
		}
	}
	if n := victimHits.Load(); n != 0 {
		t.Errorf("%d requests reached the address the config does not allow", n)
	}
}

func errorMessage(r *toolhost.Result) string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Message
}

// TestSandboxedPluginLifecycle: a sandboxed plugin gets a private socket
// directory and no host pid to watch; SIGKILL of the plugin inside its
// sandbox unregisters its group and restarts it, and what the old sandbox
// held is gone; Close leaves no process of the sandbox and no socket
// directory.
func TestSandboxedPluginLifecycle(t *testing.T) {
	p, marker := sandboxedPlugin("good", "good", &sandbox.Policy{}, nil)
	h := startHost(t, p)
	pid := sandboxedPid(t, marker)
	env := environ(t, pid)
	socketDir := env["PLUGIN_UNIX_SOCKET_DIR"]
	if fi, err := os.Stat(socketDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory %q: %v, %v", socketDir, fi, err)
	}
	if v, ok := env[protocol.HostPidEnv]; ok {
		t.Errorf("a sandboxed plugin got %s=%s", protocol.HostPidEnv, v)
	}
	first := markedProcs(marker)
	bwrapPid := plugin(h, "good").Pid
	if _, ok := first[bwrapPid]; !ok || bwrapPid == pid {
		t.Fatalf("the plugin's pid %d is not its sandbox's bubblewrap: %v", bwrapPid, first)
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the group is back with a new sandbox", func() bool {
		g, ok := group(h, "testgroup")
		return ok && g.Source.Pid != bwrapPid && g.Source.Pid != 0
	})
	if st := plugin(h, "good"); st.Restarts != 1 || st.State != StateRunning {
		t.Fatalf("after the kill: %+v", st)
	}
	for old := range first {
		proctest.Eventually(t, "the killed sandbox's processes are gone", func() bool { return !proctest.Alive(old) })
	}
	if _, err := os.Stat(socketDir); !os.IsNotExist(err) {
		t.Errorf("the killed plugin's socket directory is left: %v", err)
	}
	socketDir = environ(t, sandboxedPid(t, marker))["PLUGIN_UNIX_SOCKET_DIR"]
	if res, err := callTool(t, h, "echo", map[string]any{"text": "again"}); err != nil || res.Stdout != "again" {
		t.Fatalf("call after restart: %+v, %v", res, err)
	}

	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if left := markedProcs(marker); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	if _, err := os.Stat(socketDir); !os.IsNotExist(err) {
		t.Errorf("socket directory left after Close: %v", err)
	}
}

// noBwrapEnv marks the re-executed test binary that runs
// TestSandboxWithoutBubblewrap with no bubblewrap on its PATH.
const noBwrapEnv = "TOOLHOST_TEST_NO_BWRAP"

// TestSandboxWithoutBubblewrap: with no bubblewrap to run, a sandboxed
// plugin is refused with policy, saying what to install and that sandbox =
// "off" is the way out; it is not started unconfined, and the host serves
// its other plugins. It runs in a fresh test process, as sandbox.bwrapPath
// remembers a success.
func TestSandboxWithoutBubblewrap(t *testing.T) {
	if os.Getenv(noBwrapEnv) == "" {
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "-test.run=^TestSandboxWithoutBubblewrap$", "-test.v")
		cmd.Env = append(os.Environ(), noBwrapEnv+"=1", "PATH="+t.TempDir())
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestSandboxWithoutBubblewrap")) {
			t.Fatalf("the test without bubblewrap: %v", err)
		}
		return
	}
	if path, err := exec.LookPath("bwrap"); err == nil {
		t.Fatalf("bwrap is still on PATH: %s", path)
	}
	boxed, marker := sandboxedPlugin("boxed", "good", &sandbox.Policy{}, map[string]string{groupIDEnv: "boxed"})
	h := startHost(t, boxed, testPlugin("plain", "good", nil))
	st := plugin(h, "boxed")
	if st.State != StateFailed || st.ErrorCode != toolhost.CodePolicy || st.Restarts != 0 ||
		!strings.Contains(st.LastError, "bubblewrap") || !strings.Contains(st.LastError, `sandbox = "off"`) {
		t.Fatalf("sandboxed plugin without bubblewrap: %+v", st)
	}
	if procs := markedProcs(marker); len(procs) > 0 {
		t.Fatalf("the plugin was started: %v", procs)
	}
	if res, err := callTool(t, h, "echo", map[string]any{"text": "ok"}); err != nil || !res.OK {
		t.Fatalf("host stopped serving: %+v, %v", res, err)
	}
}

// TestCommandBuiltinGetsItsSandbox: the command module's block's sandbox is
// sent to the module (nil without a sandbox block), which runs unconfined
// to make sandboxes of its own.
func TestCommandBuiltinGetsItsSandbox(t *testing.T) {
	exe, _ := os.Executable()
	for _, tt := range []struct {
		name string
		pol  *sandbox.Policy
	}{
		{"no sandbox block", nil},
		{"a sandbox block", &sandbox.Policy{ReadOnly: []string{"/srv/refs"}, Network: sandbox.NetworkAllowed, Limits: sandbox.Limits{Processes: 16}}},
		{"sandbox off", &sandbox.Policy{Off: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "sandbox.json")
			p := testPlugin("command", "good", map[string]string{groupIDEnv: "command", sandboxOutEnv: out})
			p.Kind, p.Sandbox = config.KindBuiltin, tt.pol
			h := startHost(t, p)
			st := plugin(h, "command")
			if st.State != StateRunning {
				t.Fatalf("command builtin: %+v", st)
			}
			got, _ := os.ReadFile(out)
			want, _ := json.Marshal(tt.pol)
			if !bytes.Equal(got, want) {
				t.Errorf("the module was sent sandbox %s, want %s", got, want)
			}
			if self, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", st.Pid)); err != nil || self != exe {
				t.Errorf("the module's process runs %q (%v), not its own executable: it was sandboxed", self, err)
			}
		})
	}
}

// TestSandboxStartLogs: the host warns at start of the blocks that run
// unconfined or share the host's network, says once at info level the
// limits a block lifts (its choice, not a warning), and once what sandbox
// the machine gives; first-party builtins without a sandbox block are not
// mentioned.
func TestSandboxStartLogs(t *testing.T) {
	bare := testPlugin("bare", "good", map[string]string{groupIDEnv: "bare"})
	bare.Sandbox = nil // the default sandbox
	legacy := testPlugin("legacy", "good", map[string]string{groupIDEnv: "legacy"})
	legacy.Sandbox = &sandbox.Policy{Off: true}
	hostnet, _ := sandboxedPlugin("hostnet", "good", &sandbox.Policy{Network: sandbox.NetworkHost}, map[string]string{groupIDEnv: "hostnet"})
	unlimited, _ := sandboxedPlugin("unlimited", "good", &sandbox.Policy{Limits: sandbox.Limits{MemoryMB: -1}}, map[string]string{groupIDEnv: "unlimited"})
	workspace := testPlugin("workspace", "good", map[string]string{groupIDEnv: "workspace"})
	workspace.Kind, workspace.Sandbox = config.KindBuiltin, nil
	var buf proctest.Buffer
	cfg := &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{bare, legacy, hostnet, unlimited, workspace}}
	h := runHost(t, cfg, &Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})})
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "sandbox") {
			lines = append(lines, l)
		}
	}
	t.Logf("%s", strings.Join(lines, "\n"))
	has := func(level, text, plugin string) bool {
		return slices.ContainsFunc(lines, func(l string) bool {
			return strings.Contains(l, "["+level+"]") && strings.Contains(l, text) && strings.Contains(l, plugin)
		})
	}
	for _, want := range []struct{ level, text, plugin string }{
		{"WARN", `sandbox: starts unconfined (sandbox = "off")`, "plugin=legacy"},
		{"WARN", `sandbox: shares the host's network`, "plugin=hostnet"},
		{"INFO", "sandbox: no memory_mb limit", "plugin=unlimited"},
		{"INFO", "sandbox: status=", ""},
	} {
		if !has(want.level, want.text, want.plugin) {
			t.Errorf("no [%s] %q line for %q", want.level, want.text, want.plugin)
		}
	}
	if has("WARN", "", "plugin=unlimited") {
		t.Errorf("a warning about the lifted limit, which the block chose")
	}
	for _, confined := range []string{"plugin=workspace", "plugin=bare"} {
		if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, confined) }) {
			t.Errorf("a sandbox line about %s, which runs in its default sandbox", confined)
		}
	}
	for _, name := range []string{"bare", "workspace"} {
		if st := plugin(h, name); st.State != StateRunning {
			t.Errorf("%s in its default sandbox: %+v", name, st)
		}
	}
	// Said again at each start of the unconfined module.
	if err := syscall.Kill(plugin(h, "legacy").Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the unconfined module's restart is logged", func() bool {
		return strings.Count(buf.String(), "whatever the host can: plugin=legacy") == 2
	})
	if n := strings.Count(buf.String(), "sandbox: status="); n != 1 {
		t.Errorf("the sandbox's status logged %d times, want once", n)
	}
	if st := plugin(h, "hostnet"); st.State != StateRunning {
		t.Errorf("the sandboxed plugin sharing the host's network: %+v", st)
	}
}
