package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/toolhost/toolhost/internal/procstat"
	"github.com/toolhost/toolhost/internal/proctest"
)

// The trust suite: a real `toolhost serve` on the repository's config.hcl
// as shipped, laid out as scripts/run lays it out (bin/toolhost,
// bin/plugins/, data/, workspace/ beside config.hcl), plus one third-party
// mcp_server block that says nothing about a sandbox. Agents of the default
// roles, and the hostile server, attack what the host trusts; each row
// names what must be unchanged afterwards. Every request stays on loopback;
// the memory attacks run with serve in a memory cgroup of its own, so that
// a failure kills only serve.

// trustServe is serve on the default config, and what the rows need of it.
type trustServe struct {
	*hostile
	cmd  *exec.Cmd
	data string // the data directory
	ws   string // the workspace
	dev  string // a developer's token
	res  string // a researcher's token
}

// startDefaultServe lays out the default deployment in a new directory and
// runs serve on it.
func startDefaultServe(t *testing.T) *trustServe {
	t.Helper()
	dir := cloneLayout(t)
	bin := filepath.Join(dir, "bin")
	hostileMCP := filepath.Join(t.TempDir(), "hostilemcp")
	build(t, "./testdata/hostilemcp", hostileMCP)
	cfg := filepath.Join(dir, "config.hcl")
	src, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src = fmt.Appendf(src, "\n# A third-party MCP server, loaded as a module without a sandbox block.\nmcp_server \"hostile\" {\n  command = %q\n}\n", hostileMCP)
	if err := os.WriteFile(cfg, src, 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t, "127.0.0.2")
	t.Setenv("TOOLHOST_LISTEN", "127.0.0.2:"+port)
	h := &hostile{t: t, bin: filepath.Join(bin, "toolhost"), cfg: cfg, dir: dir, base: "http://127.0.0.2:" + port, port: port, stderr: &bytes.Buffer{}}
	h.admin = strings.TrimSpace(h.cli("token"))
	s := &trustServe{hostile: h, data: filepath.Join(dir, "data"), ws: filepath.Join(dir, "workspace")}
	s.dev = h.roleToken("developer", "dev", "")
	s.res = h.roleToken("researcher", "res", "")
	s.cmd = h.start()
	return s
}

// build compiles the package at pkg into out.
func build(t *testing.T, pkg, out string) {
	t.Helper()
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
}

// copyFile copies src to dst, executable, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = os.WriteFile(dst, b, 0o755)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// sum is a file's SHA-256, or the error reading it.
func sum(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// outcome is what POST /api/call answered: the result, or the error.
type outcome struct {
	status int
	OK     bool   `json:"ok"`
	Stdout string `json:"stdout"`
	Error  *struct {
		Code, Message string
	} `json:"error"`
}

func (o outcome) code() string {
	if o.Error == nil {
		return ""
	}
	return o.Error.Code
}

func (o outcome) String() string {
	if o.Error != nil {
		return fmt.Sprintf("%d %s: %s", o.status, o.Error.Code, o.Error.Message)
	}
	return fmt.Sprintf("%d ok=%v %.120q (%d bytes)", o.status, o.OK, o.Stdout, len(o.Stdout))
}

// call sends POST /api/call with token, as role (none: the admin's call
// with every group).
func (s *trustServe) call(token, role, tool string, args any, callID string) outcome {
	s.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		s.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"role": role, "tool": tool, "arguments": json.RawMessage(raw), "callId": callID})
	status, resp := s.send(request{method: "POST", path: "/api/call", token: token, contentType: "application/json", body: string(body)})
	o := outcome{status: status}
	if err := json.Unmarshal([]byte(resp), &o); err != nil {
		s.t.Fatalf("%s: %v: %.300s", tool, err, resp)
	}
	return o
}

