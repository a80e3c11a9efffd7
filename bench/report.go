package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// report is everything one run measured.
type report struct {
	Quick      bool
	Paths      string // the -paths expression of a partial run, "" for a whole one
	GOMAXPROCS int
	Machine    machine
	Plan       callPlan
	Calls      [][]*Series // per concurrency, per path
	Cold       []coldStart
	Restart    *restartResult
	ToolsFor   *toolsForResult
	RSS        []rssRow
	Sandbox    *sandboxResult
	Context    *contextResult
	Search     *searchResult
	Code       *codeResult      // nil when not measured
	Events     *eventsResult    // nil when not measured
	Retention  *retentionResult // nil when not measured
	Postgres   string           // the PostgreSQL server of -pg-dsn (pgCluster.About); "" when there was none
	Traced     *traceExport     // what the traced path's host exported to the bench's sink, nil when it did not run
	Peers      string           // the npm packages and Node.js of the peer paths, "" when none ran
	Spreads    []spread         // how the round-robin paths' work spread over their hosts
	Wall       time.Duration    // the bench program's run
	ScriptWall time.Duration    // scripts/bench from its start (build included); 0 when not run by it
	Plot       string           // the plot's path relative to the report
}

// machine describes where the run happened.
type machine struct {
	CPU, Kernel, Go string
	NumCPU          int
	Date            time.Time
}

