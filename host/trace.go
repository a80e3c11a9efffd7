package host

import (
	"context"
	"os"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/telemetry"
	"github.com/toolhost/toolhost/redact"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing: with a tracer provider (Options.TracerProvider, or the config's
// telemetry block), each call is a span, "call <tool>", with a child per
// stage of the pipeline: policy, validation, approval (when the tool needs
// one), audit (strict mode's commit) and dispatch. A plugin's spans join
// under dispatch (internal/protocol). With none, h.tracer is nil and no stage
// starts anything.

// tracerName names the host's tracer.
const tracerName = "github.com/toolhost/toolhost/host"

// setupTracing takes Options.TracerProvider, or makes one from the
// telemetry block and the environment (stopped by Close), or leaves tracing
// off.
func (h *Host) setupTracing() error {
	h.tracing = h.opts.TracerProvider
	if h.tracing == nil {
		tp, err := telemetry.NewProvider(context.Background(), telemetry.Resolve(h.cfg.Telemetry, os.Getenv))
		if err != nil {
			return toolhost.Errorf(toolhost.CodeValidation, "host: %w", err)
		}
		if tp == nil {
			return nil
		}
		h.tracing, h.stopTrace = tp, tp.Shutdown
	}
	h.tracer = h.tracing.Tracer(tracerName)
	return nil
}

// TracerProvider returns the provider of the host's spans, nil when tracing
// is off; the agent runtime and the server start theirs from it.
func (h *Host) TracerProvider() trace.TracerProvider { return h.tracing }

// stage starts the span of one stage of c, a child of the call's span in
// ctx; a no-op span when tracing is off.
func (c *call) stage(ctx context.Context, name string) (context.Context, trace.Span) {
	if c.h.tracer == nil {
		return ctx, noop.Span{}
	}
	return c.h.tracer.Start(ctx, name)
}

// endStage ends a stage's span, failed when err is set (its message
// redacted).
func endStage(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		msg, _ := redact.String(err.Error())
		span.SetStatus(codes.Error, msg)
		span.SetAttributes(attribute.String("toolhost.code", string(toolhost.CodeOf(err))))
	}
	span.End()
}

// endCall ends the call's span with what the call came to.
func (c *call) endCall(span trace.Span) {
	attrs := []attribute.KeyValue{attribute.String("toolhost.call_id", c.req.Context.CallID), attribute.Bool("toolhost.replayed", c.replayed)}
	if c.req.Context.Role != "" {
		attrs = append(attrs, attribute.String("toolhost.role", c.req.Context.Role))
	}
	if c.req.Context.AgentID != "" {
		attrs = append(attrs, attribute.String("toolhost.agent_id", c.req.Context.AgentID))
	}
	if c.found {
		attrs = append(attrs, attribute.String("toolhost.group", c.tool.group.Spec.ID))
	}
	span.SetAttributes(attrs...)
	switch {
	case c.err != nil:
		endStage(span, c.err)
		return
	case !c.res.OK && c.res.Error != nil:
		span.SetStatus(codes.Error, c.res.Error.Message)
		span.SetAttributes(attribute.String("toolhost.code", string(c.res.Error.Code)))
	case !c.res.OK:
		span.SetStatus(codes.Error, "the tool failed")
	}
	span.End()
}

// traceID is the id of the trace a call runs in, "" when it runs in none.
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// logIDs are the key-value pairs that tie a log line to its call: the call
// id, and the trace id when the call is traced, then more.
func (c *call) logIDs(more ...any) []any {
	ids := []any{"call_id", c.req.Context.CallID}
	if c.traceID != "" {
		ids = append(ids, "trace_id", c.traceID)
	}
	return append(ids, more...)
}
