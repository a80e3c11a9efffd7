package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{7}, 0.99, 7},
		{"median of three", []time.Duration{10, 20, 30}, 0.5, 20},
		{"median of four is the lower middle", []time.Duration{10, 20, 30, 40}, 0.5, 20},
		{"p50 of 1..100", hundred, 0.5, 50},
		{"p99 of 1..100", hundred, 0.99, 99},
		{"max", hundred, 1, 100},
		{"tiny q is the min", hundred, 0.0001, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("percentile(q=%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
	if got := median([]time.Duration{30, 10, 20}); got != 20 {
		t.Errorf("median of unsorted = %v, want 20", got)
	}
}

func TestVerdict(t *testing.T) {
	tests := []struct {
		r    ratio
		want string
	}{
		{ratio{Value: 1.15, Max: 1.15}, "✓"},
		{ratio{Value: 1.16, Max: 1.15}, "✗"},
		{ratio{Value: 0.6, Min: 0.6}, "✓"},
		{ratio{Value: 0.59, Min: 0.6}, "✗"},
		{ratio{Value: 3}, "–"},
	}
	for _, tt := range tests {
		if got := tt.r.Verdict(); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.r, got, tt.want)
		}
	}
}

// TestRunRound checks the call count, that every call is timed, and that an
// error stops the round.
func TestRunRound(t *testing.T) {
	lat, wall, err := runRound(context.Background(), func(context.Context) error {
		time.Sleep(time.Millisecond)
		return nil
	}, 4, 40)
	if err != nil || len(lat) != 40 {
		t.Fatalf("%d samples, %v; want 40", len(lat), err)
	}
	for _, d := range lat {
		if d < time.Millisecond || d > wall {
			t.Fatalf("sample %v outside [1ms, wall %v]", d, wall)
		}
	}
	if _, _, err := runRound(context.Background(), func(context.Context) error { return context.Canceled }, 2, 10); err == nil {
		t.Fatal("an erring op: no error")
	}
}

// series is a run of path at conc callers: 100 calls of lat each, and
// calls calls in a second.
func series(path string, conc int, lat time.Duration, calls int) *Series {
	s := &Series{Path: path, Conc: conc, Calls: calls, Wall: time.Second}
	for range 100 {
		s.Lat = append(s.Lat, lat)
	}
	return s
}

