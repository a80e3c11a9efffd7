package host

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
)

// BenchmarkCall compares a no-op tool call through Host.Call with a raw gRPC
// round trip (go-plugin's health check) to the same plugin process, in the
// same run, so the ratio holds on a noisy machine. Each sub-benchmark reports
// p50 and p99 latency in µs; the parallel ones (32 callers) report calls/s.
func BenchmarkCall(b *testing.B) {
	h := startHost(b, testPlugin("bench", "good", nil))
	proc := h.supervisor("bench").proc
	ctx := context.Background()
	req := &toolhost.CallRequest{Tool: "noop", Arguments: []byte("{}")}
	ops := []struct {
		name string
		op   func() error
	}{
		{"raw-grpc", func() error { return proc.Ping(ctx) }},
		{"provider-call", func() error {
			_, err := proc.Provider.Call(ctx, req)
			return err
		}},
		{"host-call", func() error {
			res, err := h.Call(ctx, req)
			if err == nil && !res.OK {
				b.Fatalf("noop failed: %+v", res.Error)
			}
			return err
		}},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) { benchLatency(b, o.op) })
	}
	for _, o := range ops {
		b.Run(o.name+"/callers=32", func(b *testing.B) { benchParallel(b, 32, o.op) })
	}
}

// benchLatency runs op b.N times in sequence and reports p50 and p99.
func benchLatency(b *testing.B, op func() error) {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// benchParallel runs op from callers goroutines and reports calls per second.
func benchParallel(b *testing.B, callers int, op func() error) {
	var failed atomic.Value
	b.SetParallelism((callers + 1) / max(1, runtime.GOMAXPROCS(0)))
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				failed.Store(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
}
