package chaos

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// TestCrashLoopBacksOff runs plugins that crash as soon as they start, before
// or after the handshake: the host restarts each after a backoff that grows,
// spends little CPU over the loop, and marks the plugin failed, with its last
// error, after the configured restarts.
func TestCrashLoopBacksOff(t *testing.T) {
	const (
		maxRestarts = 5
		backoff     = 50 * time.Millisecond
		// maxCPU is the share of one core the host may use over the loop: it
		// mostly waits, so far less; a spin would use a whole core.
		maxCPU = 0.5
	)
	cases := []struct {
		name, behaviour string
		restartEvents   bool // a restart that reaches registration emits plugin.restarted
	}{
		{"exit before the handshake", behaveExit, false},
		{"exit after the handshake", behaveCrashAfter, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			starts := filepath.Join(t.TempDir(), "starts")
			p := pluginBlock("crasher", c.behaviour, map[string]string{startsEnv: starts})
			p.MaxRestarts = maxRestarts
			opts := testOptions(t)
			opts.RestartBackoff, opts.MaxBackoff = backoff, time.Minute

			cpu0, wall0 := cpuTime(t), time.Now()
			h := startHost(t, newConfig(t, p), opts)
			proctest.Eventually(t, "the plugin is failed", func() bool { return pluginStatus(h, "crasher").State == host.StateFailed })
			cpu, wall := cpuTime(t)-cpu0, time.Since(wall0)
			share := cpu.Seconds() / wall.Seconds()
			t.Logf("host CPU over the loop: %s in %s (%.1f%% of one core)", cpu, wall.Round(time.Millisecond), 100*share)
			if share > maxCPU {
				t.Errorf("the host used %.0f%% of a core over the crash loop, more than %.0f%%", 100*share, 100*maxCPU)
			}

			st := pluginStatus(h, "crasher")
			t.Logf("status: %+v", st)
			if st.Restarts != maxRestarts || st.LastError == "" || st.ErrorCode != toolhost.CodePluginExited || st.Pid != 0 {
				t.Errorf("status = %+v; want %d restarts, no pid and a plugin_exited last error", st, maxRestarts)
			}

			// The plugin's starts, as it recorded them: 1 + maxRestarts, each
			// after the previous by at least that attempt's backoff (doubling).
			b, err := os.ReadFile(starts)
			if err != nil {
				t.Fatal(err)
			}
			var times []time.Time
			for _, line := range strings.Fields(string(b)) {
				ns, err := strconv.ParseInt(line, 10, 64)
				if err != nil {
					t.Fatalf("starts file: %q", b)
				}
				times = append(times, time.Unix(0, ns))
			}
			if len(times) != 1+maxRestarts {
				t.Fatalf("the plugin started %d times, want %d", len(times), 1+maxRestarts)
			}
			var gaps []time.Duration
			for i := 1; i < len(times); i++ {
				gap, want := times[i].Sub(times[i-1]), backoff<<(i-1)
				gaps = append(gaps, gap.Round(time.Millisecond))
				if gap < want {
					t.Errorf("restart %d came %s after the previous start, before its backoff of %s", i, gap, want)
				}
			}
			t.Logf("intervals between starts: %v", gaps)
			if gaps[len(gaps)-1] <= gaps[0] {
				t.Errorf("the intervals between starts do not grow: %v", gaps)
			}

			restarted := events(t, h, "", store.EventPluginRestarted)
			if c.restartEvents {
				if len(restarted) != maxRestarts {
					t.Errorf("%d plugin.restarted events, want %d", len(restarted), maxRestarts)
				}
				for i, e := range restarted {
					if n, _ := e.Payload["restarts"].(float64); int(n) != i+1 {
						t.Errorf("plugin.restarted event %d says restarts %v, want %d", i, e.Payload["restarts"], i+1)
					}
				}
			} else if len(restarted) != 0 {
				t.Errorf("%d plugin.restarted events for a plugin that never started", len(restarted))
			}
		})
	}
}
