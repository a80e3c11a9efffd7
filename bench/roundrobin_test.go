package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestRoundRobin: the proxy sends each request to the next backend in
// turn (or each run of -rr-run requests), the request's path and headers
// passed on, and counts them; a run under 1 is refused.
func TestRoundRobin(t *testing.T) {
	var backends []string
	for _, name := range []string{"a", "b"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s %s", name, r.URL.Path, r.Header.Get("Authorization"))
		}))
		defer srv.Close()
		backends = append(backends, srv.URL)
	}
	a, b := "a /mcp/bench Bearer secret", "b /mcp/bench Bearer secret"
	for _, c := range []struct {
		run    int
		want   []string
		counts []int64
	}{
		{1, []string{a, b, a, b, a}, []int64{3, 2}},
		{2, []string{a, a, b, b, a}, []int64{3, 2}},
		{3, []string{a, a, a, b, b}, []int64{3, 2}},
	} {
		rr, err := newRoundRobin(c.run, backends...)
		if err != nil {
			t.Fatal(err)
		}
		proxy := httptest.NewServer(rr)
		defer proxy.Close()
		client := benchHTTPClient("secret")
		var got []string
		for range 5 {
			resp, err := client.Get(proxy.URL + "/mcp/bench")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(body))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("run %d: answers %q, want %q", c.run, got, c.want)
		}
		if counts := rr.counts(); !slices.Equal(counts, c.counts) {
			t.Errorf("run %d: counts %v, want %v", c.run, counts, c.counts)
		}
	}
	if _, err := newRoundRobin(0, backends...); err == nil {
		t.Error("a run of 0 requests accepted")
	}
}

// TestBalancedPaths: the round-robin paths are PostgreSQL paths, and run
// at the concurrencies of the MCP paths and of the peer paths, 16 among
// them.
func TestBalancedPaths(t *testing.T) {
	plan := callPlan{Concs: []int{1, 8, 32, 64}, PeerConcs: []int{1, 16}}
	for _, b := range balancedPaths {
		if !isPGPath(b.path) || isPeerPath(b.path) || !slices.Contains(callPaths, b.path) {
			t.Errorf("%s: a PostgreSQL path %v, a peer path %v, a call path %v; want true, false, true",
				b.path, isPGPath(b.path), isPeerPath(b.path), slices.Contains(callPaths, b.path))
		}
		if got := plan.concsOf(b.path); !slices.Equal(got, []int{1, 8, 16, 32, 64}) {
			t.Errorf("%s runs at %v, want [1 8 16 32 64]", b.path, got)
		}
	}
	if got := plan.concsOf(pathOursHTTP26); !slices.Equal(got, plan.Concs) {
		t.Errorf("%s runs at %v, want %v", pathOursHTTP26, got, plan.Concs)
	}
}
