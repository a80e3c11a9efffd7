package e2e

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// traceConfig is TestServeExportsOneTrace's serve: the workspace module,
// sandboxed without a network, and traces to a collector at %s.
const traceConfig = `
data_dir   = "data"
plugin_dir = %q
telemetry {
  traces   = "otlp"
  endpoint = %q
}
builtin "workspace" {
  config {}
  sandbox {
    network = "none"
  }
}
`

// TestServeExportsOneTrace: a real serve with the telemetry block exports,
// over OTLP/HTTP to a collector on loopback, one trace for a call made
// with a traceparent: the call's span under the caller's, and the
// workspace plugin's span (from a sandbox with no network: it came back
// with the response) under the dispatch span, with the host's service name.
func TestServeExportsOneTrace(t *testing.T) {
	var (
		mu       sync.Mutex
		spans    []*tracepb.Span
		services []string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			t.Errorf("collector: %s %s", r.Method, r.URL.Path)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					services = append(services, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				spans = append(spans, ss.GetSpans()...)
			}
		}
	}))
	defer collector.Close()

	srv := newServe(t, fmt.Sprintf(traceConfig, pluginDir, collector.URL))
	serve := srv.start()
	const caller, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, _ := http.NewRequest(http.MethodPost, srv.base+"/api/call", strings.NewReader(`{"tool": "get_workspace_info", "arguments": {}}`))
	req.Header.Set("Authorization", "Bearer "+srv.admin)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+caller+"-"+parent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /api/call: %v, %v", resp, err)
	}
	resp.Body.Close()
	// Stopping serve flushes what its batcher holds.
	if err := serve.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = serve.Wait()

	mu.Lock()
	defer mu.Unlock()
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		byName[s.GetName()] = s
		if id := hex.EncodeToString(s.GetTraceId()); id != caller {
			t.Errorf("span %q is in trace %s, not the caller's", s.GetName(), id)
		}
	}
	call, dispatch, plugin := byName["call get_workspace_info"], byName["dispatch"], byName["execute_tool get_workspace_info"]
	switch {
	case call == nil || dispatch == nil || plugin == nil:
		t.Fatalf("spans %v: want the call's, dispatch and the plugin's", keys(byName))
	case hex.EncodeToString(call.GetParentSpanId()) != parent:
		t.Errorf("the call's span is under %x, not the caller's %s", call.GetParentSpanId(), parent)
	case string(plugin.GetParentSpanId()) != string(dispatch.GetSpanId()):
		t.Errorf("the plugin's span is under %x, not dispatch (%x)", plugin.GetParentSpanId(), dispatch.GetSpanId())
	}
	if len(services) == 0 || services[0] != "toolhost" {
		t.Errorf("service names %q, want toolhost", services)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
