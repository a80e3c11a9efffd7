package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/toolhost/toolhost/config"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// TestResolve: the block's fields win, the OTEL_* variables fill in what it
// leaves unset, tracing is off when neither names an exporter, and
// OTEL_SDK_DISABLED turns it off whatever the block says.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block config.Telemetry
		env   map[string]string
		want  Settings
	}{
		{"nothing set: off", config.Telemetry{}, nil,
			Settings{Protocol: "http/protobuf", ServiceName: "toolhost"}},
		{"the environment alone", config.Telemetry{}, map[string]string{
			"OTEL_TRACES_EXPORTER": "otlp,console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "tools-eu"},
			Settings{Exporter: "otlp", Protocol: "grpc", ServiceName: "tools-eu"}},
		{"the traces protocol beats the general one", config.Telemetry{Traces: "otlp"}, map[string]string{
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			Settings{Exporter: "otlp", Protocol: "http/protobuf", ServiceName: "toolhost"}},
		{"the block beats the environment", config.Telemetry{Traces: "console", Protocol: "grpc", ServiceName: "a", SampleRatio: 0.5},
			map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_SERVICE_NAME": "b"},
			Settings{Exporter: "console", Protocol: "grpc", ServiceName: "a", SampleRatio: 0.5}},
		{"none is off", config.Telemetry{Traces: "none"}, nil, Settings{Protocol: "http/protobuf", ServiceName: "toolhost"}},
		{"OTEL_SDK_DISABLED wins", config.Telemetry{Traces: "otlp"}, map[string]string{"OTEL_SDK_DISABLED": "true"},
			Settings{Protocol: "http/protobuf", ServiceName: "toolhost"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Resolve(tc.block, func(k string) string { return tc.env[k] }); got != tc.want {
				t.Errorf("Resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
	if tp, err := NewProvider(context.Background(), Settings{}); tp != nil || err != nil {
		t.Errorf("no exporter: provider %v, %v, want none", tp, err)
	}
}

// received collects the span names an OTLP receiver got.
type received struct {
	mu    sync.Mutex
	names []string
}

func (r *received) add(req *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.names = append(r.names, s.GetName())
			}
		}
	}
}

type grpcReceiver struct {
	coltrace.UnimplementedTraceServiceServer
	got *received
}

func (g grpcReceiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	g.got.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// TestOTLPExportersReachACollector: with either OTLP protocol, a span ends
// up at a collector on loopback, at the endpoint the block names (over
// HTTP, at its /v1/traces), once the provider is shut down.
func TestOTLPExportersReachACollector(t *testing.T) {
	var overHTTP received
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/base/v1/traces" || proto.Unmarshal(body, &req) != nil {
			t.Errorf("collector got %s %s", r.Method, r.URL.Path)
		}
		overHTTP.add(&req)
	}))
	defer collector.Close()

	var overGRPC received
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, grpcReceiver{got: &overGRPC})
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	for _, tc := range []struct {
		protocol, endpoint string
		got                *received
	}{
		{"http/protobuf", collector.URL + "/base", &overHTTP},
		{"grpc", "http://" + l.Addr().String(), &overGRPC},
	} {
		ctx := context.Background()
		tp, err := NewProvider(ctx, Settings{Exporter: "otlp", Protocol: tc.protocol, Endpoint: tc.endpoint, ServiceName: "t"})
		if err != nil {
			t.Fatal(err)
		}
		_, span := tp.Tracer("t").Start(ctx, "span over "+tc.protocol)
		span.End()
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatalf("%s: %v", tc.protocol, err)
		}
		tc.got.mu.Lock()
		if len(tc.got.names) != 1 || tc.got.names[0] != "span over "+tc.protocol {
			t.Errorf("%s: the collector got %q", tc.protocol, tc.got.names)
		}
		tc.got.mu.Unlock()
	}
}
