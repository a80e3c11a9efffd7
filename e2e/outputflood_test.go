package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// TestOutputFlood: a role's agent runs 16 commands at once, each writing up
// to 1 GiB to its stdout for at most floodSeconds, half of them as lines,
// half as one line; each call returns its output's end. What
// serve and the command module hold of a call's output is bounded whatever
// runs in parallel, so their peak RSS stays under floodServeMiB and
// floodModuleMiB. Each runs in a memory cgroup of its own, so that a
// flood that is not bounded kills it rather than the machine. (The
// commands themselves, in their sandboxes below the command module, are
// not measured: what they hold is theirs.)
func TestOutputFlood(t *testing.T) {
	h := newServe(t, fmt.Sprintf(`
data_dir   = "data"
plugin_dir = %q
builtin "command" {
  config {}
}
role "developer" {
  tool_groups = ["command"]
}
`, pluginDir))
	serve := h.start().Process.Pid
	command := h.pluginPid("command")
	memoryCgroup(t, serve, floodCgroupMiB<<20)
	memoryCgroup(t, command, floodCgroupMiB<<20)
	cs, err := h.mcpSession("developer", h.roleToken("developer", "dev", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	t.Logf("before the flood: serve's RSS %d MiB, the command module's %d MiB", statusKB(serve, "VmRSS")>>10, statusKB(command, "VmRSS")>>10)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range floodCalls {
		flood, end := "yes flood | head -c 1G", "flood\nflood\n"
		if i%2 == 1 {
			flood, end = "head -c 1G /dev/zero | tr '\\0' a", "aaaaaaaaaa"
		}
		wg.Go(func() {
			text, isErr := mcptest.CallText(t, cs, "run_command", map[string]any{"command": flood, "timeout_seconds": floodSeconds})
			if !strings.Contains(text, end) {
				t.Errorf("%s: error %v, %d bytes back, ending %q: not its output's end", flood, isErr, len(text), text[max(0, len(text)-100):])
			}
		})
	}
	wg.Wait()
	t.Logf("%d floods in %s", floodCalls, time.Since(start).Round(time.Millisecond))
	if !proctest.Alive(serve) || h.pluginPid("command") != command {
		t.Fatalf("serve (alive: %v) or the command module (pid %d, was %d) died", proctest.Alive(serve), h.pluginPid("command"), command)
	}
	for _, p := range []struct {
		name      string
		pid, most int // most: the bound of its peak RSS, in MiB
	}{{"serve", serve, floodServeMiB}, {"the command module", command, floodModuleMiB}} {
		peak := statusKB(p.pid, "VmHWM")
		t.Logf("%s's peak RSS: %d MiB", p.name, peak>>10)
		if peak > p.most<<10 {
			t.Errorf("%s's peak RSS is %d MiB, more than %d MiB: a call's output is not bounded in memory", p.name, peak>>10, p.most)
		}
	}
}

const (
	floodCalls = 16
	// floodSeconds bounds each flood in time: its command is killed then,
	// and the call returns the output so far (less than 1 GiB on a slow
	// machine), before the host's own timeout of 30 s.
	floodSeconds = 15
	// floodServeMiB and floodModuleMiB bound the peak RSS of serve and of
	// the command module through the flood. Measured on a 2-core machine:
	// serve 48 MiB idle, 90–109 MiB at its peak (551–681 MiB before the
	// host took output as it came); the command module 19 MiB idle, 33 MiB
	// at its peak (649–681 MiB before).
	floodServeMiB  = 160
	floodModuleMiB = 64
	// floodCgroupMiB is the memory limit of the cgroup of each, where one
	// can be made.
	floodCgroupMiB = 3 << 10
)
