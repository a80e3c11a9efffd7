package agents_test

import (
	"testing"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestAgentTurnsAreTraces: with the host tracing, each turn of an agent is
// the root of a trace holding its model request and its tool calls, and
// the plugin's span lies under the call.
func TestAgentTurnsAreTraces(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	e := start(t, `{"roles": {"runner": [
	  {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo hi"}}]},
	  {"content": "done"}
	]}}`, "", "", "", func(_ *config.Config, o *host.Options) {
		o.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	})
	e.createRole("runner", "command")
	e.wait(e.spawn("runner", "run").ID)

	spans := exp.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID().String()] = s
	}
	parentName := func(s tracetest.SpanStub) string { return byID[s.Parent.SpanID().String()].Name }
	var turns, chats, calls, plugin int
	for _, s := range spans {
		switch s.Name {
		case "agent turn":
			turns++
			if s.Parent.IsValid() {
				t.Errorf("a turn has a parent, %s", s.Parent.SpanID())
			}
		case "chat":
			chats++
			if parentName(s) != "agent turn" {
				t.Errorf("a model request's parent is %q, want the turn", parentName(s))
			}
		case "call run_command":
			calls++
			if parentName(s) != "agent turn" {
				t.Errorf("the call's parent is %q, want the turn", parentName(s))
			}
		case "execute_tool run_command":
			plugin++
			if parentName(s) != "dispatch" {
				t.Errorf("the plugin's span's parent is %q, want dispatch", parentName(s))
			}
		}
	}
	if turns != 2 || chats != 2 || calls != 1 || plugin != 1 {
		t.Errorf("%d turns, %d model requests, %d calls, %d plugin spans; want 2, 2, 1, 1", turns, chats, calls, plugin)
	}
}