// TestReportChecks checks that the summary compares the right series and
// marks a missed target.
func TestReportChecks(t *testing.T) {
	r := &report{Calls: [][]*Series{
		{series(pathRaw, 1, 100*time.Microsecond, 0), series(pathHost, 1, 110*time.Microsecond, 0), series(pathHostBare, 1, 108*time.Microsecond, 0),
			series(pathHostPG, 1, 121*time.Microsecond, 0), series(pathHostPG2, 1, 120*time.Microsecond, 0),
			series(pathHostTraced, 1, 132*time.Microsecond, 0),
			series(pathFrontHTTP25, 1, 390*time.Microsecond, 0), series(pathSDKHTTP25, 1, 300*time.Microsecond, 0),
			series(pathFrontHTTP26, 1, 400*time.Microsecond, 0), series(pathSDKHTTP26, 1, 300*time.Microsecond, 0),
			series(pathFrontStdio25, 1, 300*time.Microsecond, 0), series(pathSDKStdio25, 1, 200*time.Microsecond, 0),
			series(pathFrontStdio26, 1, 250*time.Microsecond, 0), series(pathSDKStdio26, 1, 200*time.Microsecond, 0),
			series(pathOursHTTP25, 1, 390*time.Microsecond, 0),
			series(pathHostMCP, 1, 240*time.Microsecond, 0),
			series(pathOursHTTP26, 1, 500*time.Microsecond, 0),
			series(pathRR1, 1, 600*time.Microsecond, 0), series(pathRR2, 1, 660*time.Microsecond, 0)},
		{series(pathRR1, 16, 4*time.Millisecond, 4000), series(pathRR2, 16, 4*time.Millisecond, 3500)},
		{series(pathRaw, 32, time.Millisecond, 40000), series(pathHost, 32, time.Millisecond, 20000), series(pathHostTraced, 32, time.Millisecond, 15000),
			series(pathHostPG, 32, time.Millisecond, 26000), series(pathHostPG2, 32, time.Millisecond, 24700),
			series(pathFrontHTTP25, 32, time.Millisecond, 3000), series(pathSDKHTTP25, 32, time.Millisecond, 2000),
			series(pathFrontHTTP26, 32, time.Millisecond, 1900), series(pathSDKHTTP26, 32, time.Millisecond, 2000),
			series(pathSDKStdio25, 32, time.Millisecond, 5000),
			series(pathFrontStdio26, 32, time.Millisecond, 4000), series(pathSDKStdio26, 32, time.Millisecond, 4000),
			series(pathOursStdio26, 32, time.Millisecond, 4000),
			series(pathOursHTTP26, 32, time.Millisecond, 3000), series(pathRR1, 32, time.Millisecond, 2400)},
	}, Postgres: "PostgreSQL 15.8, fsync off, synchronous_commit off",
		Events: &eventsResult{Emitters: 4, Rounds: 2, Warmup: 2000, Runs: []eventsRun{
			{Engine: engineSQLite, Where: "/tmp (ext4)", Events: 200000, Wall: 2 * time.Second},
			{Engine: enginePostgres, Where: "a database of its own", Events: 200000, Wall: 4 * time.Second},
		}}}
	want := map[string]string{
		"Host.Call p50 / raw gRPC Call p50 (1 caller)":           "1.10 ✓",
		"Host.Call p50, metrics on / off (1 caller)":             "1.02 ✓",
		"Host.Call p50, tracing on / off (1 caller)":             "1.20 –",
		"Host.Call calls/s, tracing on / off (32 callers)":       "0.75 –",
		"Host.Call calls/s / raw gRPC Call calls/s (32 callers)": "0.50 ✗",
		// Our in-process MCP front against the go-sdk server, per transport
		// and era:
		// ≤ 1.3 × at p50 with 1 caller, ≥ 1 × calls/s with 32.
		"MCP HTTP 2025 (ours, in-process) p50 / MCP HTTP 2025 (go-sdk) p50 (1 caller)":             "1.30 ✓",
		"MCP HTTP 2025 (ours, in-process) calls/s / MCP HTTP 2025 (go-sdk) calls/s (32 callers)":   "1.50 ✓",
		"MCP HTTP 2026 (ours, in-process) p50 / MCP HTTP 2026 (go-sdk) p50 (1 caller)":             "1.33 ✗",
		"MCP HTTP 2026 (ours, in-process) calls/s / MCP HTTP 2026 (go-sdk) calls/s (32 callers)":   "0.95 ✗",
		"MCP stdio 2025 (ours, in-process) p50 / MCP stdio 2025 (go-sdk) p50 (1 caller)":           "1.50 ✗",
		"MCP stdio 2025 (ours, in-process) calls/s / MCP stdio 2025 (go-sdk) calls/s (32 callers)": "",
		"MCP stdio 2026 (ours, in-process) p50 / MCP stdio 2026 (go-sdk) p50 (1 caller)":           "1.25 ✓",
		"MCP stdio 2026 (ours, in-process) calls/s / MCP stdio 2026 (go-sdk) calls/s (32 callers)": "1.00 ✓",
		// What bounds the target against a server called directly over
		// stdio: the go-sdk's HTTP server against its stdio one, no target.
		"MCP HTTP 2025 (go-sdk) p50 / MCP stdio 2025 (go-sdk) p50 (1 caller)": "1.50 –",
		// Our front with the plugin: no target.
		"MCP HTTP 2025 (ours) p50 / MCP HTTP 2025 (go-sdk) p50 (1 caller)":             "1.30 –",
		"MCP stdio 2026 (ours) calls/s / MCP stdio 2026 (go-sdk) calls/s (32 callers)": "1.00 –",
		// The stdio server of the 2026 era is the baseline of the host's
		// throughput and of an mcp_server group, which speaks that era.
		"Host.Call calls/s / MCP stdio 2026 (go-sdk) calls/s (32 callers)":    "5.00 ✓",
		"Host.Call → mcp_server p50 / MCP stdio 2026 (go-sdk) p50 (1 caller)": "1.20 ✓",
		// PostgreSQL: the rows with targets, then the comparisons.
		"Host.Call (PostgreSQL) p50 / raw gRPC Call p50 (1 caller)":                    "1.21 ✗",
		"Host.Call (PostgreSQL) p99 / raw gRPC Call p99 (1 caller)":                    "1.21 ✓",
		"Host.Call (PostgreSQL) calls/s / raw gRPC Call calls/s (32 callers)":          "0.65 ✓",
		"Host.Call p50, PostgreSQL / SQLite (1 caller)":                                "1.10 –",
		"Host.Call calls/s, PostgreSQL / SQLite (32 callers)":                          "1.30 –",
		"Host.Call calls/s on PostgreSQL, 2 hosts / 1 (32 callers)":                    "0.95 –",
		"events/s of the event writer, PostgreSQL / SQLite":                            "0.50 –",
		"Host.Call, 2 hosts (PostgreSQL) calls/s / raw gRPC Call calls/s (32 callers)": "",
		// Sessionless MCP clients behind a round-robin proxy: 2 hosts
		// against 1, ≤ 1.15 × at p50 with 1 caller, ≥ 0.9 × calls/s with
		// 16; 1 host against our front on SQLite without targets.
		"MCP HTTP 2026 p50 behind a round-robin proxy on PostgreSQL, 2 hosts / 1 (1 caller)":                                "1.10 ✓",
		"MCP HTTP 2026 calls/s behind a round-robin proxy on PostgreSQL, 2 hosts / 1 (16 callers)":                          "0.88 ✗",
		"MCP HTTP 2026, 1 host behind a round-robin proxy (PostgreSQL) p50 / MCP HTTP 2026 (ours) p50 (1 caller)":           "1.20 –",
		"MCP HTTP 2026, 1 host behind a round-robin proxy (PostgreSQL) calls/s / MCP HTTP 2026 (ours) calls/s (32 callers)": "0.80 –",
		"MCP HTTP 2026 calls/s behind a round-robin proxy on PostgreSQL, 2 hosts / 1 (32 callers)":                          "",
	}
	got := map[string]string{}
	for _, c := range r.checks() {
		got[c.Name] = strings.TrimSpace(strings.Join([]string{formatRatio(c.Value), c.Verdict()}, " "))
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
	r.Traced = &traceExport{Requests: 3, Bytes: 4096, Spans: 50, Calls: 10}
	r.Spreads = []spread{{Path: pathRR1, Requests: []int64{4401}, Calls: []int64{4400}, Errors: 2}, {Path: pathRR2, Requests: []int64{4401, 4400}}}
	var b strings.Builder
	r.write(&b)
	for _, line := range []string{
		"| Host.Call calls/s / raw gRPC Call calls/s (32 callers) | 20000/s | 40000/s | 0.50 | ≥ 0.60 | ✗ |",
		"| Host.Call p50, tracing on / off (1 caller) | 132 µs | 110 µs | 1.20 | – | – |",
		"| MCP HTTP 2026 (ours, in-process) p50 / MCP HTTP 2026 (go-sdk) p50 (1 caller) | 400 µs | 300 µs | 1.33 | ≤ 1.30 | ✗ |",
		"| MCP stdio 2026 (ours, in-process) calls/s / MCP stdio 2026 (go-sdk) calls/s (32 callers) | 4000/s | 4000/s | 1.00 | ≥ 1.00 | ✓ |",
		"| MCP HTTP 2025 (ours) p50 / MCP HTTP 2025 (go-sdk) p50 (1 caller) | 390 µs | 300 µs | 1.30 | – | – |",
		"| MCP HTTP 2025 (go-sdk) | 300 µs |",
		"| MCP HTTP 2025 (ours, in-process) | 390 µs |",
		"- **MCP HTTP 2025 (ours)**, **MCP HTTP 2026 (ours)** — our MCP front",
		"pins to the path's era: 2025-11-25 for the 2025 paths",
		"The plot leaves out the PostgreSQL paths and the MCP paths of the 2025 era and our in-process fronts,",
		"the sink received 3 export requests, 4 KB, 50 spans (5.00 per call), warm-up included.",
		"| Host.Call calls/s, PostgreSQL / SQLite (32 callers) | 26000/s | 20000/s | 1.30 | – | – |",
		"| events/s of the event writer, PostgreSQL / SQLite | 50000/s | 100000/s | 0.50 | – | – |",
		"| PostgreSQL | a database of its own | 200000 | 4s | 50000 | 0.50 |",
		"| Host.Call (PostgreSQL) | 121 µs |",
		"- **Host.Call, 2 hosts (PostgreSQL)** — two such hosts",
		"(PostgreSQL 15.8, fsync off, synchronous_commit off)",
		"| MCP HTTP 2026 p50 behind a round-robin proxy on PostgreSQL, 2 hosts / 1 (1 caller) | 660 µs | 600 µs | 1.10 | ≤ 1.15 | ✓ |",
		"| MCP HTTP 2026 calls/s behind a round-robin proxy on PostgreSQL, 2 hosts / 1 (16 callers) | 3500/s | 4000/s | 0.88 | ≥ 0.90 | ✗ |",
		"- **MCP HTTP 2026, 1 host behind a round-robin proxy (PostgreSQL)**, **MCP HTTP 2026, 2 hosts behind a round-robin proxy (PostgreSQL)** — sessionless MCP clients",
		"  In this run, MCP HTTP 2026, 1 host behind a round-robin proxy (PostgreSQL): the proxy sent 4401 HTTP requests to the hosts in turn (warm-up, discovery and calls), which ran 4400 no-op calls (their `tool_call.started` events, by the `host` they name); it logged 2 errors (none failed a call",
		"  In this run, MCP HTTP 2026, 2 hosts behind a round-robin proxy (PostgreSQL): the proxy sent 4401 and 4400 HTTP requests to the hosts in turn (warm-up, discovery and calls); it logged 0 errors",
		"| MCP HTTP 2026, 2 hosts behind a round-robin proxy (PostgreSQL) | 4.00 ms | 4.00 ms | 3500 | – | – | – |",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("the report lacks %q:\n%s", line, b.String())
		}
	}
}

