package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
)

// gathered returns the value (a counter's, a gauge's or a histogram's
// count) of the series of family name whose labels are exactly labels
// (name=value, in the family's label order), and whether there is one.
func gathered(t *testing.T, m *Metrics, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			var got []string
			for _, l := range s.GetLabel() {
				got = append(got, l.GetName()+"="+l.GetValue())
			}
			if slices.Equal(got, labels) {
				return s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// TestMetricsOfAKilledPlugin: a call failed by its plugin's death counts as
// plugin_exited, and the plugin's restart and state show at the next scrape.
func TestMetricsOfAKilledPlugin(t *testing.T) {
	env, reached := sleepStarts(t)
	h := startHost(t, testPlugin("good", "good", env))
	if v, ok := gathered(t, h.Metrics(), "toolhost_plugin_state", "plugin=good", "state=running"); !ok || v != 1 {
		t.Fatalf("running before the kill = %v %v", v, ok)
	}
	g, _ := group(h, "testgroup")
	inflight := make(chan error, 1)
	go func() {
		_, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "sleep", Arguments: []byte(`{"ms":60000}`)})
		inflight <- err
	}()
	proctest.Eventually(t, "the call is in flight", func() bool {
		v, _ := gathered(t, h.Metrics(), "toolhost_tool_calls_in_flight")
		return v == 1
	})
	reached()
	if err := syscall.Kill(g.Source.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-inflight; !errors.Is(err, toolhost.ErrPluginExited) {
		t.Fatalf("in-flight call: %v", err)
	}
	proctest.Eventually(t, "the plugin is back", func() bool { return plugin(h, "good").State == StateRunning && plugin(h, "good").Restarts == 1 })
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"toolhost_tool_calls_total", []string{"code=plugin_exited", "group=testgroup", "role=", "tool=sleep"}, 1},
		{"toolhost_tool_call_duration_seconds", []string{"group=testgroup"}, 1},
		{"toolhost_tool_calls_in_flight", nil, 0},
		{"toolhost_plugin_restarts_total", []string{"plugin=good"}, 1},
		{"toolhost_plugin_state", []string{"plugin=good", "state=running"}, 1},
		{"toolhost_plugin_state", []string{"plugin=good", "state=restarting"}, 0},
	} {
		if v, ok := gathered(t, h.Metrics(), c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s{%s} = %v (present %v), want %v", c.name, strings.Join(c.labels, ","), v, ok, c.want)
		}
	}
}

// TestMetricsOutcomeCode: the code label is ok or one of toolhost.Codes,
// whatever code a module sends.
func TestMetricsOutcomeCode(t *testing.T) {
	for _, c := range []struct {
		name string
		res  *toolhost.Result
		err  error
		want toolhost.Code
	}{
		{"ok", &toolhost.Result{OK: true}, nil, codeOK},
		{"a failed result", &toolhost.Result{Error: &toolhost.ErrorInfo{Code: toolhost.CodePolicy}}, nil, toolhost.CodePolicy},
		{"a result with a module's own code", &toolhost.Result{Error: &toolhost.ErrorInfo{Code: "disk_on_fire"}}, nil, toolhost.CodeToolExec},
		{"a failed result without an error", &toolhost.Result{}, nil, toolhost.CodeToolExec},
		{"an error", nil, toolhost.Errorf(toolhost.CodeTimeout, "late"), toolhost.CodeTimeout},
		{"an error with a module's own code", nil, &toolhost.Error{Code: "disk_on_fire"}, toolhost.CodeInternal},
		{"an error without a code", nil, errors.New("plain"), toolhost.CodeInternal},
	} {
		if got := outcomeCode(&call{res: c.res, err: c.err}); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestMetricsCallPathAllocatesNothing: once a call's series is known,
// counting a call allocates nothing.
func TestMetricsCallPathAllocatesNothing(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	v, err := h.callerView(&toolhost.CallContext{})
	if err != nil {
		t.Fatal(err)
	}
	c := &call{h: h, req: toolhost.CallRequest{Tool: "echo"}, start: time.Now(), res: &toolhost.Result{OK: true}}
	c.tool, c.found = v.tools["echo"]
	if !c.found {
		t.Fatal("no echo")
	}
	if n := testing.AllocsPerRun(1000, func() {
		h.metrics.callStarted()
		h.metrics.callEnded(c)
	}); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
	if v, _ := gathered(t, h.Metrics(), "toolhost_tool_calls_total", "code=ok", "group=probe", "role=", "tool=echo"); v != 1001 {
		t.Fatalf("counted %v calls, want 1001", v)
	}
}

// BenchmarkMetricsCall is what metrics add to a call: callStarted and
// callEnded of a known series.
func BenchmarkMetricsCall(b *testing.B) {
	h, err := New(&config.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close() })
	c := &call{h: h, req: toolhost.CallRequest{Tool: "echo", Context: toolhost.CallContext{Role: "developer"}}, start: time.Now(),
		res: &toolhost.Result{OK: true}, found: true, tool: viewTool{group: &Group{Spec: toolhost.GroupSpec{ID: "probe"}}}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.metrics.callStarted()
			h.metrics.callEnded(c)
		}
	})
}
