package host

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
)

// modernServer is the 2026-07-28 test server on the TypeScript SDK v2
// (internal/mcp/mcpsource/testdata/modern.mjs): node's path and the script's.
func modernServer(t *testing.T) (node, script string) {
	t.Helper()
	mcptest.NPMPackage(t, "@modelcontextprotocol/server")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (scripts/test installs nodejs): %v", err)
	}
	script, err = filepath.Abs("../internal/mcp/mcpsource/testdata/modern.mjs")
	if err != nil {
		t.Fatal(err)
	}
	return node, script
}

// startModernHTTP runs the test server over streamable HTTP on loopback,
// on port ("0" for a free one), until the test ends or kill; it returns
// the endpoint.
func startModernHTTP(t *testing.T, port string) (url string, kill func()) {
	t.Helper()
	node, script := modernServer(t)
	cmd := exec.Command(node, script, "http", port)
	cmd.Env = append(os.Environ(), "TOOLHOST_NPM_DIR="+mcptest.NPMDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Cleanup(kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the HTTP server said no URL: %v", err)
	}
	return strings.TrimSpace(line), kill
}

// TestMCPServerEras: through the host, an mcp_server block speaks
// 2026-07-28 to a server that offers it (the TypeScript SDK v2 server, over
// stdio in its sandbox and over HTTP) and 2025-11-25 to one that does not
// (npm's server-everything): the plugin status names the version, and the
// v2 server's era tool confirms it from the server's side. In each era
// calls, output limits, progress, cancellation, tool list changes and the
// restart after the server's death work; the restarted module negotiates
// again.
func TestMCPServerEras(t *testing.T) {
	node, script := modernServer(t)
	dir := t.TempDir()
	cancelled := filepath.Join(dir, "cancelled")
	modern := config.Plugin{Name: "modern", Kind: config.KindMCP, Path: node, Args: []string{script, "stdio"}, ToolPrefix: "m_",
		Env:     map[string]string{"TOOLHOST_NPM_DIR": mcptest.NPMDir(), "TOOLHOST_TEST_CANCELLED": cancelled},
		Limits:  config.Limits{MaxOutputLines: 10},
		Restart: config.RestartOnFailure, MaxRestarts: 3, StartTimeout: proctest.Patience, Sandbox: mcptest.NPMSandbox(dir)}
	modern.Sandbox.ReadOnly = append(modern.Sandbox.ReadOnly, filepath.Dir(script))
	everything := config.Plugin{Name: "everything", Kind: config.KindMCP, Path: mcptest.NPMServer(t, "mcp-server-everything"),
		Restart: config.RestartOnFailure, MaxRestarts: 3, StartTimeout: proctest.Patience, Sandbox: mcptest.NPMSandbox()}
	// The HTTP server comes back on its port after its death: the
	// restarts that find it gone are many and quick.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	url, kill := startModernHTTP(t, port)
	remote := config.Plugin{Name: "remote", Kind: config.KindMCP, URL: url, ToolPrefix: "r_",
		Restart: config.RestartOnFailure, MaxRestarts: 1000, StartTimeout: proctest.Patience, Sandbox: &sandbox.Policy{Off: true}}
	cfg := &config.Config{Limits: config.Limits{Timeout: proctest.Patience}, Plugins: []config.Plugin{modern, everything, remote}}
	h := runHost(t, cfg, testOptions(t))

	status := func(name string) PluginStatus {
		for _, p := range h.Modules().List() {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no plugin %s", name)
		return PluginStatus{}
	}
	for name, want := range map[string]string{"modern": mcpversion.Stateless, "remote": mcpversion.Stateless, "everything": mcpversion.Legacy} {
		if st := status(name); st.State != StateRunning || st.Protocol != want {
			t.Errorf("%s: %+v, want running with protocol %s", name, st, want)
		}
	}
	ctx := context.Background()
	call := func(ctx context.Context, tool, args string) *toolhost.Result {
		t.Helper()
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: []byte(args)})
		if err != nil || !res.OK {
			t.Fatalf("%s: %+v, %v", tool, res, err)
		}
		return res
	}
	for _, p := range []string{"m_", "r_"} {
		if got, want := call(ctx, p+"era", `{}`).Stdout, `{"era":"modern","protocolVersion":"2026-07-28"}`; got != want {
			t.Errorf("%sera: %s, want %s", p, got, want)
		}
	}
	// The group's output limits apply to an MCP server's result.
	if res := call(ctx, "m_big", `{"lines":100}`); !res.TruncatedLines || strings.Count(res.Stdout, "\n") > 10 || !strings.HasPrefix(res.Stdout, "line 1\n") {
		t.Errorf("m_big: truncated %v, %d lines", res.TruncatedLines, strings.Count(res.Stdout, "\n")+1)
	}
	// Progress reaches the caller; the caller's cancellation reaches the
	// server, in its sandbox and over HTTP.
	for _, p := range []string{"m_", "r_"} {
		_ = os.Remove(cancelled)
		var progress atomic.Int32
		cctx, cancel := context.WithCancel(ctx)
		cctx = toolhost.WithProgress(cctx, func(done, total float64, msg string) {
			if done == 1 && total == 2 && msg == "halfway" {
				progress.Add(1)
				cancel()
			}
		})
		if res, err := h.Call(cctx, &toolhost.CallRequest{Tool: p + "slow", Arguments: []byte(`{}`)}); err == nil {
			t.Errorf("%sslow: %+v after its cancellation", p, res)
		}
		cancel()
		if progress.Load() != 1 {
			t.Errorf("%sslow: %d progress notifications", p, progress.Load())
		}
		if p == "m_" { // the HTTP server is outside the test's cancelled file
			proctest.Eventually(t, "the server saw the cancellation", func() bool {
				b, _ := os.ReadFile(cancelled)
				return string(b) == "cancelled\n"
			})
		}
	}
	var steps atomic.Int32
	pctx := toolhost.WithProgress(ctx, func(float64, float64, string) { steps.Add(1) })
	if out := call(pctx, "trigger_long_running_operation", `{"duration":0.2,"steps":2}`).Stdout; !strings.Contains(out, "completed") || steps.Load() == 0 {
		t.Errorf("server-everything's long operation: %q, %d progress notifications", out, steps.Load())
	}
	// A tool the server adds joins its group: announced on the
	// subscriptions/listen stream in the stateless era.
	for group, p := range map[string]string{"modern": "m_", "remote": "r_"} {
		call(ctx, p+"add_tool", `{}`)
		proctest.Eventually(t, group+"'s added tool in the group", func() bool { return slices.Contains(toolNames(h, group), p+"added") })
		if got := call(ctx, p+"added", `{}`).Stdout; got != "here" {
			t.Errorf("%sadded: %q", p, got)
		}
	}

	// Deaths: the groups leave at once and come back, negotiated again.
	for _, name := range []string{"modern", "everything"} {
		pid := status(name).Pid
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		proctest.Eventually(t, name+" restarted", func() bool {
			st := status(name)
			return st.State == StateRunning && st.Pid != pid && st.Restarts == 1
		})
	}
	kill()
	proctest.Eventually(t, "remote's group gone with its server", func() bool {
		_, ok := h.mgr.Get("remote")
		return !ok
	})
	startModernHTTP(t, port)
	proctest.Eventually(t, "remote back", func() bool { st := status("remote"); return st.State == StateRunning && st.Restarts > 0 })
	for name, want := range map[string]string{"modern": mcpversion.Stateless, "remote": mcpversion.Stateless, "everything": mcpversion.Legacy} {
		if st := status(name); st.Protocol != want {
			t.Errorf("%s after its restart: %+v, want protocol %s", name, st, want)
		}
	}
	if got := call(ctx, "r_echo", `{"text":"again"}`).Stdout; got != "again" {
		t.Errorf("r_echo after the restart: %q", got)
	}
	if got := call(ctx, "echo", `{"message":"again"}`).Stdout; !strings.Contains(got, "again") {
		t.Errorf("echo after the restart: %q", got)
	}
}
