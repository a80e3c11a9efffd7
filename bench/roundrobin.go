package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/store"
)

// Sessionless MCP clients behind a load balancer without affinity: our
// front served by `toolhost serve` hosts sharing one PostgreSQL database,
// reached through a round-robin reverse proxy that sends each request to
// the next host, whoever sends it (docs/several-hosts.md, "Which MCP
// clients need affinity").
const (
	pathRR1 = "MCP HTTP 2026, 1 host behind a round-robin proxy (PostgreSQL)"
	pathRR2 = "MCP HTTP 2026, 2 hosts behind a round-robin proxy (PostgreSQL)"
)

// balancedPath is a path through the round-robin proxy to hosts serves.
type balancedPath struct {
	path  string
	hosts int
}

// balancedPaths are the round-robin paths, in the report's order: the one
// host is the baseline of the two.
var balancedPaths = []balancedPath{{pathRR1, 1}, {pathRR2, 2}}

// isBalancedPath reports whether a call path is one of balancedPaths.
func isBalancedPath(path string) bool { return balancedIndex(path) >= 0 }

// balancedIndex returns the index of a call path in balancedPaths, -1 when
// it is not one of them.
func balancedIndex(path string) int {
	return slices.IndexFunc(balancedPaths, func(b balancedPath) bool { return b.path == path })
}

// roundRobin is a reverse proxy sending each request to the next of its
// backends in turn (or each run of requests: see -rr-run), and counting the
// requests each was sent and the errors it met.
type roundRobin struct {
	backends []*url.URL
	run      uint64         // requests in a row sent to one backend before the next
	sent     []atomic.Int64 // by backend
	next     atomic.Uint64
	errors   errorCount
	proxy    *httputil.ReverseProxy
}

// errorCount counts the lines the proxy logs, each an error. The one kind
// seen: a response's stream whose client connection closed while the proxy
// still copied it ("read error during body copy"), a few in thousands of
// calls, none failing.
type errorCount struct{ atomic.Int64 }

// Write counts one logged line.
func (e *errorCount) Write(p []byte) (int, error) {
	e.Add(1)
	return len(p), nil
}

// newRoundRobin returns a round-robin proxy over the backends, base URLs
// such as http://127.0.0.1:8741, sending run requests in a row to each (1:
// each request to the next) and keeping as many idle connections to each as
// the bench's clients keep to a server.
func newRoundRobin(run int, backends ...string) (*roundRobin, error) {
	if run < 1 {
		return nil, fmt.Errorf("a run of %d requests per backend, want at least 1", run)
	}
	rr := &roundRobin{run: uint64(run), sent: make([]atomic.Int64, len(backends))}
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			return nil, err
		}
		rr.backends = append(rr.backends, u)
	}
	rr.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			i := (rr.next.Add(1) - 1) / rr.run % uint64(len(rr.backends))
			rr.sent[i].Add(1)
			pr.SetURL(rr.backends[i])
		},
		Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256},
		ErrorLog:  log.New(&rr.errors, "", 0),
	}
	return rr, nil
}

// ServeHTTP passes the request on to the next backend.
func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) { rr.proxy.ServeHTTP(w, r) }

// counts returns the requests sent to each backend so far.
func (rr *roundRobin) counts() []int64 {
	out := make([]int64, len(rr.sent))
	for i := range rr.sent {
		out[i] = rr.sent[i].Load()
	}
	return out
}

// spread is how one round-robin path's work spread over its hosts.
type spread struct {
	Path     string
	Run      int     // requests in a row the proxy sent to one host (-rr-run)
	Requests []int64 // HTTP requests the proxy sent to each host, in the proxy's order
	Calls    []int64 // no-op calls each host ran (its tool_call.started events), most first; nil when not counted
	Errors   int64   // the proxy's errors (errorCount)
}

// addBalanced adds the round-robin paths want accepts, each on a fresh
// database of pg: its hosts, `toolhost serve` processes on one config file
// (our front's, as for pathOursHTTP26, with a store block naming the
// database), each with its own data directory and port, started one after
// the other; a round-robin proxy over them on a loopback port in this
// process; and the bench's client calling /mcp/bench through the proxy in
// mcpversion.Stateless with a token of the role made through the first
// host. Once the rig closes, after the hosts stopped (their events
// written), the path's spread over the hosts is recorded in r.spreads.
func (r *callRig) addBalanced(ctx context.Context, tmp string, exe executables, pg *pgCluster, want func(string) bool) error {
	for _, b := range balancedPaths {
		if !want(b.path) {
			continue
		}
		if err := r.addBalancedPath(ctx, tmp, exe, pg, b); err != nil {
			return fmt.Errorf("%s: %w", b.path, err)
		}
	}
	return nil
}

// addBalancedPath adds one round-robin path (see addBalanced).
func (r *callRig) addBalancedPath(ctx context.Context, tmp string, exe executables, pg *pgCluster, b balancedPath) error {
	dsn, err := pg.createDB(ctx)
	if err != nil {
		return err
	}
	file, err := writeConfig(tmp, pgStoreBlock(dsn)+frontConfig(exe.noop))
	if err != nil {
		return err
	}
	var rr *roundRobin
	// Closed after the hosts, which write their last events as they stop.
	r.closers = append(r.closers, func() {
		if rr == nil {
			return
		}
		s := spread{Path: b.path, Run: r.rrRun, Requests: rr.counts(), Errors: rr.errors.Load()}
		calls, err := pgCounts(context.Background(), dsn, `SELECT count(*) FROM events WHERE type = $1
			GROUP BY payload::jsonb->>'host' ORDER BY 1 DESC`, store.EventCallStarted)
		if err != nil {
			logf("bench: %s: the calls each host ran: %v", b.path, err)
		} else {
			s.Calls = calls
		}
		r.spreads = append(r.spreads, s)
	})
	var backends []string
	var token string
	for i := range b.hosts {
		s, err := r.startServe(exe, tmp, file)
		if err != nil {
			return fmt.Errorf("toolhost serve: %w", err)
		}
		backends = append(backends, s.base)
		if i == 0 {
			if token, err = s.roleToken(ctx, "bench"); err != nil {
				return err
			}
		}
	}
	// Every host on the database, not on a store of its own.
	if runs, err := pgCounts(ctx, dsn, `SELECT count(DISTINCT host_id) FROM host_runs WHERE ended_at = ''`); err != nil || runs[0] != int64(b.hosts) {
		return fmt.Errorf("want %d hosts running on the database, have %v (%v)", b.hosts, runs, err)
	}
	if rr, err = newRoundRobin(r.rrRun, backends...); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rr, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	r.closers = append(r.closers, func() { _ = srv.Close() })
	t := &mcp.StreamableClientTransport{Endpoint: "http://" + lis.Addr().String() + "/mcp/bench", HTTPClient: benchHTTPClient(token)}
	return r.addMCP(ctx, b.path, t, noopIn(mcpversion.Stateless))
}

// pgCounts runs a query of counts, one a row, on the database of dsn and
// returns them.
func pgCounts(ctx context.Context, dsn, sql string, args ...any) ([]int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
