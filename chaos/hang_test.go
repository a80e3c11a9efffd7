package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// TestHangingPluginTimesOut calls a tool that blocks until its context ends,
// several calls at once: each fails with timeout, none before the configured
// timeout nor later than a generous margin after it, the plugin sees each
// call's context cancelled, and it goes on serving.
func TestHangingPluginTimesOut(t *testing.T) {
	const (
		concurrent = 16
		timeout    = 300 * time.Millisecond
		margin     = 20 * time.Second // generous, for a loaded machine: the bound is on correctness (the call never returns by itself), not speed
	)
	cases := []struct {
		name string
		set  func(p *config.Plugin) // configures the timeout
	}{
		{"tool block timeout", func(p *config.Plugin) {
			p.Tools = map[string]config.ToolSettings{"hanger_hang": {Timeout: timeout}}
		}},
		{"group limits timeout", func(p *config.Plugin) { p.Limits.Timeout = timeout }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cancelDir := t.TempDir()
			p := pluginBlock("hanger", behaveGood, map[string]string{cancelDirEnv: cancelDir})
			c.set(&p)
			cfg := newConfig(t, p) // its global timeout is a minute: the block's must win
			h := startHost(t, cfg, testOptions(t))
			agent := newAgent(t, h, "chaos-hang", "hanger")

			type outcome struct {
				id   string
				took time.Duration
				err  error
			}
			done := make(chan outcome, concurrent)
			for i := range concurrent {
				id := fmt.Sprintf("hang-%02d", i)
				go func() {
					start := time.Now()
					_, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "hanger_hang",
						Context: toolhost.CallContext{CallID: id, AgentID: agent}})
					done <- outcome{id, time.Since(start), err}
				}()
			}
			var fastest, slowest time.Duration
			giveUp := time.After(proctest.Patience)
			for i := range concurrent {
				var o outcome
				select {
				case o = <-done:
				case <-giveUp:
					t.Fatalf("%d of %d calls still running after %s", concurrent-i, concurrent, proctest.Patience)
				}
				if i == 0 || o.took < fastest {
					fastest = o.took
				}
				slowest = max(slowest, o.took)
				if !errors.Is(o.err, toolhost.ErrTimeout) {
					t.Errorf("call %s: err = %v, want timeout", o.id, o.err)
				}
				if o.took < timeout || o.took > timeout+margin {
					t.Errorf("call %s returned after %s, want between %s and %s", o.id, o.took, timeout, timeout+margin)
				}
			}
			t.Logf("%d calls with a timeout of %s returned after %s to %s", concurrent, timeout, fastest, slowest)

			for i := range concurrent {
				id := fmt.Sprintf("hang-%02d", i)
				var why []byte
				proctest.Eventually(t, "the plugin saw the context of "+id+" end", func() bool {
					why, _ = os.ReadFile(filepath.Join(cancelDir, id))
					return len(why) > 0
				})
				if string(why) != context.Canceled.Error() {
					t.Errorf("the plugin saw %s end with %q, want %q", id, why, context.Canceled)
				}
			}
			failed := events(t, h, agent, store.EventCallFailed)
			if len(failed) != concurrent {
				t.Errorf("%d tool_call.failed events, want %d", len(failed), concurrent)
			}
			for _, e := range failed {
				if e.Payload["code"] != string(toolhost.CodeTimeout) {
					t.Errorf("call %s failed with code %v, want timeout", e.CallID, e.Payload["code"])
				}
			}
			proctest.Eventually(t, "no hang call left running in the plugin, which still serves", func() bool {
				res, err := call(h, "hanger_running", nil)
				if err != nil {
					t.Fatalf("the plugin after the timeouts: %v", err)
				}
				return res.Stdout == "0"
			})
		})
	}
}
