package host

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// TestTraceOfACallIncludesThePlugin: a call to a real subprocess plugin
// yields one trace: the call's span, its policy, validation and dispatch
// stages under it, the plugin's handler span under dispatch and the
// handler's own span under that. The started event and the plugin's log
// line carry the trace id.
func TestTraceOfACallIncludesThePlugin(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var logs proctest.Buffer
	opts := testOptions(t)
	opts.TracerProvider = tp
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	cfg := &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{testPlugin("good", "good", nil)}}
	h := runHost(t, cfg, opts)

	res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "traced"})
	if err != nil || !res.OK {
		t.Fatalf("traced: %+v, %v", res, err)
	}
	spans := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.Name] = s
	}
	call := spans["call traced"]
	tid := call.SpanContext.TraceID()
	parents := map[string]string{"policy": "call traced", "validation": "call traced", "dispatch": "call traced",
		"execute_tool traced": "dispatch", "inner work": "execute_tool traced"}
	for child, parent := range parents {
		c, p := spans[child], spans[parent]
		switch {
		case c.Name == "":
			t.Errorf("no span %q among %d", child, len(spans))
		case c.SpanContext.TraceID() != tid:
			t.Errorf("%q is in trace %s, the call in %s", child, c.SpanContext.TraceID(), tid)
		case c.Parent.SpanID() != p.SpanContext.SpanID():
			t.Errorf("%q's parent is %s, want %q (%s)", child, c.Parent.SpanID(), parent, p.SpanContext.SpanID())
		}
	}
	if call.Parent.IsValid() || len(spans) != 6 {
		t.Errorf("the call's span has a parent (%v), or the trace has %d spans, want 6", call.Parent.IsValid(), len(spans))
	}

	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := h.Events().List(context.Background(), store.EventFilter{Type: store.EventCallStarted})
	if err != nil || len(evs) != 1 || evs[0].Payload["trace_id"] != tid.String() {
		t.Errorf("started events %+v (%v), want one with trace_id %s", evs, err, tid)
	}
	proctest.Eventually(t, "the plugin's line carries the trace id", func() bool {
		return regexp.MustCompile(`traced call: .*\btrace_id=` + tid.String()).MatchString(logs.String())
	})
}

// TestTraceOfARefusedCall: a call of a tool outside the caller's role ends
// at its policy stage, both spans failed with the code, and nothing is
// dispatched.
func TestTraceOfARefusedCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	opts := testOptions(t)
	opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	h := runHost(t, &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{testPlugin("good", "good", nil)}}, opts)
	if _, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "no_such_tool"}); toolhost.CodeOf(err) != toolhost.CodeUnknownTool {
		t.Fatalf("err %v, want unknown_tool", err)
	}
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
		if s.Status.Code != codes.Error || !strings.Contains(s.Status.Description, "unknown tool") {
			t.Errorf("span %q has status %+v, want the error", s.Name, s.Status)
		}
	}
	if strings.Join(names, ",") != "policy,call no_such_tool" {
		t.Errorf("spans %v, want policy then the call", names)
	}
}

// TestTraceContextReachesAnMCPServer: a traced call of an MCP server's tool
// carries the dispatch span's context in _meta (traceparent, SEP-414), so
// the server's spans can join the trace; an untraced call carries none.
func TestTraceContextReachesAnMCPServer(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	opts := testOptions(t)
	opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	traced := runHost(t, &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{testMCP("gomcp", "good")}}, opts)
	res, err := traced.Call(context.Background(), &toolhost.CallRequest{Tool: "meta"})
	if err != nil || !res.OK {
		t.Fatalf("meta: %+v, %v", res, err)
	}
	var meta map[string]any
	if err := json.Unmarshal([]byte(res.Stdout), &meta); err != nil {
		t.Fatalf("meta %q: %v", res.Stdout, err)
	}
	var dispatch tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "dispatch" {
			dispatch = s
		}
	}
	want := fmt.Sprintf("00-%s-%s-01", dispatch.SpanContext.TraceID(), dispatch.SpanContext.SpanID())
	if meta["traceparent"] != want {
		t.Errorf("the server got _meta %v, want traceparent %s", meta, want)
	}

	res, err = startHost(t, testMCP("gomcp", "good")).Call(context.Background(), &toolhost.CallRequest{Tool: "meta"})
	if err != nil || strings.Contains(res.Stdout, "traceparent") {
		t.Errorf("an untraced call sent _meta %s (%v)", res.Stdout, err)
	}
}

// TestTracingOffAllocatesNothing: with tracing off, a call's stages start
// and end nothing, and allocate nothing.
func TestTracingOffAllocatesNothing(t *testing.T) {
	c := &call{h: &Host{}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { tracingHooks(c, ctx) }); n != 0 {
		t.Fatalf("%v allocations per call with tracing off", n)
	}
}

// tracingHooks are the tracing hooks of one call's stages.
func tracingHooks(c *call, ctx context.Context) {
	for _, name := range []string{"policy", "validation", "dispatch"} {
		_, span := c.stage(ctx, name)
		endStage(span, nil)
	}
}

// BenchmarkTracing is what tracing costs a call to an in-process no-op
// group (no plugin process, so the pipeline alone): off, on (every call
// sampled, batched to an exporter that drops them) and the off hooks alone.
func BenchmarkTracing(b *testing.B) {
	noop := &sdk.Group{ID: "probe", Description: "Probe.", Tools: []sdk.Tool{
		sdk.NewTool("noop", "Do nothing.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return nil, nil }),
	}}
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"off", nil},
		{"on", sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h, err := New(&config.Config{}, &Options{TracerProvider: tc.tp, DisableMetrics: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = h.Close() })
			if err := h.Modules().Register(context.Background(), noop); err != nil {
				b.Fatal(err)
			}
			req := &toolhost.CallRequest{Tool: "noop"}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Call(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("hooks-off", func(b *testing.B) {
		c := &call{h: &Host{}}
		b.ReportAllocs()
		for b.Loop() {
			tracingHooks(c, context.Background())
		}
	})
}