// plugin is the state and pid of a module, as GET /api/plugins shows it.
func (s *trustServe) plugin(name string) (state string, pid int) {
	s.t.Helper()
	_, body := s.send(request{method: "GET", path: "/api/plugins", token: s.admin})
	var list []struct {
		Name, State string
		Pid         int
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		s.t.Fatalf("plugins: %v: %.300s", err, body)
	}
	for _, p := range list {
		if p.Name == name {
			return p.State, p.Pid
		}
	}
	s.t.Fatalf("no plugin %s in %s", name, body)
	return "", 0
}

// statusKB is a field of /proc/PID/status in KiB (VmRSS, VmHWM), 0 when gone.
func statusKB(pid int, field string) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// memoryCgroup moves pid into a memory cgroup of its own, below this
// process's, limited to limit bytes, so that a memory attack that works
// kills pid, not the test or the machine. Where no memory cgroup can be
// made, it says so and leaves pid where it is: the rows still measure.
func memoryCgroup(t *testing.T, pid int, limit int64) {
	t.Helper()
	own, _ := os.ReadFile("/proc/self/cgroup")
	var dir, max string
	for _, l := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		switch {
		case len(parts) < 3:
		case parts[1] == "memory": // cgroup v1
			dir, max = filepath.Join("/sys/fs/cgroup/memory", parts[2]), "memory.limit_in_bytes"
		case parts[0] == "0" && parts[1] == "" && dir == "": // cgroup v2
			dir, max = filepath.Join("/sys/fs/cgroup", parts[2]), "memory.max"
		}
	}
	g := filepath.Join(dir, fmt.Sprintf("toolhost-e2e-%d", pid))
	err := os.Mkdir(g, 0o755)
	if err == nil {
		t.Cleanup(func() { _ = syscall.Rmdir(g) })
		if err = os.WriteFile(filepath.Join(g, max), []byte(strconv.FormatInt(limit, 10)), 0); err == nil {
			err = os.WriteFile(filepath.Join(g, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		}
	}
	if err != nil {
		t.Logf("serve runs without a memory cgroup of its own (%v): the rows still measure its memory", err)
	}
}

// nested is {"x": {"y": {"y": … 1}}} with depth levels of y.
func nested(depth int) json.RawMessage {
	return json.RawMessage(`{"x":` + strings.Repeat(`{"y":`, depth) + "1" + strings.Repeat("}", depth) + "}")
}

// TestTrustBoundaryDefaultConfig is the hostile-agent suite against the
// default config: one row per attack of an agent on what the host trusts
// (its config, data and executables), each with the request, the refusal
// expected, and what must be unchanged afterwards.
func TestTrustBoundaryDefaultConfig(t *testing.T) {
	s := startDefaultServe(t)
	serve := s.cmd.Process.Pid
	memoryCgroup(t, serve, 768<<20)
	workspaceBin := filepath.Join(s.dir, "bin", "plugins", "workspace")
	workspaceSum, configSum := sum(workspaceBin), sum(s.cfg)

	t.Run("a developer replaces a module's executable, then crashes it", func(t *testing.T) {
		_, before := s.plugin("workspace")
		for _, o := range []outcome{
			s.call(s.dev, "developer", "write_file", map[string]any{"path": workspaceBin, "content": "#!/bin/sh\nid\n"}, ""),
			s.call(s.dev, "developer", "write_file", map[string]any{"path": "../bin/plugins/workspace", "content": "#!/bin/sh\nid\n"}, ""),
			s.call(s.dev, "developer", "run_command", map[string]any{"command": "cp /bin/sh " + workspaceBin + "; cp /bin/sh ../bin/plugins/workspace"}, ""),
		} {
			t.Logf("%v", o)
		}
		if got := sum(workspaceBin); got != workspaceSum {
			t.Fatalf("the workspace module's executable changed")
		}
		// The crash that got the replaced executable restarted: four reads at
		// once of a 1000 MiB file without a newline.
		if o := s.call(s.dev, "developer", "run_command", map[string]any{"command": "truncate -s 1000M big"}, ""); !o.OK {
			t.Fatalf("truncate: %v", o)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				t.Logf("read_file big: %v", s.call(s.dev, "developer", "read_file", map[string]any{"path": "big"}, ""))
			})
		}
		wg.Wait()
		state, after := s.plugin("workspace")
		if state != "running" || after != before {
			t.Fatalf("the workspace module is %s with pid %d, was running as %d: the reads crashed it", state, after, before)
		}
		peak := 0
		for _, p := range append(procstat.Descendants(after), after) {
			peak = max(peak, statusKB(p, "VmHWM"))
		}
		t.Logf("the workspace module's peak RSS: %d MiB", peak>>10)
		if peak > 256<<10 {
			t.Errorf("the workspace module's peak RSS is %d MiB: reads are not bounded by their page", peak>>10)
		}
	})

	t.Run("the researcher rewrites its own role", func(t *testing.T) {
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"edit_file", map[string]any{"path": s.cfg, "find": `tool_groups = ["chrome", "workspace"]`, "replace": `tool_groups = ["chrome", "workspace", "command"]`}},
			{"edit_file", map[string]any{"path": "../config.hcl", "find": "researcher", "replace": "pwned"}},
			{"write_file", map[string]any{"path": "../config.hcl", "content": "role \"researcher\" {}\n"}},
			{"run_command", map[string]any{"command": "id"}},
		} {
			o := s.call(s.res, "researcher", c.tool, c.args, "")
			t.Logf("%s: %v", c.tool, o)
			if o.OK {
				t.Errorf("researcher's %s went through: %v", c.tool, o)
			}
		}
		// And a developer cannot reach the file either.
		if o := s.call(s.dev, "developer", "edit_file", map[string]any{"path": s.cfg, "find": "researcher", "replace": "pwned"}, ""); o.OK {
			t.Errorf("developer's edit_file of config.hcl went through: %v", o)
		}
		if sum(s.cfg) != configSum {
			t.Fatal("config.hcl changed")
		}
	})

	t.Run("a caller's call id is a path", func(t *testing.T) {
		target := t.TempDir()
		id := strings.Repeat("../", 24) + strings.TrimPrefix(target, "/") + "/pwned"
		o := s.call(s.dev, "developer", "run_command", map[string]any{"command": "seq 1 5000"}, id)
		t.Logf("%v", o)
		if entries, _ := os.ReadDir(target); len(entries) > 0 {
			t.Fatalf("the call wrote %s outside the data directory", filepath.Join(target, entries[0].Name()))
		}
	})

	t.Run("a schema whose $ref cycles, and a deep argument", func(t *testing.T) {
		before := statusKB(serve, "VmRSS")
		for _, depth := range []int{3000, 9000} {
			o := s.call(s.admin, "", "deep", nested(depth), "")
			t.Logf("depth %d: %v", depth, o)
			if o.code() != "validation" || !strings.Contains(o.Error.Message, "64") {
				t.Errorf("depth %d: %v, want validation naming the limit", depth, o)
			}
		}
		tree := `{"x":` + strings.Repeat(`{"y":`, 10) + "{}" + strings.Repeat("}", 10) + "}"
		if o := s.call(s.admin, "", "deep", json.RawMessage(tree), ""); !o.OK {
			t.Errorf("a shallow tree: %v", o)
		}
		if !proctest.Alive(serve) {
			t.Fatal("serve died")
		}
		after := statusKB(serve, "VmRSS")
		t.Logf("serve's RSS: %d MiB before, %d MiB after", before>>10, after>>10)
		if after-before > 64<<10 {
			t.Errorf("serve's RSS grew by %d MiB", (after-before)>>10)
		}
	})

	t.Run("a third-party MCP server reads the host's secrets", func(t *testing.T) {
		adminToken := s.admin
		o := s.call(s.admin, "", "snoop", map[string]any{"paths": []string{
			"/etc/shadow", filepath.Join(s.data, "toolhost.db"), filepath.Join(s.data, "admin.token"), s.cfg, workspaceBin,
		}}, "")
		t.Logf("%v", o)
		if !o.OK {
			t.Fatalf("snoop: %v", o)
		}
		for _, secret := range []string{"root:", "SQLite format 3", adminToken, "role \"developer\"", "ELF"} {
			if strings.Contains(o.Stdout, secret) {
				t.Errorf("the server read %q", secret)
			}
		}
	})

	t.Run("read_file is bounded by its limits", func(t *testing.T) {
		_, pid := s.plugin("workspace")
		if o := s.call(s.dev, "developer", "run_command", map[string]any{"command": "mkfifo pipe"}, ""); !o.OK {
			t.Fatalf("mkfifo: %v", o)
		}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				o := s.call(s.dev, "developer", "read_file", map[string]any{"path": "pipe"}, "")
				if o.OK || o.code() == "timeout" {
					t.Errorf("read_file of a FIFO: %v, want it refused at once", o)
				}
			})
		}
		wg.Wait()
		outside := filepath.Join(s.dir, "outside.txt")
		if err := os.WriteFile(outside, []byte("outside secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(outside, filepath.Join(s.ws, "linked")); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"read_file", map[string]any{"path": "linked"}},
			{"write_file", map[string]any{"path": "linked", "content": "appended\n", "mode": "append"}},
			{"write_file", map[string]any{"path": "linked", "content": "over\n"}},
			{"edit_file", map[string]any{"path": "linked", "find": "outside", "replace": "inside"}},
		} {
			o := s.call(s.dev, "developer", c.tool, c.args, "")
			t.Logf("%s of a hard link: %v", c.tool, o)
			if o.OK {
				t.Errorf("%s of a hard link to a file outside the workspace went through", c.tool)
			}
		}
		if b, _ := os.ReadFile(outside); string(b) != "outside secret\n" {
			t.Errorf("the file outside the workspace is now %q", b)
		}
		if state, after := s.plugin("workspace"); state != "running" || after != pid {
			t.Errorf("the workspace module is %s with pid %d, was %d", state, after, pid)
		}
	})

	t.Run("MCP sessions are never forgotten", func(t *testing.T) {
		const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"abandoner","version":"1"}}}`
		// One token opens 101 idle sessions: the 101st ends the least
		// recently used (the first), which then answers 404; the token
		// never holds more than 100, and is never locked out.
		url := s.base + "/mcp/developer"
		var sessions []string
		for len(sessions) <= 100 {
			id := mcpPost(t, url, s.dev, "", initialize)
			if id == "" {
				t.Fatalf("initialize %d opened no session", len(sessions)+1)
			}
			sessions = append(sessions, id)
		}
		if got := mcpStatus(t, url, s.dev, sessions[0], `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); got != http.StatusNotFound {
			t.Errorf("the least recently used session, past the cap, answered %d, want 404", got)
		}
		// Ending one makes room; another token was never concerned.
		req, _ := http.NewRequest("DELETE", url, nil)
		req.Header.Set("Authorization", "Bearer "+s.dev)
		req.Header.Set("Mcp-Session-Id", sessions[1])
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("DELETE: %v, %v", resp, err)
		}
		if got := mcpStatus(t, url, s.dev, sessions[1], `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); got != http.StatusNotFound {
			t.Errorf("the ended session answered %d, want 404", got)
		}
		if id := mcpPost(t, url, s.dev, "", initialize); id == "" {
			t.Error("no session after one ended")
		}
		if id := mcpPost(t, s.base+"/mcp/researcher", s.res, "", initialize); id == "" {
			t.Error("another token got no session")
		}
	})

	t.Run("a host killed with SIGKILL leaves no sandbox behind", func(t *testing.T) {
		procs := procstat.Descendants(serve)
		if len(procs) == 0 {
			t.Fatal("serve has no module processes")
		}
		if err := syscall.Kill(serve, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		proctest.Eventually(t, "every process serve started is gone", func() bool {
			for _, p := range procs {
				if proctest.Alive(p) {
					return false
				}
			}
			return true
		})
		if resp, err := http.Get(s.base + "/healthz"); err == nil {
			resp.Body.Close()
			t.Fatal("serve still answers")
		}
	})
}
