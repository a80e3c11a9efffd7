package host

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/store"
)

// BenchmarkCall compares a no-op tool call through Host.Call with a raw gRPC
// round trip (go-plugin's health check) to the same plugin process, in the
// same run, so the ratio holds on a noisy machine.
//
//   - latency: each iteration makes one raw call and one host call, in turn,
//     so both distributions see the same machine; it reports p50 and p99 of
//     each in µs and their ratios (host / raw).
//   - callers=32: throughput with 32 concurrent callers, in calls/s.
func BenchmarkCall(b *testing.B) {
	h := startHost(b, testPlugin("bench", "good", nil))
	proc := h.supervisor("bench").mod.(pluginModule)
	ctx := context.Background()
	req := &toolhost.CallRequest{Tool: "noop", Arguments: []byte("{}")}
	raw := func() error { return proc.Ping(ctx) }
	call := func() error {
		res, err := h.Call(ctx, req)
		if err == nil && !res.OK {
			b.Fatalf("noop failed: %+v", res.Error)
		}
		return err
	}
	b.Run("latency", func(b *testing.B) { benchPair(b, raw, call) })
	b.Run("raw-grpc/callers=32", func(b *testing.B) { benchParallel(b, 32, raw) })
	b.Run("host-call/callers=32", func(b *testing.B) { benchParallel(b, 32, call) })
}

// benchPair runs base and op alternately b.N times each and reports the p50
// and p99 latency of both and the ratios op/base.
func benchPair(b *testing.B, base, op func() error) { benchPairAs(b, "raw", "host", base, op) }

// benchPairAs is benchPair, naming base's metrics baseName and op's opName.
func benchPairAs(b *testing.B, baseName, opName string, base, op func() error) {
	lat := [2][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
	for range b.N {
		for i, f := range []func() error{base, op} {
			start := time.Now()
			if err := f(); err != nil {
				b.Fatal(err)
			}
			lat[i] = append(lat[i], time.Since(start))
		}
	}
	var p50, p99 [2]float64
	for i := range lat {
		slices.Sort(lat[i])
		p50[i] = float64(lat[i][len(lat[i])/2].Nanoseconds()) / 1e3
		p99[i] = float64(lat[i][len(lat[i])*99/100].Nanoseconds()) / 1e3
	}
	b.ReportMetric(p50[0], baseName+"-p50-µs")
	b.ReportMetric(p99[0], baseName+"-p99-µs")
	b.ReportMetric(p50[1], opName+"-p50-µs")
	b.ReportMetric(p99[1], opName+"-p99-µs")
	b.ReportMetric(p50[1]/p50[0], "p50-ratio")
	b.ReportMetric(p99[1]/p99[0], "p99-ratio")
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

// BenchmarkTools lists an agent's tools with 100 groups of 20 tools
// registered: from the cache, and right after an invalidation (a group
// registered), which recompiles the role's view. Its role has 5 groups, so
// the cost follows the role's 100 tools, not the 2,000 registered.
func BenchmarkTools(b *testing.B) {
	h := newTestHost(b, nil)
	for i := range 100 {
		tools := make([]string, 20)
		for j := range tools {
			tools[j] = fmt.Sprintf("g%d_t%d", i, j)
		}
		addGroup(b, h, fmt.Sprintf("g%d", i), SourcePlugin, tools...)
	}
	role, err := h.Roles().Create(context.Background(), RoleSpec{Name: "five", ToolGroups: []string{"g1", "g20", "g40", "g60", "g80"}})
	if err != nil {
		b.Fatal(err)
	}
	agent, _ := h.Agents().Create(context.Background(), role.Name, store.Agent{})
	list := func() {
		if defs, err := toolsFor(h, agent.ID); err != nil || len(defs) != 100 {
			b.Fatalf("%d tools, %v", len(defs), err)
		}
	}
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			list()
		}
	})
	b.Run("invalidated", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			addGroup(b, h, "churn", SourcePlugin, fmt.Sprintf("churn_%d", i%2))
			b.StartTimer()
			list()
		}
	})
}
