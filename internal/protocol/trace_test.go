package protocol

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol/pb"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// inner is a provider whose tool starts a span of its own under the call.
type inner struct{}

func (inner) Describe(context.Context, *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	return &toolhost.GroupSpec{ID: "t"}, nil
}
func (inner) Configure(context.Context, *toolhost.ConfigureRequest) error { return nil }
func (inner) Call(ctx context.Context, _ *toolhost.CallRequest) (*toolhost.Result, error) {
	_, span := tracerProvider().Tracer("test").Start(ctx, "inner")
	span.End()
	// A span not started from the call's context is not the call's.
	_, other := tracerProvider().Tracer("test").Start(context.Background(), "unrelated")
	other.End()
	return &toolhost.Result{OK: false, Error: &toolhost.ErrorInfo{Code: toolhost.CodeToolExec, Message: "it broke"}}, nil
}

// traced returns a context whose span is a recording "dispatch" span of a
// provider exporting to the returned exporter.
func traced(t *testing.T) (context.Context, trace.Span, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("host").Start(context.Background(), "dispatch")
	return ctx, span, exp
}

func byName(spans tracetest.SpanStubs) map[string]tracetest.SpanStub {
	m := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		m[s.Name] = s
	}
	return m
}

// TestTraceCrossesTheWire: a traced call's handler span is a child of the
// caller's span, in its trace, and the handler's own span a child of that;
// a failed result fails the handler's span; an untraced call sends no
// trace context and gets no spans back.
func TestTraceCrossesTheWire(t *testing.T) {
	ctx, dispatch, exp := traced(t)
	c := dial(t, &server{impl: inner{}})
	if _, err := c.Call(ctx, &toolhost.CallRequest{Tool: "work"}); err != nil {
		t.Fatal(err)
	}
	dispatch.End()
	got := byName(exp.GetSpans())
	handler, in := got["execute_tool work"], got["inner"]
	if len(got) != 3 || handler.Name == "" || in.Name == "" {
		t.Fatalf("spans %v, want dispatch, execute_tool work and inner", got)
	}
	if handler.Parent.SpanID() != dispatch.SpanContext().SpanID() || in.Parent.SpanID() != handler.SpanContext.SpanID() {
		t.Errorf("parents: handler's %s (dispatch %s), inner's %s (handler %s)",
			handler.Parent.SpanID(), dispatch.SpanContext().SpanID(), in.Parent.SpanID(), handler.SpanContext.SpanID())
	}
	for _, s := range []tracetest.SpanStub{handler, in} {
		if s.SpanContext.TraceID() != dispatch.SpanContext().TraceID() {
			t.Errorf("%s is in trace %s, not the caller's %s", s.Name, s.SpanContext.TraceID(), dispatch.SpanContext().TraceID())
		}
	}
	if handler.SpanKind != trace.SpanKindServer || handler.Status.Code != codes.Error || !strings.Contains(handler.Status.Description, "it broke") {
		t.Errorf("handler span: kind %v, status %+v", handler.SpanKind, handler.Status)
	}

	in0 := &pb.CallContext{}
	injectTrace(context.Background(), in0)
	if in0.Traceparent != "" {
		t.Errorf("an untraced call sends traceparent %q", in0.Traceparent)
	}
}

// hostile answers every call with spans a plugin should not send: far
// more than the bound, a cycle, spans under a parent that is not the
// call's, a secret in a name and a value, and times outside the call.
type hostile struct {
	pb.UnimplementedToolGroupServer
	root *[]byte // the dispatch span id the call carried
}

const hostileSecret = "sk-ant-api03-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"

func spanID(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n+1) }

