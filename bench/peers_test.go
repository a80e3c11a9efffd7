package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// TestPeerChecks: in each client era, our front is held against the
// faster and the better peer (in 2025 for both) and against the floor of
// its own era; the direct stdio path has no target; section 9's ratios are
// to the floor of each row's era.
func TestPeerChecks(t *testing.T) {
	const ms = time.Millisecond
	r := &report{Calls: [][]*Series{
		{series(pathPeerOurs25, 1, 3*ms/2, 400), series(pathFloor25, 1, 5*ms/4, 500), series(pathPeerOurs26, 1, 2*ms, 300), series(pathFloor26, 1, 2*ms, 400),
			series(pathSupergateway, 1, 2*ms, 300), series(pathMCPProxy, 1, 3*ms, 200), series(pathEverything, 1, ms/4, 2000)},
		{series(pathPeerOurs25, 16, 14*ms, 900), series(pathFloor25, 16, 18*ms, 1000), series(pathPeerOurs26, 16, 30*ms, 600), series(pathFloor26, 16, 33*ms, 600),
			series(pathSupergateway, 16, 36*ms, 300), series(pathMCPProxy, 16, 34*ms, 400), series(pathEverything, 16, 4*ms, 3000)},
	}}
	want := map[string]string{
		"/mcp/bench → everything (2025) p50 / the faster peer's, supergateway → everything (2025) (1 caller)":    "0.75 ✓",
		"/mcp/bench → everything (2025) calls/s / the better peer's, mcp-proxy → everything (2025) (16 callers)": "2.25 ✓",
		"/mcp/bench → everything (2025) p50 / go-sdk gateway → everything (2025) p50 (1 caller)":                 "1.20 ✓",
		"/mcp/bench → everything (2025) calls/s / go-sdk gateway → everything (2025) calls/s (16 callers)":       "0.90 ✓",
		"/mcp/bench → everything (2026) p50 / the faster peer's, supergateway → everything (2025) (1 caller)":    "1.00 ✗",
		"/mcp/bench → everything (2026) calls/s / the better peer's, mcp-proxy → everything (2025) (16 callers)": "1.50 ✓",
		"/mcp/bench → everything (2026) p50 / go-sdk gateway → everything (2026) p50 (1 caller)":                 "1.00 ✓",
		"/mcp/bench → everything (2026) calls/s / go-sdk gateway → everything (2026) calls/s (16 callers)":       "1.00 ✓",
	}
	got := map[string]string{}
	for _, c := range r.checks() {
		got[c.Name] = formatRatio(c.Value) + " " + c.Verdict()
		if strings.Contains(c.Name, pathEverything) {
			t.Errorf("a summary row against the direct stdio path: %s", c.Name)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d summary rows, want %d: %q", len(got), len(want), got)
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
	var b strings.Builder
	r.write(&b)
	for _, line := range []string{
		"| /mcp/bench → everything (2025) | 1.50 ms | 1.50 ms | 400 | 1.20 | 1.20 | 0.80 |",
		"| /mcp/bench → everything (2026) | 2.00 ms | 2.00 ms | 300 | 1.00 | 1.00 | 0.75 |",
		"| mcp-proxy → everything (2025) | 3.00 ms | 3.00 ms | 200 | 2.40 | 2.40 | 0.40 |",
		"| everything over stdio (2025) | 4.00 ms | 4.00 ms | 3000 | 0.22 | 0.22 | 3.00 |",
		"The peers and the direct stdio path are called in 2025-11-25 only",
		"- **go-sdk gateway → everything (2025)**, **go-sdk gateway → everything (2026)** — the floor: `bench/sdkgateway SERVER`",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("the report lacks %q:\n%s", line, b.String())
		}
	}
	// Only section 9 ran: no section 1 nor 2 without their figures.
	for _, heading := range []string{"## 1.", "## 2."} {
		if strings.Contains(b.String(), heading) {
			t.Errorf("the report has %q, which did not run", heading)
		}
	}
}

// TestFloorOf: each of our paths and each floor path is held against the
// floor of its era, the peers and the direct stdio path against the 2025
// one.
func TestFloorOf(t *testing.T) {
	for path, want := range map[string]string{
		pathPeerOurs25: pathFloor25, pathFloor25: pathFloor25, pathPeerOurs26: pathFloor26, pathFloor26: pathFloor26,
		pathSupergateway: pathFloor25, pathMCPProxy: pathFloor25, pathEverything: pathFloor25,
	} {
		if got := floorOf(path); got != want {
			t.Errorf("floorOf(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestSDKGateway: the floor gateway offers its stdio server's tools as the
// server lists them and forwards a call, answering with the server's
// result, in both eras; here in front of bench/mcpnoop over stdio.
func TestSDKGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway and its server")
	}
	dir := t.TempDir()
	build := func(pkg string) string {
		out := filepath.Join(dir, filepath.Base(pkg))
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
		return out
	}
	gateway, server := build("./sdkgateway"), build("./mcpnoop")
	r := &callRig{}
	defer r.Close()
	endpoint, err := r.startHTTPServer(gateway, server)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, version := range []string{mcpversion.Legacy, mcpversion.Stateless} {
		t.Run(version, func(t *testing.T) {
			tr := &mcp.StreamableClientTransport{Endpoint: endpoint}
			sess, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, tr, noopIn(version).opts)
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			if err := checkEra(sess, tr, version); err != nil {
				t.Fatal(err)
			}
			list, err := sess.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Tools) != 1 || list.Tools[0].Name != "noop" || list.Tools[0].Description != "Do nothing and answer ok." {
				t.Fatalf("tools %+v, want mcpnoop's noop", list.Tools)
			}
			if schema, ok := list.Tools[0].InputSchema.(map[string]any); !ok || schema["type"] != "object" {
				t.Errorf("input schema %#v, want mcpnoop's object", list.Tools[0].InputSchema)
			}
			if err := mcpCall(sess, noopIn(version))(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "noop"})
			if err != nil || res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "ok" {
				t.Fatalf("noop without arguments: %+v, %v; want ok", res, err)
			}
		})
	}
}
