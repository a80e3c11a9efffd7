package protocol

import (
	"context"
	"sync"
	"time"

	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/internal/protocol/pb"
	"github.com/toolhost/toolhost/redact"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// A traced call crosses the wire both ways (protocol minor 5): the host
// sends its dispatch span's W3C trace context in CallContext, the plugin
// runs the handler under a span that is its child and sends back the spans
// the call recorded, and the host replays them into its own trace. So a
// plugin needs no exporter, no collector address and no network (it is
// usually sandboxed without one), and the host's bounds hold whatever a
// plugin sends.

// Bounds on what the host takes from a plugin for one call.
const (
	maxSpans          = 64   // spans per call; more are dropped
	maxSpanAttributes = 32   // attributes per span or event
	maxSpanEvents     = 16   // events per span
	maxSpanName       = 128  // bytes of a span's or an event's name, or a key
	maxSpanValue      = 1024 // bytes of a string value or a status message
)

// instrumentation names the tracer of the spans this package starts or
// replays.
const instrumentation = "github.com/toolhost/toolhost/plugin"

var traceContext = propagation.TraceContext{}

// TraceCarrier is the W3C trace context of ctx's span (traceparent and,
// when set, tracestate) when the span is sampled, nil otherwise: an
// unsampled call sends nothing, so costs its module nothing.
func TraceCarrier(ctx context.Context) propagation.MapCarrier {
	if sc := trace.SpanContextFromContext(ctx); !sc.IsValid() || !sc.IsSampled() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier
}

// injectTrace puts ctx's sampled span context into c, and reports whether
// there was one.
func injectTrace(ctx context.Context, c *pb.CallContext) bool {
	carrier := TraceCarrier(ctx)
	if carrier == nil {
		return false
	}
	c.Traceparent, c.Tracestate = carrier["traceparent"], carrier["tracestate"]
	return true
}

// extractTrace returns ctx with the host's span context from c as its
// remote parent, and whether c carried one.
func extractTrace(ctx context.Context, c *pb.CallContext) (context.Context, bool) {
	if c.GetTraceparent() == "" {
		return ctx, false
	}
	ctx = traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": c.GetTraceparent(), "tracestate": c.GetTracestate()})
	return ctx, trace.SpanContextFromContext(ctx).IsValid()
}

// recorder is a plugin's tracer provider: it keeps the spans started under
// a traced call (from the handler's context) for that call's response.
type recorder struct {
	tp    *sdktrace.TracerProvider
	mu    sync.Mutex
	calls map[trace.SpanID]*callSpans // every open span of a traced call
}

// callSpans are the finished spans of one call, at most maxSpans.
type callSpans struct {
	spans []*pb.Span
	done  bool
}

type callSpansKey struct{}

// pluginTracing is the plugin process's recorder, made at its first traced
// call or when [Serve] asks for its provider.
var pluginTracing = sync.OnceValue(func() *recorder {
	r := &recorder{calls: map[trace.SpanID]*callSpans{}}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())), sdktrace.WithSpanProcessor(r))
	return r
})

// tracerProvider is a plugin's tracer provider: spans a handler starts from
// its context reach the host with the call's response, as children of the
// handler's span. [Serve] makes it the global provider of a plugin process.
func tracerProvider() trace.TracerProvider { return pluginTracing().tp }

