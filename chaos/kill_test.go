package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// TestSIGKILLUnder1000Calls SIGKILLs a plugin while 1,000 calls are in
// flight in it: every call returns within 1 s of the kill with plugin_exited,
// the host goes on serving another plugin, the group comes back with a new
// process, and every call's tool_call.started event has exactly one terminal
// event.
func TestSIGKILLUnder1000Calls(t *testing.T) {
	const (
		calls = 1000
		bound = time.Second // every call returns within 1 s of the kill: no caller waits on a dead plugin
	)
	h := startHost(t, newConfig(t, pluginBlock("victim", behaveGood, nil), pluginBlock("bystander", behaveGood, nil)), testOptions(t))
	agent := newAgent(t, h, "chaos-kill", "victim", "bystander")
	old := pluginStatus(h, "victim")
	if old.State != host.StateRunning || old.Pid == 0 {
		t.Fatalf("victim = %+v", old)
	}

	type outcome struct {
		end time.Time
		err error
	}
	done := make(chan outcome, calls)
	for range calls {
		go func() {
			// Far longer than the test: only the kill can end these calls.
			_, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "victim_sleep", Arguments: []byte(`{"ms":600000}`),
				Context: toolhost.CallContext{AgentID: agent}})
			done <- outcome{time.Now(), err}
		}()
	}
	proctest.Eventually(t, fmt.Sprintf("%d sleep calls running in the plugin", calls), func() bool {
		res, err := call(h, "victim_running", nil)
		if err != nil {
			t.Fatalf("victim_running: %v", err)
		}
		n, _ := strconv.Atoi(res.Stdout)
		return n == calls
	})

	killed := time.Now()
	if err := syscall.Kill(old.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	wrong := map[string]int{}
	giveUp := time.After(30 * time.Second) // only so that a broken host fails rather than hangs
	for i := range calls {
		select {
		case o := <-done:
			slowest = max(slowest, o.end.Sub(killed))
			if !errors.Is(o.err, toolhost.ErrPluginExited) {
				wrong[fmt.Sprint(o.err)]++
			}
		case <-giveUp:
			t.Fatalf("%d of %d calls still running 30s after the kill", calls-i, calls)
		}
	}
	t.Logf("%d calls in flight at the kill: slowest returned %s after it", calls, slowest)
	if len(wrong) > 0 {
		t.Errorf("calls not failed with plugin_exited: %v", wrong)
	}
	if slowest > bound {
		t.Errorf("the slowest call returned %s after the kill, beyond the bound of %s", slowest, bound)
	}

	if res, err := call(h, "bystander_noop", nil); err != nil || !res.OK {
		t.Fatalf("the host stopped serving the other plugin: %+v, %v", res, err)
	}
	proctest.Eventually(t, "the victim's group is back with a new process", func() bool {
		for _, g := range h.Modules().Groups() {
			if g.ID == "victim" && g.Source.Pid != 0 && g.Source.Pid != old.Pid && g.Source.State == host.StateRunning {
				return true
			}
		}
		return false
	})
	t.Logf("victim back: %+v after %s", pluginStatus(h, "victim"), time.Since(killed))
	if st := pluginStatus(h, "victim"); st.Restarts != 1 {
		t.Errorf("victim restarts = %d, want 1", st.Restarts)
	}
	if res, err := call(h, "victim_noop", nil); err != nil || !res.OK {
		t.Fatalf("a call to the restarted plugin: %+v, %v", res, err)
	}

	// Every call has one started event and exactly one terminal event, a
	// failure with plugin_exited.
	type tally struct{ started, completed, failed int }
	byCall := map[string]*tally{}
	for _, e := range events(t, h, agent, "tool_call.") {
		c := byCall[e.CallID]
		if c == nil {
			c = &tally{}
			byCall[e.CallID] = c
		}
		switch e.Type {
		case store.EventCallStarted:
			c.started++
		case store.EventCallCompleted:
			c.completed++
		case store.EventCallFailed:
			c.failed++
			if e.Payload["code"] != string(toolhost.CodePluginExited) {
				t.Errorf("call %s failed with code %v, want plugin_exited", e.CallID, e.Payload["code"])
			}
		}
	}
	if len(byCall) != calls {
		t.Errorf("events name %d calls, want %d", len(byCall), calls)
	}
	bad := 0
	for id, c := range byCall {
		if c.started != 1 || c.completed+c.failed != 1 {
			if bad++; bad <= 5 {
				t.Errorf("call %s: %d started, %d completed, %d failed events; want 1 started and 1 terminal", id, c.started, c.completed, c.failed)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d calls without exactly one started and one terminal event", bad)
	}
}

// TestCrashesLeakNothing: a plugin killed again and again and restarted
// each time leaves no goroutine (its connection's) and no socket file behind.
func TestCrashesLeakNothing(t *testing.T) {
	cfg := newConfig(t, pluginBlock("phoenix", behaveGood, nil))
	cfg.Plugins[0].Restart, cfg.Plugins[0].MaxRestarts = "always", 100
	sockets := cfg.Plugins[0].Env["TMPDIR"]
	h := startHost(t, cfg, testOptions(t))
	settled := func() int {
		runtime.GC()
		return runtime.NumGoroutine()
	}
	before := settled()
	const kills = 5
	for i := range kills {
		old := pluginStatus(h, "phoenix")
		if err := syscall.Kill(old.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		proctest.Eventually(t, "the plugin is back", func() bool {
			st := pluginStatus(h, "phoenix")
			return st.State == host.StateRunning && st.Pid != old.Pid && st.Restarts == i+1
		})
	}
	var after int
	proctest.Eventually(t, "the goroutines to settle", func() bool { after = settled(); return after <= before+2 })
	t.Logf("goroutines: %d before %d kills, %d after", before, kills, after)
	entries, err := os.ReadDir(sockets)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 1 { // the running plugin's own socket
		t.Errorf("%d files left in the plugins' TMPDIR after %d kills: %v", len(entries), kills, entries)
	}
}
