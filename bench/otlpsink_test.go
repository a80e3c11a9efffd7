package main

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestOTLPSink exports spans to the sink with the exporter the host uses and
// checks it counts the request, its bytes and every span.
func TestOTLPSink(t *testing.T) {
	sink := newOTLPSink()
	defer sink.Close()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(sink.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tp.Tracer("bench")
	for _, name := range []string{"a", "b", "c"} {
		_, span := tr.Start(ctx, name)
		span.End()
	}
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := sink.received()
	if got.Requests != 3 || got.Spans != 3 || got.Failed != 0 || got.Bytes < 3*50 {
		t.Errorf("sink counted %+v, want 3 requests of one span each, none failed, some bytes", got)
	}
	if n, err := countSpans([]byte{0x0a, 0x05}); err == nil {
		t.Errorf("a truncated request: %d spans and no error", n)
	}
}