// TestReportWithoutPostgres: without -pg-dsn the report says the PostgreSQL
// parts did not run, and has no rows for them.
func TestReportWithoutPostgres(t *testing.T) {
	r := &report{Calls: [][]*Series{{{Path: pathRaw, Conc: 1, Lat: []time.Duration{1}}, {Path: pathHost, Conc: 1, Lat: []time.Duration{1}}}},
		Events: &eventsResult{Runs: []eventsRun{{Engine: engineSQLite, Events: 10, Wall: time.Second}}}}
	for _, c := range r.checks() {
		if strings.Contains(c.Name, "PostgreSQL") {
			t.Errorf("a summary row without PostgreSQL: %s", c.Name)
		}
	}
	var b strings.Builder
	r.write(&b)
	for _, line := range []string{
		"## 1. A no-op tool call, 2 ways",
		"> The PostgreSQL paths (Host.Call (PostgreSQL), Host.Call, 2 hosts (PostgreSQL), " + pathRR1 + ", " + pathRR2 + ") did not run: no `-pg-dsn`",
		"> PostgreSQL was not measured: no `-pg-dsn`",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("the report lacks %q:\n%s", line, b.String())
		}
	}
	b.Reset()
	r.summary(&b)
	if !strings.Contains(b.String(), "PostgreSQL: not measured (no -pg-dsn)") {
		t.Errorf("the summary does not say PostgreSQL was skipped:\n%s", b.String())
	}
}