// begin starts the handler's span of a traced call; end ends it, with an
// error status when the call failed, and returns the call's spans.
func (r *recorder) begin(ctx context.Context, tool string) (context.Context, func(failed string) []*pb.Span) {
	cs := &callSpans{}
	ctx, span := r.tp.Tracer(instrumentation).Start(context.WithValue(ctx, callSpansKey{}, cs), "execute_tool "+tool,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", tool)))
	return ctx, func(failed string) []*pb.Span {
		if failed != "" {
			span.SetStatus(codes.Error, failed)
		}
		span.End()
		r.mu.Lock()
		defer r.mu.Unlock()
		cs.done = true
		return cs.spans
	}
}

// OnStart ties a span started under a traced call's context to the call.
func (r *recorder) OnStart(parent context.Context, s sdktrace.ReadWriteSpan) {
	if cs, ok := parent.Value(callSpansKey{}).(*callSpans); ok {
		r.mu.Lock()
		if !cs.done {
			r.calls[s.SpanContext().SpanID()] = cs
		}
		r.mu.Unlock()
	}
}

// OnEnd keeps a finished span for its call's response, unless the call has
// answered already or has its fill of spans.
func (r *recorder) OnEnd(s sdktrace.ReadOnlySpan) {
	id := s.SpanContext().SpanID()
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, ok := r.calls[id]
	if !ok {
		return
	}
	delete(r.calls, id)
	if !cs.done && len(cs.spans) < maxSpans {
		cs.spans = append(cs.spans, spanToProto(s))
	}
}

// Shutdown does nothing: the spans leave with their calls.
func (r *recorder) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing: the spans leave with their calls.
func (r *recorder) ForceFlush(context.Context) error { return nil }

func spanToProto(s sdktrace.ReadOnlySpan) *pb.Span {
	sid, pid := s.SpanContext().SpanID(), s.Parent().SpanID()
	out := &pb.Span{
		SpanId: sid[:], ParentSpanId: pid[:], Name: s.Name(), Kind: int32(s.SpanKind()),
		StartUnixNano: s.StartTime().UnixNano(), EndUnixNano: s.EndTime().UnixNano(),
		Attributes: attributesToProto(s.Attributes()), StatusCode: int32(s.Status().Code), StatusMessage: s.Status().Description,
	}
	for _, e := range s.Events() {
		out.Events = append(out.Events, &pb.SpanEvent{Name: e.Name, TimeUnixNano: e.Time.UnixNano(), Attributes: attributesToProto(e.Attributes)})
	}
	return out
}

func attributesToProto(kvs []attribute.KeyValue) []*pb.Attribute {
	out := make([]*pb.Attribute, 0, len(kvs))
	for _, kv := range kvs {
		a := &pb.Attribute{Key: string(kv.Key)}
		switch kv.Value.Type() {
		case attribute.BOOL:
			a.Value = &pb.Attribute_BoolValue{BoolValue: kv.Value.AsBool()}
		case attribute.INT64:
			a.Value = &pb.Attribute_IntValue{IntValue: kv.Value.AsInt64()}
		case attribute.FLOAT64:
			a.Value = &pb.Attribute_DoubleValue{DoubleValue: kv.Value.AsFloat64()}
		default:
			a.Value = &pb.Attribute_StringValue{StringValue: kv.Value.Emit()}
		}
		out = append(out, a)
	}
	return out
}

// replay records a plugin's spans of one call in the host's trace, under
// the dispatch span in ctx. The plugin is not trusted: only spans that
// descend from the dispatch span are taken, at most maxSpans of them, in
// tree order (so a cycle or a foreign parent leads nowhere); names, keys,
// values and counts are cut to the bounds above, strings redacted, and
// times held to the dispatch's [from, to]. Each replayed span gets a fresh
// id from the host's provider and the host's trace id, so a plugin cannot
// write into another trace.
func replay(ctx context.Context, spans []*pb.Span, from, to time.Time) {
	dispatch := trace.SpanFromContext(ctx)
	if !dispatch.IsRecording() || len(spans) == 0 {
		return
	}
	children := map[string][]*pb.Span{}
	for _, s := range spans {
		children[string(s.GetParentSpanId())] = append(children[string(s.GetParentSpanId())], s)
	}
	tracer := dispatch.TracerProvider().Tracer(instrumentation)
	root := dispatch.SpanContext().SpanID()
	type node struct {
		ctx context.Context
		id  string
	}
	queue, n := []node{{ctx, string(root[:])}}, 0
	for len(queue) > 0 && n < maxSpans {
		parent := queue[0]
		queue = queue[1:]
		kids := children[parent.id]
		// Each id's children are taken once: a span naming itself or a
		// descendant as its parent cannot loop.
		delete(children, parent.id)
		for _, s := range kids {
			if n == maxSpans {
				break
			}
			n++
			opts := []trace.SpanStartOption{trace.WithTimestamp(clampTime(s.GetStartUnixNano(), from, to)),
				trace.WithAttributes(attributesFromProto(s.GetAttributes())...)}
			if k := trace.SpanKind(s.GetKind()); k >= trace.SpanKindInternal && k <= trace.SpanKindConsumer {
				opts = append(opts, trace.WithSpanKind(k))
			}
			sctx, span := tracer.Start(parent.ctx, cutString(s.GetName(), maxSpanName), opts...)
			for _, e := range s.GetEvents()[:min(len(s.GetEvents()), maxSpanEvents)] {
				span.AddEvent(cutString(e.GetName(), maxSpanName), trace.WithTimestamp(clampTime(e.GetTimeUnixNano(), from, to)),
					trace.WithAttributes(attributesFromProto(e.GetAttributes())...))
			}
			switch codes.Code(s.GetStatusCode()) {
			case codes.Error:
				span.SetStatus(codes.Error, cutString(s.GetStatusMessage(), maxSpanValue))
			case codes.Ok:
				span.SetStatus(codes.Ok, "")
			}
			span.End(trace.WithTimestamp(clampTime(s.GetEndUnixNano(), from, to)))
			if id := string(s.GetSpanId()); children[id] != nil {
				queue = append(queue, node{sctx, id})
			}
		}
	}
}

func attributesFromProto(in []*pb.Attribute) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, min(len(in), maxSpanAttributes))
	for _, a := range in[:min(len(in), maxSpanAttributes)] {
		k := cutString(a.GetKey(), maxSpanName)
		switch v := a.GetValue().(type) {
		case *pb.Attribute_BoolValue:
			out = append(out, attribute.Bool(k, v.BoolValue))
		case *pb.Attribute_IntValue:
			out = append(out, attribute.Int64(k, v.IntValue))
		case *pb.Attribute_DoubleValue:
			out = append(out, attribute.Float64(k, v.DoubleValue))
		case *pb.Attribute_StringValue:
			out = append(out, attribute.String(k, cutString(v.StringValue, maxSpanValue)))
		}
	}
	return out
}

// cutString redacts secrets from s, then cuts it to max bytes.
func cutString(s string, max int) string {
	s, _ = redact.String(s)
	return output.Limit(s, 0, max, false).Text
}

func clampTime(unixNano int64, from, to time.Time) time.Time {
	t := time.Unix(0, unixNano)
	switch {
	case t.Before(from):
		return from
	case t.After(to):
		return to
	}
	return t
}
