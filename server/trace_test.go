package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
)

// TestCallersTraceContextIsKept: a caller in a trace has its call's span
// join it, whether it says so with a traceparent header (POST /api/call,
// MCP over HTTP on the fast path) or in the tools/call's _meta (SEP-414),
// which wins over the header.
func TestCallersTraceContextIsKept(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	h, err := host.New(withTestToken(&config.Config{Roles: mcpConfig.Roles}), &host.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Modules().Register(context.Background(), group("console", "console_print")); err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(t, h, nil)
	const (
		trace1  = "0af7651916cd43dd8448eb211c80319c"
		trace2  = "4bf92f3577b34da6a3ce929d0e0e4736"
		trace3  = "5bf92f3577b34da6a3ce929d0e0e4737"
		parent1 = "b7ad6b7169203331"
		parent2 = "00f067aa0ba902b7"
		parent3 = "10f067aa0ba902b8"
	)
	// parentOf is the trace and parent of the last call span exported.
	parentOf := func() string {
		spans := exp.GetSpans()
		for i := len(spans) - 1; i >= 0; i-- {
			if strings.HasPrefix(spans[i].Name, "call ") {
				return spans[i].SpanContext.TraceID().String() + "/" + spans[i].Parent.SpanID().String()
			}
		}
		return "no call span"
	}

	req, _ := http.NewRequest("POST", srv.URL+"/api/call", strings.NewReader(`{"tool": "console_print", "arguments": {"text": "x"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+trace1+"-"+parent1+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /api/call: %v, %v", resp, err)
	}
	resp.Body.Close()
	if got := parentOf(); got != trace1+"/"+parent1 {
		t.Errorf("POST /api/call with a traceparent: the call's span is under %s", got)
	}

	withHeader := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Traceparent", "00-"+trace2+"-"+parent2+"-01")
		return http.DefaultTransport.RoundTrip(r)
	})}
	for _, era := range []string{sessionEra, sessionlessEra} {
		cs, _ := connectAs(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/printer", HTTPClient: withHeader}, era)
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "console_print", Arguments: map[string]any{"text": "x"}}); err != nil {
			t.Fatal(err)
		}
		if got := parentOf(); got != trace2+"/"+parent2 {
			t.Errorf("%s: MCP with a traceparent header: the call's span is under %s", era, got)
		}
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "console_print", Arguments: map[string]any{"text": "x"},
			Meta: mcp.Meta{"traceparent": "00-" + trace3 + "-" + parent3 + "-01"}}); err != nil {
			t.Fatal(err)
		}
		if got := parentOf(); got != trace3+"/"+parent3 {
			t.Errorf("%s: MCP with _meta.traceparent: the call's span is under %s", era, got)
		}
	}
}