func describeMachine() machine {
	m := machine{CPU: "unknown", Go: runtime.Version(), NumCPU: runtime.NumCPU(), Date: time.Now().UTC()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// series returns the series of a path at a concurrency, nil when not run.
func (r *report) series(path string, conc int) *Series {
	for _, row := range r.Calls {
		for _, s := range row {
			if s.Path == path && s.Conc == conc {
				return s
			}
		}
	}
	return nil
}

// durRatio returns a/b as float.
func durRatio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// checked is one line of the summary: a figure, its baseline and the ratio
// held against the target.
type checked struct {
	ratio
	Figure, Baseline string
}

// checks returns the summary lines, the rows with targets first.
func (r *report) checks() []checked {
	var out []checked
	add := func(name, fig, base string, v, maxV, minV float64) {
		out = append(out, checked{ratio: ratio{Name: name, Value: v, Max: maxV, Min: minV}, Figure: fig, Baseline: base})
	}
	// named compares path a with its baseline b, both at conc callers: p50
	// (or p99), or calls/s, when both ran; name formats the figure ("p50",
	// "calls/s") and the callers ("1 caller", "32 callers") into the line's
	// name.
	named := func(name func(fig, callers string) string, a, b string, conc int, q, maxV, minV float64) {
		sa, sb := r.series(a, conc), r.series(b, conc)
		if sa == nil || sb == nil {
			return
		}
		callers := fmt.Sprintf("%d caller", conc)
		if conc > 1 {
			callers += "s"
		}
		if q == 0 {
			add(name("calls/s", callers), rate(sa), rate(sb), sa.Rate()/sb.Rate(), maxV, minV)
			return
		}
		add(name(fmt.Sprintf("p%.0f", q*100), callers), fmtDur(sa.P(q)), fmtDur(sb.P(q)), durRatio(sa.P(q), sb.P(q)), maxV, minV)
	}
	// at is named with the paths' names: "a p50 / b p50 (1 caller)".
	at := func(a, b string, conc int, q, maxV, minV float64) {
		named(func(fig, callers string) string { return fmt.Sprintf("%s %s / %s %s (%s)", a, fig, b, fig, callers) }, a, b, conc, q, maxV, minV)
	}
	// onOff is named for a feature of Host.Call: "Host.Call p50, metrics on / off (1 caller)".
	onOff := func(feature, on, off string, conc int, q, maxV, minV float64) {
		named(func(fig, callers string) string {
			return fmt.Sprintf("Host.Call %s, %s on / off (%s)", fig, feature, callers)
		}, on, off, conc, q, maxV, minV)
	}
	const rates = 0 // at's q for calls/s
	at(pathHost, pathRaw, 1, .5, 1.15, 0)
	at(pathHost, pathRaw, 1, .99, 1.3, 0)
	at(pathHost, pathRaw, 32, rates, 0, 0.6)
	// The same targets hold on PostgreSQL: a call without a call id of
	// the caller's does not touch the database (its events are written
	// by the writer's goroutine). Beside them, without targets, PostgreSQL
	// against SQLite, and two hosts sharing one database against one.
	at(pathHostPG, pathRaw, 1, .5, 1.15, 0)
	at(pathHostPG, pathRaw, 1, .99, 1.3, 0)
	at(pathHostPG, pathRaw, 32, rates, 0, 0.6)
	engines := func(fig, callers string) string {
		return fmt.Sprintf("Host.Call %s, PostgreSQL / SQLite (%s)", fig, callers)
	}
	named(engines, pathHostPG, pathHost, 1, .5, 0, 0)
	named(engines, pathHostPG, pathHost, 32, rates, 0, 0)
	twoHosts := func(fig, callers string) string {
		return fmt.Sprintf("Host.Call %s on PostgreSQL, 2 hosts / 1 (%s)", fig, callers)
	}
	named(twoHosts, pathHostPG2, pathHostPG, 32, rates, 0, 0)
	// A sessionless MCP client behind a round-robin balancer over two hosts
	// on one database, each request on the next host, against one host
	// behind the same balancer: ≤ 1.15 × its p50 with 1 caller, ≥ 0.9 × its
	// calls/s with 16. Beside them, without targets, what the balancer and
	// PostgreSQL cost: one host behind it against our front on SQLite,
	// called directly.
	balanced := func(fig, callers string) string {
		return fmt.Sprintf("MCP HTTP 2026 %s behind a round-robin proxy on PostgreSQL, 2 hosts / 1 (%s)", fig, callers)
	}
	named(balanced, pathRR2, pathRR1, 1, .5, 1.15, 0)
	named(balanced, pathRR2, pathRR1, 16, rates, 0, 0.9)
	at(pathRR1, pathOursHTTP26, 1, .5, 0, 0)
	at(pathRR1, pathOursHTTP26, 32, rates, 0, 0)
	if sq, pg := r.Events.run(engineSQLite), r.Events.run(enginePostgres); sq != nil && pg != nil {
		add("events/s of the event writer, PostgreSQL / SQLite", fmt.Sprintf("%.0f/s", pg.Rate()), fmt.Sprintf("%.0f/s", sq.Rate()), pg.Rate()/sq.Rate(), 0, 0)
	}
	// PostgreSQL's events partitioned by day (retention drops a day) write
	// at least 95 % as fast as the one table they were.
	if pt, one := r.Events.run(enginePostgres), r.Events.run(enginePostgresTable); pt != nil && one != nil {
		add("events/s on PostgreSQL, partitioned / one table", fmt.Sprintf("%.0f/s", pt.Rate()), fmt.Sprintf("%.0f/s", one.Rate()), pt.Rate()/one.Rate(), 0, 0.95)
	}
	// What a retention pass costs the calls of a host serving them: their
	// p99 while it runs against without (reported without a target: the
	// figure says what a pass costs).
	if rt := r.Retention; rt != nil {
		for _, run := range rt.Runs {
			add(fmt.Sprintf("Host.Call p99 during a retention pass / without, %s (%d callers)", run.Engine, rt.Callers),
				fmtDur(run.With.P(.99)), fmtDur(run.Without.P(.99)), durRatio(run.With.P(.99), run.Without.P(.99)), 0, 0)
		}
	}
	at(pathHost, pathSDKStdio26, 32, rates, 0, 5)
	onOff("metrics", pathHost, pathHostBare, 1, .5, 1.03, 0)
	// audit { mode = "strict" } would be the default if it cost at most 10 %
	// of the throughput at 32 callers; it costs far more (a commit per
	// call's start, the writer's linger included), so it is opt-in and these
	// rows have no target.
	at(pathHostStrict, pathHost, 32, rates, 0, 0)
	at(pathHostStrict, pathHost, 1, .5, 0, 0)
	// A call through a role with ten rules on its tool, none matching, costs
	// at most 5 % more than one through a role without, so that rules cost
	// too little to be left off.
	at(pathHostRules, pathHost, 1, .5, 1.05, 0)
	// What a call limit (a store statement per call) and the approval path
	// (a preview, the SHA-256 of the arguments, the credential's bound of
	// pending work) cost: reported beside Host.Call, without targets.
	for _, p := range []string{pathHostLimited, pathHostApproved} {
		at(p, pathHost, 1, .5, 0, 0)
		at(p, pathHost, 32, rates, 0, 0)
	}
	// Tracing's target is that it costs nothing when off (a Go benchmark of
	// the host shows it); what every call traced and exported costs is
	// reported without one.
	onOff("tracing", pathHostTraced, pathHost, 1, .5, 0, 0)
	onOff("tracing", pathHostTraced, pathHost, 32, rates, 0, 0)
	// Our MCP front against a go-sdk server with a no-op tool on the same
	// transport in the same era, the same client calling both, each
	// answering the tool in its own process (our front with the no-op
	// group in-process): ≤ 1.3 × its p50 with 1 caller, at least its
	// calls/s with 32. Beside them, without targets, our front as it is
	// deployed, the no-op tool in a plugin process: that ratio holds the
	// plugin's gRPC hop as well (the raw gRPC Call row), which the go-sdk
	// server does not make.
	for _, p := range mcpPairs {
		at(p.front, p.sdk, 1, .5, 1.3, 0)
		at(p.front, p.sdk, 32, rates, 0, 1)
		at(p.ours, p.sdk, 1, .5, 0, 0)
		at(p.ours, p.sdk, 32, rates, 0, 0)
	}
	// An mcp_server group against the server it calls, in the era the
	// module speaks to it. The target is on p50 only; the
	// throughput at 32 callers is reported beside it without one (the same
	// cost bound would read ≥ 1/1.3 ≈ 0.77).
	at(pathHostMCP, pathSDKStdio26, 1, .5, 1.3, 0)
	at(pathHostMCP, pathSDKStdio26, 32, rates, 0, 0)
	// Against peer gateways, each serving server-everything, in each client
	// era: our front with it as an mcp_server group against the faster of
	// the peers (2025 only, peerCallee) at p50 with 1 caller, ≤ 0.75 ×, and
	// the better one's calls/s at 16, ≥ 1.5 ×; and against the floor in
	// the same era, a gateway of the go-sdk alone, ≤ 1.2 × at p50 with 1
	// caller and ≥ 0.9 × its calls/s at 16.
	peer := func(ours, which string, better func(a, b *Series) bool, conc int, q, maxV, minV float64) {
		var best *Series
		for _, g := range peerGateways {
			if s := r.series(g, conc); s != nil && (best == nil || better(s, best)) {
				best = s
			}
		}
		if best == nil {
			return
		}
		named(func(fig, callers string) string {
			return fmt.Sprintf("%s %s / the %s peer's, %s (%s)", ours, fig, which, best.Path, callers)
		}, ours, best.Path, conc, q, maxV, minV)
	}
	for _, e := range gatewayEras {
		peer(e.ours, "faster", func(a, b *Series) bool { return a.P(.5) < b.P(.5) }, 1, .5, 0.75, 0)
		peer(e.ours, "better", func(a, b *Series) bool { return a.Rate() > b.Rate() }, 16, rates, 0, 1.5)
		at(e.ours, e.floor, 1, .5, 1.2, 0)
		at(e.ours, e.floor, 16, rates, 0, 0.9)
	}
	// Why the floor, not the server called directly over stdio, is what a
	// gateway is held against: the go-sdk's HTTP server against its stdio
	// one, both answering the no-op tool themselves, without a target.
	at(pathSDKHTTP25, pathSDKStdio25, 1, .5, 0, 0)
	for _, c := range r.Cold {
		if c.Target > 0 {
			add("serve ready, "+c.Name+" (median) / target", fmtDur(median(c.Runs)), fmtDur(c.Target), durRatio(median(c.Runs), c.Target), 1, 0)
		}
	}
	if rr := r.Restart; rr != nil {
		add("SIGKILL → group unregistered (p50) / 10 ms target", fmtDur(median(rr.Gone)), "10 ms", durRatio(median(rr.Gone), 10*time.Millisecond), 1, 0)
		base := rr.Backoff + median(rr.Start)
		add("SIGKILL → registered again (p50) / (backoff + plugin start p50)", fmtDur(median(rr.Back)), fmtDur(base), durRatio(median(rr.Back), base), 0, 0)
	}
	if t := r.ToolsFor; t != nil {
		add("Host.Tools cached, 100×20 tools, 5-group role / 5 µs target", fmt.Sprintf("%.0f ns", t.Cached), "5000 ns", t.Cached/5000, 1, 0)
		add("Host.Tools cached / one map lookup", fmt.Sprintf("%.0f ns", t.Cached), fmt.Sprintf("%.1f ns", t.MapLookup), t.Cached/t.MapLookup, 0, 0)
	}
	if sb := r.Sandbox; sb != nil {
		add("run_command true: sandboxed p50 − unsandboxed p50 / 15 ms target", fmtDur(sb.overhead()), "15 ms", durRatio(sb.overhead(), 15*time.Millisecond), 1, 0)
	}
	if c := r.Context; c != nil {
		all, deferred := c.Rows[0], c.Rows[2]
		add("first request, role with every group deferred / with every tool (tokens; goal ≥ 85 % fewer)", fmt.Sprint(deferred.total()), fmt.Sprint(all.total()),
			float64(deferred.total())/float64(all.total()), 0.15, 0)
	}
	if s := r.Search; s != nil {
		s.checks(add)
	}
	if c := r.Code; c != nil {
		c.checks(add)
	}
	at(pathAPI, pathRaw, 1, .5, 0, 0)
	return out
}

// formatRatio prints a ratio with two decimals, or three below 0.1.
func formatRatio(v float64) string {
	if v < 0.1 {
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func rate(s *Series) string { return fmt.Sprintf("%.0f/s", s.Rate()) }

// write renders the report as Markdown.
func (r *report) write(w io.Writer) {
	m := r.Machine
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("# Benchmarks\n")
	p("Generated by `scripts/bench` (`go run ./bench`) on %s. Every figure stands beside a baseline measured "+
		"in the same run, and the ratio is what is held against its target (the summary's target column): "+
		"on a shared 2-core machine absolute figures move from run to run, ratios much less.\n", m.Date.Format("2006-01-02 15:04 MST"))
	if r.Quick {
		p("> **Quick run (`-quick`)**: small counts, for checking the program, not for reading the figures.\n")
	}
	if r.Paths != "" {
		p("> **Partial run (`-paths '%s'`)**: only the call paths the expression matches, and only what they measure; the other sections did not run.\n", r.Paths)
	}
	p("## Machine\n")
	p("| | |\n|---|---|")
	p("| CPU | %s |", m.CPU)
	p("| cores (nproc) | %d (GOMAXPROCS %d) |", m.NumCPU, r.GOMAXPROCS)
	p("| kernel | Linux %s |", m.Kernel)
	p("| Go | %s |", m.Go)
	p("| date | %s |", m.Date.Format(time.RFC3339))
	if r.ScriptWall > 0 {
		p("| wall time of `scripts/bench` | %s (build included; the bench itself %s) |", r.ScriptWall.Round(time.Second), r.Wall.Round(time.Second))
	} else {
		p("| wall time of the bench | %s |", r.Wall.Round(time.Second))
	}
	p("\n## How to reproduce\n")
	plot := ""
	if r.Plot != "" {
		plot = " and " + r.Plot
	}
	p("```sh\nscripts/bench            # builds bin/, runs go run ./bench, rewrites this file%s\n```\n", plot)
	p("scripts/bench starts a throwaway PostgreSQL cluster with `scripts/dev-postgres` (`scripts/test` installs PostgreSQL when it is missing) " +
		"and passes its DSN as `-pg-dsn`; the bench creates a fresh database for each of its PostgreSQL uses and drops them at the end, and " +
		"scripts/bench stops the cluster when it exits. By hand: `scripts/dev-postgres` in one shell, `go run ./bench -pg-dsn URL …` in another; " +
		"without `-pg-dsn` the PostgreSQL parts are skipped.\n")
	p("`go run ./bench -h` lists the knobs (calls per path, rounds, repetitions, concurrencies); `-quick` is a smoke run. " +
		"To study where a path's time goes, `-paths REGEXP -conc 1 -cpuprofile FILE` calls only through the paths the expression matches, " +
		"such as `'^MCP HTTP'` or `'Host.Call$'`, measures nothing else, writes no report (a partial one when `-out` is given) and profiles the bench process in that phase " +
		"(CPU, and the heap at its end): clients, in-process hosts and our HTTP server. " +
		"`-trace FILE` writes a Go execution trace of that phase, each call a region named after its path and each batch of the event writers one too: " +
		"`go tool trace FILE` shows, under user-defined regions, what the slowest calls waited for (the scheduler, GC, a batch). " +
		"A `-paths` matching `" + eventsName + "` runs section 8, events/s, as well; one matching `" + codeModeName + "` runs section 7c alone (`go run ./bench -paths 'code mode'`, after scripts/build).\n")

	p("## Summary: ratios against targets\n")
	p("| comparison | measured | baseline | ratio | target | |\n|---|---:|---:|---:|---:|:-:|")
	for _, c := range r.checks() {
		p("| %s | %s | %s | %s | %s | %s |", c.Name, c.Figure, c.Baseline, formatRatio(c.Value), c.Target(), c.Verdict())
	}
	r.writeCalls(p)
	r.writeRest(p)
	r.writePeers(p)
}

// rowsOf returns the call phase's rows with only the paths keep accepts,
// those where none ran left out.
func (r *report) rowsOf(keep func(path string) bool) [][]*Series {
	var rows [][]*Series
	for _, row := range r.Calls {
		if row = slices.DeleteFunc(slices.Clone(row), func(s *Series) bool { return !keep(s.Path) }); len(row) > 0 {
			rows = append(rows, row)
		}
	}
	return rows
}

// writeTables renders a table of rows per concurrency, each series with
// its ratios to the series of the path base(its path) at the same
// concurrency, named short in the ratio columns' heads ("–" where that
// path did not run).
func (r *report) writeTables(p func(string, ...any), rows [][]*Series, base func(path string) string, short string) {
	for _, row := range rows {
		p("**%d caller(s)**\n", row[0].Conc)
		p("| path | p50 | p99 | calls/s | p50 ÷ %[1]s | p99 ÷ %[1]s | calls/s ÷ %[1]s |\n|---|---:|---:|---:|---:|---:|---:|", short)
		for _, s := range row {
			b := r.series(base(s.Path), s.Conc)
			ratios := "– | – | –"
			if b != nil {
				ratios = fmt.Sprintf("%.2f | %.2f | %.2f", durRatio(s.P(.5), b.P(.5)), durRatio(s.P(.99), b.P(.99)), s.Rate()/b.Rate())
			}
			p("| %s | %s | %s | %.0f | %s |", s.Path, fmtDur(s.P(.5)), fmtDur(s.P(.99)), s.Rate(), ratios)
		}
		p("")
	}
}

// writeCalls renders the no-op call tables.
func (r *report) writeCalls(p func(string, ...any)) {
	rows := r.rowsOf(func(path string) bool { return !isPeerPath(path) })
	if len(rows) == 0 {
		return
	}
	p("\n## 1. A no-op tool call, %d ways\n", len(rows[0]))
	p("The tool does nothing and answers \"ok\" (`bench/noop`, a plugin using only `sdk`; `bench/mcpnoop` serves the same tool with the go-sdk). "+
		"Every MCP path is called by the same client, the go-sdk's with its defaults but the protocol version, which "+
		"`ClientSessionOptions.ProtocolVersion` pins to the path's era: %[1]s for the 2025 paths (initialize, then a session) and %[2]s "+
		"for the 2026 ones (server/discover, then sessionless requests, each with the version in its `_meta` and, over HTTP, in its "+
		"`Mcp-Protocol-Version` header). The bench stops unless each server answered in the version asked for (initialize's result, "+
		"or the version server/discover agreed on: a client pinned to %[2]s falls back to %[1]s when discover fails) and, over HTTP, "+
		"gave the session an `Mcp-Session-Id` in 2025 and none in 2026. One session (in 2026, one client) is shared by a path's callers; "+
		"the HTTP paths go through the same `http.Transport` settings (keep-alive connections). The targets hold our front, with the "+
		"no-op group in its own process as the go-sdk server's tool is, against the go-sdk server on the same transport in the same "+
		"era: a front against a front, each a process of its own. Our front with the no-op plugin, as it is deployed, is held against "+
		"the same server beside them without a target: that ratio holds the plugin's gRPC hop as well (the raw gRPC Call row), which "+
		"the go-sdk server does not make.\n", mcpversion.Legacy, mcpversion.Stateless)
	p("- **%s** — the baseline: `protocol.Client.Call` of the tool on a plugin process started with `internal/protocol.Launch`, no host in between.", pathRaw)
	p("- **%s** — an in-process `host.Host` with the plugin as a subprocess, called as an agent of a role holding its group: the whole pipeline (policy, validation, events, gRPC).", pathHost)
	if r.Postgres != "" {
		p("- **%s** — the same on a host of its own (its own plugin process and data directory) whose store is PostgreSQL "+
			"(a `store { driver = \"postgres\" }` block): a fresh database of the `-pg-dsn` server (%s), over TCP: "+
			"its events go to PostgreSQL, in batches, through the same writer. The call path itself does not touch the database "+
			"(no call id is given, so no result is claimed or stored), so its targets are %s's. "+
			"The PostgreSQL / SQLite rows compare it with %s, whose store is SQLite in its data directory.", pathHostPG, r.Postgres, pathHost, pathHost)
		p("- **%s** — two such hosts, each with its own plugin process and data directory, on one fresh database (the role made "+
			"through the first, an agent on each); caller i calls host i mod 2, as a load balancer pinning clients to hosts would, so "+
			"with 1 caller only the first host is called. Both run in the bench process, on the same cores as everything else: "+
			"the 2 hosts / 1 row shows what sharing the database costs (two event writers inserting into one table, two hosts and two "+
			"plugin processes on the same cores), not the throughput that hosts on separate machines would add.", pathHostPG2)
	}
	p("- **%s** — the same on a host of its own (its own plugin process) made with `host.Options{DisableMetrics: true}`: "+
		"what the Prometheus metrics cost a call is %s's p50 over this one's.", pathHostBare, pathHost)
	p("- **%s** — the same on a host of its own with `audit { mode = \"strict\" }`: a call is dispatched only once its started event is committed.", pathHostStrict)
	p("- **%s** — Host.Call's host and plugin process, as an agent of a role of its own, `bench-rules`, holding the same group with ten rules naming the tool (by name, `group:noop`, or none) "+
		"with ordinary conditions that do not match its calls (`has(args.path) && path.clean(args.path).startsWith('..')`, "+
		"`args.command.matches(…)`, `url.host(…)`, `role == …`), so that all ten are evaluated on every call.", pathHostRules)
	p("- **%s** — the same host and plugin process, as an agent of the credential `token/bench/1` of a role holding a limit on the tool "+
		"that it never reaches (2^30 calls an hour): a token taken from its credential's bucket in the store on every call. "+
		"**%s** — the same, of a role whose rule sends every call for an approval, which the host's approver (`approve`) gives at once: "+
		"the approval's preview and the SHA-256 of the arguments, taken and checked, and the credential's bound of pending work.", pathHostLimited, pathHostApproved)
	traced := ""
	if t := r.Traced; t != nil {
		traced = " In this run the sink received " + t.String() + ", warm-up included."
	}
	p("- **%s** — the same on a host of its own with tracing on: a `telemetry` block (`traces = \"otlp\"`, `sample_ratio = 1`: "+
		"every call sampled, as by default) exporting over OTLP/HTTP (`http/protobuf`, the SDK's batch span processor with its defaults) to a sink in the bench "+
		"process on a loopback port, which reads each request, counts it and its spans, and answers 200. Each call makes five spans: "+
		"the call, policy, validation, dispatch, and the plugin's handler span relayed back in its gRPC response. "+
		"The tracing on / off rows are this path against %s, which has none: what tracing every call costs the host and the plugin, "+
		"a real collector's work aside (the sink only reads and counts). "+
		"That tracing costs nothing when off is shown by a Go benchmark of the host (`go test -run '^$' -bench Tracing ./host`), not here.%s", pathHostTraced, pathHost, traced)
	p("- **%s** — the same host behind `server.New`, an `http.Server` in the bench process on a loopback port, with a role token.", pathAPI)
	p("- **%s**, **%s** — our MCP front: `toolhost serve` as a subprocess on a loopback port (a process of its own, as the go-sdk "+
		"servers are, with its own data directory and no-op plugin process; its events are not waited for between turns), called "+
		"by the go-sdk streamable HTTP client at `/mcp/bench` with a token of the role made through its API; the front serves a 2025 "+
		"session with the go-sdk's `StreamableHTTPHandler` and a 2026 request with its stateless one.", pathOursHTTP25, pathOursHTTP26)
	p("- **%s**, **%s** — their baselines: `bench/mcpnoop -http` as a subprocess on a loopback port, serving both eras on one endpoint as "+
		"our front does: a request whose `Mcp-Protocol-Version` header names %s goes to the go-sdk's `StreamableHTTPHandler` with "+
		"`Stateless: true` (the SDK serves that version over HTTP only so: a temporary session per request), any other to one with its "+
		"defaults (2025 sessions).", pathSDKHTTP25, pathSDKHTTP26, mcpversion.Stateless)
	p("- **%s**, **%s**, **%s**, **%s** — our front again, with the no-op group (the plugin's, `bench/internal/noopgroup`) "+
		"registered in-process (`host.Host.RegisterGroup`): `bench/mcpfront`, a host with no module whose role `bench` holds the "+
		"group, as a subprocess with a data directory of its own: over HTTP `server.New` on a loopback port, with a role token, "+
		"serving both eras; over stdio `server.ServeMCP` as `toolhost mcp` does, one for each era. A call goes through the front and "+
		"the whole pipeline (policy, validation, events) and answers in that process, as the go-sdk server's tool does.",
		pathFrontHTTP25, pathFrontHTTP26, pathFrontStdio25, pathFrontStdio26)
	p("- **%s**, **%s** — our MCP front over stdio: `toolhost mcp -role bench` as a subprocess, one for each era, each with a host of its own "+
		"(its own data directory and no-op plugin process; its events are not waited for between turns).", pathOursStdio25, pathOursStdio26)
	p("- **%s**, **%s** — the baselines of our stdio front, the 2026 one that of `mcp_server` groups too: `bench/mcpnoop` as a subprocess "+
		"over stdio, one for each era.", pathSDKStdio25, pathSDKStdio26)
	p("- **%s** — a second in-process `host.Host` whose only module is an `mcp_server` block running another `bench/mcpnoop` process "+
		"(unconfined, like the baseline's), its tool `noop` called through `Host.Call` as an agent of a role holding the group: the whole pipeline "+
		"(policy, validation, events), then `internal/mcp/mcpsource`'s go-sdk client over stdio in %s, the version it agrees on with mcpnoop "+
		"(the bench checks it), one session shared by the callers. "+
		"A host of its own, because in the first one the plugin's `noop` would shadow the server's.", pathHostMCP, mcpversion.Stateless)
	if r.Postgres != "" {
		r.writeBalanced(p)
	}
	p("")
	left := "the MCP paths of the 2025 era and our in-process fronts" // out of the plot (see run)
	if r.Postgres == "" {
		p("> The PostgreSQL paths (%s) did not run: no `-pg-dsn` (scripts/bench passes one).\n",
			strings.Join(slices.DeleteFunc(slices.Clone(callPaths), func(path string) bool { return !isPGPath(path) }), ", "))
	} else {
		left = "the PostgreSQL paths and " + left
	}
	p("The plot leaves out %s, to keep its legend readable; they are in the tables.\n", left)
	if r.Plan.Calls != nil {
		p("Calls per path: %d with 1 caller, %d with more, split into %d rounds in which the paths take turns (in a rotated order), "+
			"after %d warm-up calls each. Between two turns the bench waits, untimed, until the hosts' events are on disk (and the traced "+
			"host's spans exported), so one path's backlog does not slow the next. calls/s = calls / summed wall time of the turns.\n",
			r.Plan.Calls(1), r.Plan.Calls(32), r.Plan.Rounds, r.Plan.Warmup)
	}
	r.writeTables(p, rows, func(string) string { return pathRaw }, "raw")
	if r.Plot != "" {
		p("![latency CDFs](%s)\n", r.Plot)
		p("Empirical CDFs of the latency (log-scale x) with 1 and 32 callers; further left is faster.\n")
	}
}

// writeBalanced renders the description of the round-robin paths, with how
// their work spread over the hosts when they ran.
func (r *report) writeBalanced(p func(string, ...any)) {
	p("- **%s**, **%s** — sessionless MCP clients behind a load balancer without affinity (docs/several-hosts.md): "+
		"our front as for %s (`toolhost serve` as a subprocess with the no-op plugin and serve's defaults), one host and two, "+
		"each with a `store { driver = \"postgres\" }` block naming a fresh database of the `-pg-dsn` server, one per path: the "+
		"two hosts share theirs, started from the same config file, each with its own data directory, plugin process and port. "+
		"A round-robin reverse proxy in the bench process (`net/http/httputil`, on a loopback port, keeping idle connections to "+
		"each host) sends each HTTP request to the next host in turn, whoever sent it; the go-sdk client calls `/mcp/bench` "+
		"through it in %s, with a token of the role made through the first host. Each sessionless request is an HTTP request "+
		"of its own, so with two hosts one caller's calls alternate between them, and each host finds the client's agent in the "+
		"database. The one host is the two's baseline (the same proxy, client and database), so the 2 hosts / 1 rows are what "+
		"spreading a client's requests over hosts costs, two hosts and their plugin processes on the same cores as everything "+
		"else, not what hosts on separate machines would add. They run at the concurrencies of `-conc` and `-peer-conc` (16, the "+
		"throughput target's, is one of the latter)."+
		" `-rr-run N` with `-paths` sends N requests in a row to each host instead, which tells what hosts taking turns on the same cores costs from what the shared database does (docs/several-hosts.md, \"What spreading a client over hosts costs\").", pathRR1, pathRR2, pathOursHTTP26, mcpversion.Stateless)
	for _, s := range r.Spreads {
		ran := "" // when the hosts' calls were not counted
		if s.Calls != nil {
			ran = fmt.Sprintf(", which ran %s no-op calls (their `tool_call.started` events, by the `host` they name)", joinCounts(s.Calls))
		}
		turn := "in turn"
		if s.Run > 1 {
			turn = fmt.Sprintf("%d in a row to each (`-rr-run %d`)", s.Run, s.Run)
		}
		p("  In this run, %s: the proxy sent %s HTTP requests to the hosts %s (warm-up, discovery and calls)%s; "+
			"it logged %d errors (none failed a call: the bench stops at the first).", s.Path, joinCounts(s.Requests), turn, ran, s.Errors)
	}
}

// joinCounts writes counts as "5 and 7", "1, 2 and 3".
func joinCounts(counts []int64) string {
	var out string
	for i, n := range counts {
		switch {
		case i == 0:
		case i == len(counts)-1:
			out += " and "
		default:
			out += ", "
		}
		out += fmt.Sprint(n)
	}
	return out
}

// writeRest renders what ran of cold start, kill/restart, Host.Tools, RSS
// and the rest.
func (r *report) writeRest(p func(string, ...any)) {
	if len(r.Cold) > 0 {
		p("## 2. Cold start of `toolhost serve`\n")
		p("From just before the process starts to the first 200 from `GET /readyz` (polled every 0.5 ms), a fresh data directory and a free " +
			"port each time (`TOOLHOST_DATA_DIR`, `TOOLHOST_LISTEN`), log level warn. The configurations take turns, after one untimed run each. " +
			"The no-op copies are `bench/noop` with their own group ids. Baseline: one plugin's start (section 3) — N plugins start in parallel on 2 cores.\n")
		p("| configuration | plugins | median | min | max | runs | target |\n|---|---:|---:|---:|---:|---:|---:|")
		for _, c := range r.Cold {
			target := "–"
			if c.Target > 0 {
				target = "≤ " + fmtDur(c.Target)
			}
			lo, hi := minMax(c.Runs)
			p("| %s | %d | %s | %s | %s | %d | %s |", c.Name, c.Plugins, fmtDur(median(c.Runs)), fmtDur(lo), fmtDur(hi), len(c.Runs), target)
		}
	}
	if rr := r.Restart; rr != nil {
		p("\n## 3. SIGKILL of a plugin\n")
		p("An in-process host runs the no-op plugin with `restart = \"always\"` and `host.Options{RestartBackoff: %s}`. The bench sends SIGKILL "+
			"to the plugin's pid and times, from the kill, when a `Host.Watch` callback first sees the group missing from the manager, and when it "+
			"sees a new registration. Baseline: a plugin's start, `protocol.Launch` + Configure + Describe of the same binary, measured alternately.\n", rr.Backoff)
		p("| | p50 | max | runs |\n|---|---:|---:|---:|")
		for _, x := range []struct {
			name string
			ds   []time.Duration
		}{{"SIGKILL → group unregistered", rr.Gone}, {"SIGKILL → group registered again", rr.Back}, {"baseline: plugin start (launch → described)", rr.Start}} {
			_, hi := minMax(x.ds)
			p("| %s | %s | %s | %d |", x.name, fmtDur(median(x.ds)), fmtDur(hi), len(x.ds))
		}
	}
	if t := r.ToolsFor; t != nil {
		p("\n## 4. Host.Tools\n")
		p("%d in-process groups of %d tools (`sdk.Group`s through `Host.RegisterGroup`); an agent whose role has N of them. \"After an "+
			"invalidation\" is the first Host.Tools after `Roles().Update` changed the role (timed alone), which recompiles its view. "+
			"Baselines: the 5 µs target, and one lookup in a Go map of all %d tool names.\n", t.Groups, t.ToolsPerGroup, t.Groups*t.ToolsPerGroup)
		p("| case | ns/op | ÷ 5 µs target | ÷ map lookup |\n|---|---:|---:|---:|")
		p("| cached, 5-group role (100 tools) | %.0f | %.3f | %.1f |", t.Cached, t.Cached/5000, t.Cached/t.MapLookup)
		for _, n := range []int{1, 5, 50} {
			v := t.Invalidated[n]
			p("| after an invalidation, %d-group role (%d tools) | %.0f | %.2f | %.0f |", n, n*t.ToolsPerGroup, v, v/5000, v/t.MapLookup)
		}
		p("| baseline: one map lookup | %.1f | | |", t.MapLookup)
	}
	if len(r.RSS) > 0 {
		p("\n## 5. Resident memory\n")
		p("VmRSS from `/proc/PID/status` of a `toolhost serve` with the default config.hcl, after its plugins served 250 calls.\n")
		p("| process | pid | VmRSS | note |\n|---|---:|---:|---|")
		for _, row := range r.RSS {
			note := row.Note
			if row.Extra > 0 {
				note += fmt.Sprintf("; its Chromium processes: %.0f MiB VmRSS summed (shared pages counted in each), %.0f MiB Pss summed",
					float64(row.Extra)/1024, float64(row.PSS)/1024)
			}
			rss := "–"
			if row.KiB > 0 {
				rss = fmt.Sprintf("%.1f MiB", float64(row.KiB)/1024)
			}
			p("| %s | %d | %s | %s |", row.Name, row.Pid, rss, note)
		}
	}
	if sb := r.Sandbox; sb != nil {
		p("\n## 6. Sandboxed commands\n")
		p("`run_command {\"command\":\"true\"}` through `protocol.Client.Call` to two `bin/plugins/command` processes, one confining its "+
			"commands as it does by default and one configured with `sandbox = \"off\"`, the calls alternating. The sandbox here: %s.\n", sb.Status)
		p("| | p50 | p99 | calls |\n|---|---:|---:|---:|")
		for _, x := range []struct {
			name string
			ds   []time.Duration
		}{{"sandboxed (bubblewrap, Landlock, limits)", sb.Sandboxed}, {"baseline: sandbox = \"off\"", sb.Plain}} {
			p("| %s | %s | %s | %d |", x.name, fmtDur(median(x.ds)), fmtDur(percentile(slices.Sorted(slices.Values(x.ds)), .99)), len(x.ds))
		}
		p("| overhead at p50 | %s | | |", fmtDur(sb.overhead()))
	}
	if c := r.Context; c != nil {
		p("\n## 7. Context: the first model request on a real catalog\n")
		p("Tokens (o200k_base) of an agent's first model request: the role's prompt (`Roles().Prompt`) and its tool definitions as JSON. "+
			"The catalog is the first-party modules and npm's reference MCP servers filesystem (`fs_` prefix), memory and everything; the role holds all of them (%s). "+
			"Deferred, the role carries `tool_search`'s `find_tools` and `load_tools` and finds the others when it needs them.\n", strings.Join(c.Groups, ", "))
		p("| request | tools sent | tool tokens | prompt tokens | total | ÷ every tool | left to find_tools |\n|---|---:|---:|---:|---:|---:|---:|")
		for _, row := range c.Rows {
			p("| %s | %d | %d | %d | %d | %.3f | %d |", row.Name, row.Tools, row.ToolTokens, row.PromptTokens, row.total(),
				float64(row.total())/float64(c.Rows[0].total()), row.LoadableTools)
		}
	}
	if s := r.Search; s != nil {
		s.write(p)
	}
	if c := r.Code; c != nil {
		c.write(p)
	}
	r.writeEvents(p)
	r.writeRetention(p)
}

// writeRetention renders the retention measurement, when it ran.
func (r *report) writeRetention(p func(string, ...any)) {
	rt := r.Retention
	if rt == nil {
		return
	}
	p("\n## 8b. Retention: what a pass costs a host serving calls\n")
	p("A host with the no-op plugin and `audit { retention = \"1d\" }` on each engine, whose store holds the events of no-op calls "+
		"two and three days old, written before. %d callers call the no-op tool through `Host.Call`: a round without a pass, then rounds "+
		"for as long as a pass (`Host.RetainEvents`) exports every old event (gzipped JSON lines) and deletes it: on SQLite in transactions "+
		"of 500 events that take turns with the event writer's, on PostgreSQL by dropping the two days' partitions. A pass works a quarter "+
		"of its time at most: after each 1000 events exported and each batch deleted it rests three times as long as that work took. "+
		"The calls' own events are written meanwhile. No target: the figure says what a pass costs. Bytes per event: `store.EventBytes` (SQLite: the pages of the "+
		"events table and its index; PostgreSQL: the partitions' total size) over the old events, before the pass; export bytes per event: the export files' size over the events they hold.\n", rt.Callers)
	p("| engine | old events | pass | exported | deleted | calls without | p50 | p99 | calls during | p50 | p99 | p99 ÷ | bytes per event | export bytes per event |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, run := range rt.Runs {
		p("| %s | %d | %s | %d | %d | %d | %s | %s | %d | %s | %s | %.2f | %.0f | %.0f |", run.Engine, run.Old, run.Took.Round(time.Millisecond),
			run.Pass.Exported, run.Pass.Deleted, run.Without.Calls, fmtDur(run.Without.P(.5)), fmtDur(run.Without.P(.99)),
			run.With.Calls, fmtDur(run.With.P(.5)), fmtDur(run.With.P(.99)), durRatio(run.With.P(.99), run.Without.P(.99)), run.BytesPerEvent, run.ExportPerEvent)
	}
}

// writeEvents renders the events/s measurement, or says why it is missing.
func (r *report) writeEvents(p func(string, ...any)) {
	e := r.Events
	if e == nil {
		return
	}
	p("\n## 8. Events/s: the event writer on SQLite and PostgreSQL\n")
	p("A `store.EventWriter` with the host's defaults (batches of up to 1024 events, one transaction each, a 2 ms linger) on a fresh store "+
		"of each engine, fed by %d goroutines calling `Emit` as fast as it returns (it blocks only when 65536 events wait) with the events of "+
		"no-op calls: `tool_call.started` and `tool_call.completed` in turn, with the payloads the host gives them. "+
		"Each round emits its share of the events and ends when `Flush` returns, all of them written; the engines take turns over %d rounds, "+
		"after %d untimed events each. events/s = events / summed wall time of the rounds. The writer, the emitters and SQLite run in the "+
		"bench process; PostgreSQL in its own, on the same cores, so that events/s is bounded by the CPU each event costs: "+
		"the table gives it, the bench process's (getrusage: the emitters, the writer, SQLite or pgx) and the PostgreSQL server's "+
		"(its processes' times in /proc, when it runs on this machine). Neither engine syncs each commit to disk: SQLite runs in WAL mode "+
		"with synchronous=NORMAL, and the settings of the PostgreSQL server are below. The writer's goroutine has a thread of its own, "+
		"SQLite's work with it: at nice 19 while that thread gets a CPU when it needs one, at the process's priority once it waits too long "+
		"(store/priority.go); PostgreSQL's processes keep their priority. Baseline: SQLite, the default engine.\n", e.Emitters, e.Rounds, e.Warmup)
	if r.Postgres != "" {
		p("PostgreSQL: %s.\n", r.Postgres)
	}
	sq := e.run(engineSQLite)
	cpu := func(run eventsRun, d time.Duration) string {
		if v := run.perEvent(d); v >= 0 {
			return fmt.Sprintf("%.1f µs", v)
		}
		return "–"
	}
	p("| engine | where | events | wall | events/s | ÷ SQLite | CPU per event, bench process | CPU per event, PostgreSQL server |\n|---|---|---:|---:|---:|---:|---:|---:|")
	for _, run := range e.Runs {
		p("| %s | %s | %d | %s | %.0f | %.2f | %s | %s |", run.Engine, run.Where, run.Events, run.Wall.Round(time.Millisecond), run.Rate(), run.Rate()/sq.Rate(),
			cpu(run, run.CPU), cpu(run, run.ServerCPU))
	}
	if e.run(enginePostgres) == nil {
		p("\n> PostgreSQL was not measured: no `-pg-dsn` (scripts/bench passes one).")
	}
}

func minMax(ds []time.Duration) (lo, hi time.Duration) {
	for i, d := range ds {
		if i == 0 || d < lo {
			lo = d
		}
		if d > hi {
			hi = d
		}
	}
	return lo, hi
}

// writeFile writes the report to file, creating its directory.
func (r *report) writeFile(file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	var b strings.Builder
	r.write(&b)
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// summary prints the summary lines.
func (r *report) summary(w io.Writer) {
	fmt.Fprintf(w, "\nbench: %s on %d cores (%s), %s\n", r.Machine.CPU, r.Machine.NumCPU, r.Machine.Go, r.Wall.Round(time.Second))
	for _, c := range r.checks() {
		fmt.Fprintf(w, "  %s %-68s %10s vs %-10s = %6.2f  (target %s)\n", c.Verdict(), c.Name, c.Figure, c.Baseline, c.Value, c.Target())
	}
	if t := r.Traced; t != nil {
		fmt.Fprintf(w, "  %s: the OTLP sink received %s\n", pathHostTraced, t)
	}
	if e := r.Events; e != nil {
		for _, run := range e.Runs {
			server := ""
			if v := run.perEvent(run.ServerCPU); v >= 0 {
				server = fmt.Sprintf(" + %.1f µs in the server", v)
			}
			fmt.Fprintf(w, "  events/s, %-10s %8.0f/s  (%d events through a store.EventWriter; CPU per event %.1f µs in the bench%s)\n",
				run.Engine, run.Rate(), run.Events, run.perEvent(run.CPU), server)
		}
	}
	for _, s := range r.Spreads {
		fmt.Fprintf(w, "  %s: requests per host %v (%d in a row), calls per host %v, proxy errors %d\n", s.Path, s.Requests, s.Run, s.Calls, s.Errors)
	}
	if r.Postgres == "" {
		fmt.Fprintln(w, "  PostgreSQL: not measured (no -pg-dsn)")
	}
}

// writePeers renders the peer paths' tables, when they ran.
func (r *report) writePeers(p func(string, ...any)) {
	rows := r.rowsOf(isPeerPath)
	if len(rows) == 0 {
		return
	}
	args, _ := json.Marshal(peerCallee.args)
	legacy := peerCallee.opts.ProtocolVersion
	p("\n## 9. Against peer MCP gateways\n")
	p("npm's reference server `%s` (its stdio server) served over streamable HTTP by our MCP front, by the floor (a gateway made of "+
		"the go-sdk alone) and by two peer gateways, each a process of its own on a loopback port, and called directly over stdio; every "+
		"path calls its `echo` tool (`%s`), one of its cheapest. Same client as section 1, the go-sdk's, one session (in %s, one client) "+
		"shared by a path's callers. Our front and the floor are called in both client eras, %s (a session) and %s (sessionless "+
		"requests), each checked as in section 1; each holds one session with server-everything, in %s, the newest version it speaks "+
		"(TypeScript SDK 1.x). The peers and the direct stdio path are called in %s only: in %s mcp-proxy would answer in per-request "+
		"sessions of its own and supergateway would start a server process for each request, so neither would be measured as the "+
		"gateway it is. The paths run in section 1's call phase, taking turns with its paths in the same rounds at the concurrencies "+
		"both run at (`-conc`, `-peer-conc`), and with each other at the others. In this run: %s.\n",
		npmEverything, args, mcpversion.Stateless, legacy, mcpversion.Stateless, legacy, legacy, mcpversion.Stateless, r.Peers)
	p("- **%s**, **%s** — our MCP front: `toolhost serve` as a process of its own, as each peer is, whose only module is an "+
		"`mcp_server` block running server-everything unconfined (`sandbox = \"off\"`, as the peers run it), with a token of a role "+
		"holding the group, as for %s; one process serves both eras, with serve's default garbage-collection policy (docs/operating.md).", pathPeerOurs25, pathPeerOurs26, pathOursHTTP25)
	p("- **%s**, **%s** — the floor: `bench/sdkgateway SERVER`, a gateway of the go-sdk alone with its defaults, one process serving "+
		"both eras. At its start it opens one client session with server-everything over stdio (`mcp.CommandTransport`), shared by every "+
		"request, lists its tools and adds each as listed (its input schema among the rest) to a go-sdk server with `Server.AddTool`, "+
		"whose handler forwards the call's arguments over that session and answers with the server's result as is. It serves that server "+
		"over streamable HTTP as `bench/mcpnoop -http` does for %s and %s (`bench/internal/sdkhttp`: the go-sdk's `StreamableHTTPHandler` "+
		"with `Stateless: true` for requests of %s, one with its defaults for 2025 sessions) on a free loopback port. No policy, no "+
		"events, no token: what a gateway built on the SDK costs before any work of its own.", pathFloor25, pathFloor26, pathSDKHTTP25, pathSDKHTTP26, mcpversion.Stateless)
	for _, g := range gateways {
		shim := ""
		if g.loopbackShim {
			shim = " It has no option for the address it listens on: a module node preloads into it (`--import`) makes it listen on " +
				"127.0.0.1, not on every interface."
		}
		p("- **%s** — `%s %s`, ready once `GET %s` answers 200 (polled every 5 ms).%s", g.path, g.bin,
			strings.Join(g.args("SERVER", "PORT"), " "), g.ready, shim)
	}
	p("- **%s** — server-everything as a subprocess of the client, over stdio: no gateway at all.\n", pathEverything)
	p("The gateways run with node, SERVER being server-everything's executable in the npm cache directory (`TOOLHOST_NPM_DIR`, "+
		"default `~/.cache/toolhost-npm`) and PORT a free port of 127.0.0.1. "+
		"supergateway runs stateful (one server process for the session; stateless, it starts one per request) and without logging each "+
		"message, as its default level does; mcp-proxy with its defaults but the streamable HTTP endpoint alone (one server process "+
		"shared by its sessions). Targets (summary), in each era: our front ≤ 0.75 × the faster peer at p50 with 1 caller and ≥ 1.5 × "+
		"the better peer's calls/s with 16 (the peers in %s for both), and ≤ 1.2 × the floor of the same era at p50 with 1 caller and "+
		"≥ 0.9 × its calls/s with 16. The direct stdio path has no target: no HTTP gateway on the SDK comes near it, as the summary's "+
		"%s p50 / %s p50 row shows, the go-sdk's own streamable HTTP server against its stdio server, each answering a no-op call "+
		"itself: an HTTP front to a stdio server takes that much more, and the server's own time, before any work of its own. "+
		"The tables' ratios are to the floor of the path's era (the %s one for the peers and the direct stdio path).\n",
		legacy, pathSDKHTTP25, pathSDKStdio25, legacy[:4])
	r.writeTables(p, rows, floorOf, "floor")
	writeSDKCost(p)
}

// sdkCost is what the go-sdk's decoding costs a call through the gateway,
// measured once in a scratch build with the SDK patched (see writeSDKCost)
// and not again by the bench: the patch is never committed.
var sdkCost = struct {
	sdk, commit, date string
	// per call of BenchmarkGatewayCall, in each era: bytes and objects
	// allocated as released and as patched
	bytes, allocs [2][2]int
	// calls/s at 16 callers of our front and of the floor in each era,
	// as released and as patched: one run of each build, one after the
	// other (-paths 'everything \(20' -calls 4000 -rounds 4)
	ours, floor [2][2]int
	// per call of BenchmarkGatewayCall in the stateless era, as released, since
	// the front answers plain sessionless calls itself and before: bytes
	// and objects each; measured on directDate
	direct     [4]int
	directDate string
}{
	sdk: "v1.8.0", commit: "c105835", date: "2026-12-02",
	bytes:  [2][2]int{{434_000, 39_000}, {746_000, 87_000}},
	allocs: [2][2]int{{464, 434}, {676, 627}},
	ours:   [2][2]int{{2696, 4230}, {1843, 3435}},
	floor:  [2][2]int{{2068, 6189}, {1181, 4548}},
	direct: [4]int{283469, 474, 747162, 681}, directDate: "2026-12-03",
}

// writeSDKCost writes what the go-sdk's JSON decoding costs a call, for an
// upstream report to quote.
func writeSDKCost(p func(string, ...any)) {
	c := sdkCost
	p("\n### What the go-sdk's decoding costs\n")
	p("The go-sdk (%s) decodes every JSON value through its `internal/json.Unmarshal`, which makes a segmentio `json.Decoder` "+
		"over the bytes it is given and so a fresh 32 KiB read buffer for each value: each message twice or more (the batch check, "+
		"the message, its `_meta`, its params, its result and the content in it), on both ends of a gateway. Patched in a scratch "+
		"build to parse the bytes in place (`json.Parse` with the same flags, the depth check kept; never committed), the same "+
		"calls allocate (`BenchmarkGatewayCall` in `internal/mcp/mcpfront`: a go-sdk client, our front over streamable HTTP and an "+
		"`mcp_server` group of `bench/mcpnoop`, all in one process but the server; %s, commit %s):\n", c.sdk, c.date, c.commit)
	p("| era | bytes per call, as released | patched | objects per call, as released | patched |\n|---|---:|---:|---:|---:|")
	for i, era := range []string{mcpversion.Legacy, mcpversion.Stateless} {
		p("| %s | %s | %s | %d | %d |", era, kib(c.bytes[i][0]), kib(c.bytes[i][1]), c.allocs[i][0], c.allocs[i][1])
	}
	p("\nThe read buffers are %.0f %% and %.0f %% of the bytes: about %d and %d buffers a call. They live a few microseconds, "+
		"but they set how often the collector runs; serve's GC policy (docs/operating.md) trades memory for that CPU, the floor "+
		"runs with Go's defaults. With the SDK patched so in both (the same run of section 9's paths, each build in turn), calls/s "+
		"at 16 callers:\n", 100*float64(c.bytes[0][0]-c.bytes[0][1])/float64(c.bytes[0][0]),
		100*float64(c.bytes[1][0]-c.bytes[1][1])/float64(c.bytes[1][0]),
		(c.bytes[0][0]-c.bytes[0][1])/32768, (c.bytes[1][0]-c.bytes[1][1])/32768)
	p("| era | our front, as released | patched | the floor, as released | patched |\n|---|---:|---:|---:|---:|")
	for i, era := range []string{mcpversion.Legacy, mcpversion.Stateless} {
		p("| %s | %d/s | %d/s (%.1f ×) | %d/s | %d/s (%.1f ×) |", era, c.ours[i][0], c.ours[i][1], float64(c.ours[i][1])/float64(c.ours[i][0]),
			c.floor[i][0], c.floor[i][1], float64(c.floor[i][1])/float64(c.floor[i][0]))
	}
	p("\nSince then the front answers a plain sessionless `tools/call` itself, without the session the SDK makes for each "+
		"sessionless request (docs/mcp.md), and the SDK as released allocates less on that path: in %s, `BenchmarkGatewayCall` "+
		"allocates %s and %d objects per call, against %s and %d before (%s, three runs each, the same in each run); the 2025 "+
		"sessions are the SDK's as before.\n", mcpversion.Stateless, kib(c.direct[0]), c.direct[1], kib(c.direct[2]), c.direct[3], c.directDate)
}

// kib writes n bytes in KiB.
func kib(n int) string { return fmt.Sprintf("%.0f KiB", float64(n)/1024) }