// TestByCaller: callers are spread over the hosts by number, each always
// calling the same one.
func TestByCaller(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]map[int]bool{} // caller → hosts it called
	mkHost := func(h int) func(context.Context) error {
		return func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			c := callerOf(ctx)
			if seen[c] == nil {
				seen[c] = map[int]bool{}
			}
			seen[c][h] = true
			return nil
		}
	}
	if _, _, err := runRound(context.Background(), byCaller(mkHost(0), mkHost(1)), 4, 40); err != nil {
		t.Fatal(err)
	}
	for c := range 4 {
		if len(seen[c]) != 1 || !seen[c][c%2] {
			t.Errorf("caller %d called hosts %v, want only %d", c, seen[c], c%2)
		}
	}
	if callerOf(context.Background()) != 0 {
		t.Error("callerOf outside a round is not 0")
	}
}

// TestMCPPairs: each pair is our fronts and the go-sdk server on the
// transport and in the era its paths' names say, and the call paths list
// them in the pairs' order.
func TestMCPPairs(t *testing.T) {
	var names []string
	for _, p := range mcpPairs {
		transport := map[bool]string{true: "HTTP", false: "stdio"}[p.http]
		for s, server := range []string{serverOurs: "ours", serverSDK: "go-sdk", serverInProc: "ours, in-process"} {
			want := fmt.Sprintf("MCP %s %s (%s)", transport, p.version[:4], server)
			if name := p.path(mcpServer(s)); name != want {
				t.Errorf("%+v: %q, want %q", p, name, want)
			}
			names = append(names, p.path(mcpServer(s)))
		}
	}
	i := slices.Index(callPaths, names[0])
	if i < 0 || !slices.Equal(callPaths[i:i+len(names)], names) {
		t.Errorf("callPaths %q do not list the pairs' paths %q in a row", callPaths, names)
	}
}
