package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
)

// otlpSink is the collector of the traced path: an OTLP/HTTP trace receiver
// in the bench process on a loopback port. It reads each export request,
// counts it, its bytes on the wire and the spans in it, and discards it with
// a 200 and an empty body (an ExportTraceServiceResponse with nothing to
// say), as a collector keeping up would.
type otlpSink struct {
	srv                    *httptest.Server
	requests, bytes, spans atomic.Int64
	failed                 atomic.Int64 // requests whose body was not an export request
}

// newOTLPSink starts a sink on 127.0.0.1; its base URL is s.srv.URL.
func newOTLPSink() *otlpSink {
	s := &otlpSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *otlpSink) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	wire := &countingReader{r: r.Body}
	var body io.Reader = wire
	if r.Header.Get("Content-Encoding") == "gzip" { // OTEL_EXPORTER_OTLP_COMPRESSION=gzip
		zr, err := gzip.NewReader(wire)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n, err := countSpans(data)
	s.requests.Add(1)
	s.bytes.Add(wire.n)
	s.spans.Add(int64(n))
	if err != nil {
		s.failed.Add(1)
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// Close stops the sink.
func (s *otlpSink) Close() { s.srv.Close() }

// received returns what the sink has counted so far.
func (s *otlpSink) received() *traceExport {
	return &traceExport{Requests: s.requests.Load(), Bytes: s.bytes.Load(), Spans: s.spans.Load(), Failed: s.failed.Load()}
}

// traceExport is what the traced path's host exported to the sink, over the
// whole run (warm-up included), and the calls it made.
type traceExport struct {
	Requests, Bytes, Spans, Failed int64
	Calls                          int
}

// String says it in a phrase: "N export requests, M KB, S spans (s per call)".
func (t *traceExport) String() string {
	out := fmt.Sprintf("%d export requests, %.0f KB, %d spans", t.Requests, float64(t.Bytes)/1024, t.Spans)
	if t.Calls > 0 {
		out += fmt.Sprintf(" (%.2f per call)", float64(t.Spans)/float64(t.Calls))
	}
	if t.Failed > 0 {
		out += fmt.Sprintf("; %d requests were not OTLP trace exports", t.Failed)
	}
	return out
}

// countSpans returns the spans in an OTLP ExportTraceServiceRequest,
// walking the wire format without decoding the spans: resource_spans (1),
// then their scope_spans (2), then their spans (2).
func countSpans(b []byte) (int, error) { return countField(b, 1, 2, 2) }

// countField counts the length-delimited fields at path in the message b:
// the occurrences of path[0] when it is the last, else the sum over them.
func countField(b []byte, path ...protowire.Number) (int, error) {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return n, protowire.ParseError(l)
		}
		b = b[l:]
		if num != path[0] || typ != protowire.BytesType {
			if l = protowire.ConsumeFieldValue(num, typ, b); l < 0 {
				return n, protowire.ParseError(l)
			}
			b = b[l:]
			continue
		}
		v, l := protowire.ConsumeBytes(b)
		if l < 0 {
			return n, protowire.ParseError(l)
		}
		b = b[l:]
		if len(path) == 1 {
			n++
			continue
		}
		k, err := countField(v, path[1:]...)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