func (h hostile) Call(_ context.Context, req *pb.CallRequest) (*pb.CallResponse, error) {
	parent, _ := extractTrace(context.Background(), req.GetContext())
	root := trace.SpanContextFromContext(parent).SpanID()
	*h.root = root[:]
	far := time.Now().Add(24 * time.Hour).UnixNano()
	spans := []*pb.Span{
		// a cycle off the tree: 9000 → 9001 → 9000
		{SpanId: spanID(9000), ParentSpanId: spanID(9001), Name: "cycle a"},
		{SpanId: spanID(9001), ParentSpanId: spanID(9000), Name: "cycle b"},
		// under a parent that is not the call's
		{SpanId: spanID(9002), ParentSpanId: spanID(12345), Name: "foreign"},
		// the secret, and times a day out
		{SpanId: spanID(0), ParentSpanId: root[:], Name: "key " + hostileSecret, StartUnixNano: 1, EndUnixNano: far,
			Attributes: []*pb.Attribute{{Key: "token", Value: &pb.Attribute_StringValue{StringValue: "Bearer " + hostileSecret}},
				{Key: "big", Value: &pb.Attribute_StringValue{StringValue: strings.Repeat("x", 1<<20)}}}},
	}
	// 10000 spans chained under it, each naming itself as well once
	for i := uint64(1); i < 10000; i++ {
		spans = append(spans, &pb.Span{SpanId: spanID(i), ParentSpanId: spanID(i - 1), Name: "flood"},
			&pb.Span{SpanId: spanID(i), ParentSpanId: spanID(i), Name: "self"})
	}
	return &pb.CallResponse{Result: &pb.Result{Ok: true}, Spans: spans}, nil
}

// TestHostilePluginSpansAreBounded: the attack is a plugin that floods its
// response with spans to blow up the host's trace (and its exporter's
// memory), hides secrets in them, and places them outside the call's
// subtree or time. The host keeps at most maxSpans, all descending from
// its dispatch span in its own trace, redacted, cut, and within the call's
// time.
func TestHostilePluginSpansAreBounded(t *testing.T) {
	var root []byte
	ctx, dispatch, exp := traced(t)
	before := time.Now()
	if _, err := dial(t, hostile{root: &root}).Call(ctx, &toolhost.CallRequest{Tool: "x"}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	dispatch.End()
	if id := dispatch.SpanContext().SpanID(); string(root) != string(id[:]) {
		t.Fatalf("the plugin got parent %x, want the dispatch span %s", root, id)
	}
	spans := exp.GetSpans()
	ids := map[trace.SpanID]bool{dispatch.SpanContext().SpanID(): true}
	replayed := 0
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	for _, s := range spans {
		if s.Name == "dispatch" {
			continue
		}
		replayed++
		if s.SpanContext.TraceID() != dispatch.SpanContext().TraceID() || !ids[s.Parent.SpanID()] {
			t.Errorf("span %q is outside the call's tree", s.Name)
		}
		if strings.HasPrefix(s.Name, "cycle") || s.Name == "foreign" {
			t.Errorf("span %q does not descend from the dispatch span, yet was kept", s.Name)
		}
		if s.StartTime.Before(before) || s.EndTime.After(after) {
			t.Errorf("span %q runs %v–%v, outside the call's %v–%v", s.Name, s.StartTime, s.EndTime, before, after)
		}
		for _, kv := range s.Attributes {
			if len(kv.Value.Emit()) > maxSpanValue {
				t.Errorf("attribute %s of %q holds %d bytes", kv.Key, s.Name, len(kv.Value.Emit()))
			}
			if strings.Contains(kv.Value.Emit(), hostileSecret) {
				t.Errorf("attribute %s of %q carries the secret", kv.Key, s.Name)
			}
		}
		if strings.Contains(s.Name, hostileSecret) {
			t.Errorf("a span's name carries the secret: %q", s.Name)
		}
	}
	if replayed == 0 || replayed > maxSpans {
		t.Errorf("%d spans replayed from 20003 sent, want 1..%d", replayed, maxSpans)
	}
	t.Logf("%d of 20003 spans replayed", replayed)
}

// TestPluginProviderIsTheGlobalOne: the provider a plugin's handlers reach
// through the otel package records under the call too ([Serve]
// makes it global).
func TestPluginProviderIsTheGlobalOne(t *testing.T) {
	otel.SetTracerProvider(tracerProvider())
	ctx, dispatch, exp := traced(t)
	c := dial(t, &server{impl: globalUser{}})
	if _, err := c.Call(ctx, &toolhost.CallRequest{Tool: "g"}); err != nil {
		t.Fatal(err)
	}
	dispatch.End()
	if _, ok := byName(exp.GetSpans())["through otel"]; !ok {
		t.Errorf("spans %v lack the one started through otel.Tracer", byName(exp.GetSpans()))
	}
}

type globalUser struct{ inner }

func (globalUser) Call(ctx context.Context, _ *toolhost.CallRequest) (*toolhost.Result, error) {
	_, span := otel.Tracer("lib").Start(ctx, "through otel")
	span.End()
	return &toolhost.Result{OK: true}, nil
}
