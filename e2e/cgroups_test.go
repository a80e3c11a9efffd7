package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/procstat"
	"github.com/toolhost/toolhost/internal/proctest"
)

// TestStoppedServeLeavesNoCgroup: serve running as root holds each
// sandbox's process limit with a pids cgroup of its own (sandbox/cgroup.go),
// named after the process that made it: serve for its modules' sandboxes,
// the command module for its commands'. A command module that is killed
// leaves none behind once serve has restarted it, and a serve stopped by
// SIGINT or SIGTERM none at all.
func TestStoppedServeLeavesNoCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pids cgroups are made for a host running as root only")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			h := newServe(t, fmt.Sprintf(`
data_dir   = "data"
plugin_dir = %q
builtin "workspace" {
  config {}
}
builtin "command" {
  config {}
}
role "developer" {
  tool_groups = ["workspace", "command"]
}
`, pluginDir))
			serve := h.start()
			token := h.roleToken("developer", "dev", "")
			run := func() {
				t.Helper()
				cs, err := h.mcpSession("developer", token)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				var wg sync.WaitGroup
				for i := range 4 { // at once, so that the module makes several
					wg.Go(func() {
						if text, isErr := mcptest.CallText(t, cs, "run_command", map[string]any{"command": fmt.Sprintf("sleep 0.2; echo %d", i)}); isErr {
							t.Errorf("run_command: %s", text)
						}
					})
				}
				wg.Wait()
			}
			pids := []int{serve.Process.Pid}
			run()
			first := h.pluginPid("command")
			pids = append(pids, first)
			if len(sandboxCgroups(first)) == 0 {
				t.Fatalf("the command module (pid %d) made no cgroup to reuse: the test sees nothing", first)
			}
			if len(sandboxCgroups(serve.Process.Pid)) == 0 {
				t.Fatalf("serve (pid %d) made no cgroup for the workspace module's sandbox: the test sees nothing", serve.Process.Pid)
			}

			// A killed command module's cgroups go once it has exited.
			if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			proctest.Eventually(t, "the command module runs again", func() bool {
				pid := h.pluginPid("command")
				return pid != 0 && pid != first
			})
			proctest.Eventually(t, "the killed command module's cgroups are removed", func() bool { return len(sandboxCgroups(first)) == 0 })
			run()
			pids = append(pids, h.pluginPid("command"))
			pids = append(pids, procstat.Descendants(serve.Process.Pid)...)

			if err := serve.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			_ = serve.Wait()
			slices.Sort(pids)
			for _, pid := range slices.Compact(pids) {
				if left := sandboxCgroups(pid); len(left) > 0 {
					t.Errorf("process %d left %d cgroups behind: %s", pid, len(left), strings.Join(left, " "))
				}
			}
		})
	}
}

// pluginPid is the pid of the running module name, 0 when it is not
// running, as GET /api/plugins shows it.
func (h *hostile) pluginPid(name string) int {
	h.t.Helper()
	_, body := h.send(request{method: "GET", path: "/api/plugins", token: h.admin})
	var list []struct {
		Name, State string
		Pid         int
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		h.t.Fatalf("plugins: %v: %.300s", err, body)
	}
	for _, p := range list {
		if p.Name == name && p.State == "running" {
			return p.Pid
		}
	}
	return 0
}

// sandboxCgroups lists the sandbox cgroups that process pid made, in every
// cgroup hierarchy.
func sandboxCgroups(pid int) []string {
	var out []string
	prefix := fmt.Sprintf("toolhost-sandbox-%d-", pid)
	_ = filepath.WalkDir("/sys/fs/cgroup", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), prefix) {
			out = append(out, path)
		}
		return nil
	})
	return out
}
