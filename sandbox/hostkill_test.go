package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/proctest"
)

// The environment of this test binary as the host of
// TestHostKilledEndsSandbox (see TestHostKillHelper).
const (
	hostNetworkEnv = "TOOLHOST_SANDBOX_TEST_HOST"      // the sandbox's network
	hostMarkerEnv  = "TOOLHOST_SANDBOX_TEST_MARKER"    // the seconds its `sleep` sleeps, in the sandbox's environment
	hostSuicideEnv = "TOOLHOST_SANDBOX_TEST_KILL_SELF" // set: SIGKILL itself as soon as bubblewrap forked
)

// TestHostKilledEndsSandbox SIGKILLs a host (this binary, see
// TestHostKillHelper) that runs `sleep` in a sandbox: nothing stops the
// sandbox, yet bubblewrap and every process of the sandbox are gone soon
// after, whether the host died while the command ran or while bubblewrap's
// child was still setting the sandbox up (each such row kills several
// hosts), and for each network (with "allowed" the stage also runs the
// bridge to the proxy).
func TestHostKilledEndsSandbox(t *testing.T) {
	for _, tc := range []struct {
		name     string
		network  Network
		starting bool // the host kills itself as soon as bubblewrap forked
	}{
		{"while the command runs", NetworkNone, false},
		{"while the command runs, network allowed", NetworkAllowed, false},
		{"while bubblewrap sets up", NetworkNone, true},
		{"while bubblewrap sets up, network allowed", NetworkAllowed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hosts := 1
			if tc.starting {
				hosts = 3
			}
			for range hosts {
				marker := proctest.Marker()
				killed := killHost(t, tc.network, marker, tc.starting)
				proctest.Eventually(t, "every process of the sandbox is gone", func() bool { return len(proctest.WithEnv(hostMarkerEnv+"="+marker)) == 0 })
				t.Logf("the sandbox was gone %s after its host was killed", time.Since(killed).Round(time.Millisecond))
			}
		})
	}
}

// killHost starts a host that runs `sleep marker` in a sandbox with the
// network, and returns when the host was SIGKILLed: by itself as soon as
// bubblewrap forked when starting, else by the test once the command runs.
func killHost(t *testing.T, network Network, marker string, starting bool) time.Time {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	host := exec.Command(exe, "-test.run=^TestHostKillHelper$")
	host.Env = append(os.Environ(), hostNetworkEnv+"="+string(network), hostMarkerEnv+"="+marker)
	if starting {
		host.Env = append(host.Env, hostSuicideEnv+"=1")
	}
	host.Stderr = os.Stderr
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	// The host says bubblewrap's pid once it started the sandbox (read
	// before Wait, which closes the pipe).
	line, readErr := bufio.NewReader(out).ReadString('\n')
	exited := make(chan struct{})
	go func() { _ = host.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = host.Process.Kill()
		<-exited
		for _, pid := range proctest.WithEnv(hostMarkerEnv + "=" + marker) { // what a failed test leaves
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if _, err := strconv.Atoi(strings.TrimSpace(line)); readErr != nil || err != nil {
		t.Fatalf("the host wrote %q (%v) instead of bubblewrap's pid", line, readErr)
	}
	if !starting {
		proctest.Eventually(t, "the sandboxed command runs", func() bool { return proctest.Running("sleep", marker) == 1 })
		if err := host.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
	}
	killed := time.Now()
	<-exited
	if st := host.ProcessState; st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the host ended with %v, not SIGKILL", st)
	}
	return killed
}

// TestHostKillHelper is the host of TestHostKilledEndsSandbox when started
// by it (and skips otherwise): it starts `sleep` in a sandbox, writes
// bubblewrap's pid, and waits to be killed, or kills itself once
// bubblewrap's child is there, setting the sandbox up (it takes
// milliseconds, and arms its parent-death signal only after).
func TestHostKillHelper(t *testing.T) {
	network := os.Getenv(hostNetworkEnv)
	if network == "" {
		t.Skip("the host of TestHostKilledEndsSandbox, started by it")
	}
	marker := os.Getenv(hostMarkerEnv)
	cmd, err := Command(context.Background(), &Policy{Network: Network(network)}, []string{"sleep", marker})
	if err != nil {
		t.Fatal(err)
	}
	// bubblewrap, the stages and the command all have it: what the test
	// looks for.
	cmd.Env = []string{hostMarkerEnv + "=" + marker}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Println(cmd.Process.Pid)
	if os.Getenv(hostSuicideEnv) != "" {
		// bubblewrap's children, read at once: a scan of /proc would take
		// as long as the setup.
		children := fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid)
		for deadline := time.Now().Add(proctest.Patience); time.Now().Before(deadline); {
			if b, _ := os.ReadFile(children); len(b) > 0 {
				break
			}
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	_ = cmd.Wait()
	t.Fatal("the sandbox ended before the host was killed")
}
