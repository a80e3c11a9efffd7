package chaos

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/proctest"
)

// TestHostKilledLeavesNoPlugin SIGKILLs a host running three plugins, one
// of them sandboxed, in a child process (this binary in host mode, see
// runHost): nothing stops the plugins, yet none is alive 2 s later, checked
// by pid, and for the sandboxed one (whose pid is bubblewrap's) by its
// command line, which is this binary's alone, like the host's.
func TestHostKilledLeavesNoPlugin(t *testing.T) {
	const bound = 2 * time.Second // no plugin alive 2 s after the kill: none outlives its host for long
	pidFile := filepath.Join(t.TempDir(), "pids")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), hostEnv+"="+pidFile, "TMPDIR="+socketDir(t)) // the plugins inherit TMPDIR
	cmd.Stderr = testLog{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})

	var pids []int
	proctest.Eventually(t, "the host wrote its plugins' pids", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("the host exited before it was killed: %v", err)
		default:
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("pid file: %q", b)
			}
			pids = append(pids, pid)
		}
		return true
	})
	if len(pids) != len(hostGroups) {
		t.Fatalf("the host ran %d plugins, want %d: %v", len(pids), len(hostGroups), pids)
	}
	for _, pid := range pids {
		if !proctest.Alive(pid) {
			t.Fatalf("plugin %d is not running before the kill", pid)
		}
	}
	if n := proctest.Running(exe); n != 1+len(pids) {
		t.Fatalf("%d processes run this binary alone, want the host and its %d plugins", n, len(pids))
	}

	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	killed := time.Now()
	<-exited
	var alive []int
	for {
		alive = alive[:0]
		for _, pid := range pids {
			if proctest.Alive(pid) {
				alive = append(alive, pid)
			}
		}
		if n := proctest.Running(exe); n > 0 {
			alive = append(alive, -n) // processes running this binary alone, the sandboxed plugin among them
		}
		if len(alive) == 0 || time.Since(killed) > bound {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(alive) > 0 {
		t.Fatalf("plugins %v still alive %s after the host was killed (a negative entry: that many processes of this binary)", alive, bound)
	}
	t.Logf("plugins %v all gone %s after the host was killed", pids, time.Since(killed).Round(time.Millisecond))
}
