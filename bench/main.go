// Command bench measures toolhost against baselines taken in the same run and
// writes docs/BENCHMARKS.md with a plot of the latency distributions. Run it
// through scripts/bench, which builds the binaries it starts first.
//
// Every figure is reported beside its baseline and as a ratio, because on a
// shared 2-core machine only ratios taken in one run hold: a no-op tool call
// through each path (raw gRPC, Host.Call, POST /api/call, our MCP front and a
// go-sdk MCP server over streamable HTTP and over stdio, each in both
// protocol eras, Host.Call of that server as an mcp_server group, Host.Call
// with metrics off, with strict audit and traced, and, given a PostgreSQL
// server, Host.Call on it and two hosts sharing one database, and our MCP
// front's sessionless clients behind a round-robin proxy over one and two
// `toolhost serve` hosts on one database), a call of npm's server-everything behind our
// MCP front and a gateway of the go-sdk alone (bench/sdkgateway) in both
// protocol eras and behind the peer gateways supergateway and mcp-proxy, the
// events/s of the event writer on SQLite and PostgreSQL,
// `toolhost serve` cold start, plugin kill and restart, Host.Tools, the RSS of
// the host and its plugins, what the sandbox adds to a command, and the
// tokens and model turns code mode saves on three tasks (bench/codetasks.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"
)

// options are the command-line flags.
type options struct {
	out, plot string // the report and the plot to write
	root      string // the repository, holding bin/ and config.hcl
	calls     int    // calls per path at each concurrency ≥ 8 (half at 1)
	rounds    int    // rounds the calls are split into
	reps      int    // repetitions of cold start and of kill/restart
	quick     bool   // a fast smoke run with small counts
	since     int64  // when scripts/bench started, in Unix nanoseconds; 0 when not known
	cpuprof   string // a CPU profile of the no-op call phase, when set
	trace     string // an execution trace of the no-op call phase, when set
	paths     string // a regular expression: only the call paths it matches, and nothing else, when set
	outGiven  bool   // -out was given: a -paths run writes its partial report there, unless it is the full report's file
	concs     string // the concurrencies of the call phase, comma-separated
	peerConcs string // those of its peer paths, comma-separated
	pgDSN     string // a PostgreSQL server for the PostgreSQL paths and events/s, "" to skip them
	events    int    // events written per engine by the events/s measurement
	rrRun     int    // requests in a row the round-robin proxy sends to one host
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "docs/BENCHMARKS.md", "the report to write")
	flag.StringVar(&o.plot, "plot", "docs/bench-latency.png", "the latency plot to write (PNG)")
	flag.StringVar(&o.root, "root", ".", "the repository root: bin/toolhost, bin/plugins/ and config.hcl")
	flag.IntVar(&o.calls, "calls", 30000, "calls per path at each concurrency of 8 or more (half at concurrency 1)")
	flag.IntVar(&o.rounds, "rounds", 8, "rounds the calls are split into, the paths taking turns in each")
	flag.IntVar(&o.reps, "reps", 20, "repetitions of kill/restart (cold start runs a quarter as many, at least 3)")
	flag.Int64Var(&o.since, "since", 0, "when scripts/bench started (Unix ns), to report its wall time")
	flag.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the no-op call phase (this process: host, server and clients) to this file, and a heap profile at its end to FILE.heap")
	flag.StringVar(&o.trace, "trace", "", "write a Go execution trace of the no-op call phase to this file, each call a region named after its path "+
		"and each batch of the event writers a region (go tool trace FILE: user-defined regions)")
	flag.StringVar(&o.paths, "paths", "", "a regular expression: call the no-op tool only through the paths whose names it matches (such as '^MCP HTTP' or 'Host.Call$'), "+
		"measure nothing else (but events/s, retention and code mode when it matches \""+eventsName+"\", \""+retentionName+"\" or \""+codeModeName+"\") and write no report "+
		"but a partial one when -out is given, and is not docs/BENCHMARKS.md")
	flag.StringVar(&o.concs, "conc", "1,8,32,64", "the numbers of concurrent callers of the call phase, comma-separated")
	flag.StringVar(&o.peerConcs, "peer-conc", "1,16", "the numbers of concurrent callers of its paths against peer gateways (server-everything behind our front, "+
		"the go-sdk gateway, supergateway, mcp-proxy, and alone), comma-separated; the round-robin paths run at these and -conc's")
	flag.StringVar(&o.pgDSN, "pg-dsn", "", "a postgres:// URL of a PostgreSQL server on which the bench may create and drop databases "+
		"(scripts/bench starts one with scripts/dev-postgres): the PostgreSQL call paths and events/s run on it; without it they are skipped")
	flag.IntVar(&o.events, "events", 200000, "events written per engine (SQLite, PostgreSQL) by the events/s measurement")
	flag.IntVar(&o.rrRun, "rr-run", 1, "requests in a row the round-robin proxy sends to one host before the next (only with -paths): "+
		"1, the default, alternates hosts at each request; larger runs tell what hosts taking turns on the same cores costs from what the shared store does")
	flag.BoolVar(&o.quick, "quick", false, "a smoke run with small counts; the report says so")
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { o.outGiven = o.outGiven || f.Name == "out" })
	if o.quick {
		o.calls, o.rounds, o.reps, o.events = 1000, 2, 4, 20000
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// logf prints progress on stderr.
func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func run(ctx context.Context, o options) error {
	began := time.Now()
	root, err := filepath.Abs(o.root)
	if err != nil {
		return err
	}
	for _, f := range []string{"bin/toolhost", "bin/plugins/workspace", "config.hcl"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			return fmt.Errorf("%w (run scripts/build first)", err)
		}
	}
	tmp, err := os.MkdirTemp("", "toolhost-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	exe := executables{root: root, noop: filepath.Join(tmp, "noop"), mcpnoop: filepath.Join(tmp, "mcpnoop"), mcpfront: filepath.Join(tmp, "mcpfront"),
		sdkgateway: filepath.Join(tmp, "sdkgateway"), toolhost: filepath.Join(root, "bin/toolhost")}
	for out, pkg := range map[string]string{exe.noop: "./bench/noop", exe.mcpnoop: "./bench/mcpnoop", exe.mcpfront: "./bench/mcpfront",
		exe.sdkgateway: "./bench/sdkgateway"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir, cmd.Stderr = root, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build %s: %w", pkg, err)
		}
	}
	// The config's TOOLHOST_STORE_DSN would put every host on PostgreSQL,
	// the baselines' too: PostgreSQL is -pg-dsn's.
	if os.Getenv("TOOLHOST_STORE_DSN") != "" {
		logf("bench: ignoring TOOLHOST_STORE_DSN (the SQLite hosts and toolhost processes must stay on SQLite; -pg-dsn is for PostgreSQL)")
		os.Unsetenv("TOOLHOST_STORE_DSN")
	}
	var pg *pgCluster
	if o.pgDSN != "" {
		if pg, err = newPGCluster(ctx, o.pgDSN); err != nil {
			return err
		}
		defer pg.Close()
		logf("PostgreSQL: %s", pg.About)
	}
	rep := &report{Quick: o.quick, GOMAXPROCS: runtime.GOMAXPROCS(0), Machine: describeMachine()}
	if pg != nil {
		rep.Postgres = pg.About
	}
	rep.Plan = callPlan{Rounds: o.rounds, Warmup: 400,
		Calls: func(c int) int {
			if c == 1 {
				return o.calls / 2
			}
			return o.calls
		}}
	if rep.Plan.Concs, err = parseConcs("conc", o.concs); err != nil {
		return err
	}
	if rep.Plan.PeerConcs, err = parseConcs("peer-conc", o.peerConcs); err != nil {
		return err
	}
	switch {
	case o.rrRun < 1:
		return fmt.Errorf("-rr-run %d: want at least 1", o.rrRun)
	case o.rrRun > 1 && o.paths == "":
		return fmt.Errorf("-rr-run %d needs -paths: the full report's round-robin paths alternate hosts at each request", o.rrRun)
	}
	var want func(string) bool
	if o.paths != "" {
		re, err := regexp.Compile(o.paths)
		if err != nil {
			return fmt.Errorf("-paths: %w", err)
		}
		all := append(slices.Clone(callPaths), eventsName, retentionName, codeModeName)
		if !slices.ContainsFunc(all, re.MatchString) {
			return fmt.Errorf("-paths %q matches none of %q", o.paths, all)
		}
		want = re.MatchString
		if pg == nil && slices.ContainsFunc(callPaths, func(p string) bool { return isPGPath(p) && want(p) }) {
			if !slices.ContainsFunc(all, func(p string) bool { return !isPGPath(p) && want(p) }) {
				return fmt.Errorf("-paths %q: the PostgreSQL paths need -pg-dsn", o.paths)
			}
			logf("bench: no -pg-dsn: the PostgreSQL paths are skipped")
		}
	}
	wantCalls := want == nil || slices.ContainsFunc(callPaths, func(p string) bool { return want(p) && (pg != nil || !isPGPath(p)) })

	rig := &callRig{}
	if wantCalls {
		logf("no-op calls (%d per path at c≥8, %d rounds)", o.calls, o.rounds)
		if rig, err = newCallRig(ctx, tmp, exe, pg, want, o.rrRun); err != nil {
			return err
		}
	}
	// The recordings of the call phase asked for: a CPU profile, a trace.
	for _, r := range []struct {
		path  string
		start func(io.Writer) error
	}{{o.cpuprof, pprof.StartCPUProfile}, {o.trace, trace.Start}} {
		if r.path == "" {
			continue
		}
		f, err := os.Create(r.path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := r.start(f); err != nil {
			return err
		}
	}
	rig.traced = o.trace != ""
	if wantCalls {
		rep.Calls, err = runCalls(ctx, rig, rep.Plan, logf)
	}
	if o.trace != "" {
		trace.Stop()
	}
	if o.cpuprof != "" {
		pprof.StopCPUProfile()
		if f, err := os.Create(o.cpuprof + ".heap"); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	rig.Close()
	if err != nil {
		return err
	}
	rep.Peers, rep.Spreads = rig.peers, rig.spreads
	slices.SortFunc(rep.Spreads, func(a, b spread) int { return balancedIndex(a.Path) - balancedIndex(b.Path) })
	if rig.sink != nil { // read once closed: the host flushed its last spans on Close
		rep.Traced = rig.sink.received()
		rep.Traced.Calls = rep.Plan.Warmup
		for _, row := range rep.Calls {
			for _, s := range row {
				if s.Path == pathHostTraced {
					rep.Traced.Calls += s.Calls
				}
			}
		}
	}
	if want == nil || want(eventsName) {
		logf("events/s: %d events per engine, %d rounds", o.events, o.rounds)
		if rep.Events, err = measureEvents(ctx, tmp, pg, o.events, o.rounds); err != nil {
			return fmt.Errorf("events/s: %w", err)
		}
	}
	if want == nil || want(retentionName) {
		logf("retention: a pass over %d old events while %d callers call the no-op tool", o.events/2, retentionCallers)
		if rep.Retention, err = measureRetention(ctx, tmp, exe.noop, pg, o.events/2, o.calls); err != nil {
			return fmt.Errorf("retention: %w", err)
		}
	}
	if want == nil || want(codeModeName) {
		logf("code mode: %d tasks, call by call and with one script", len(codeTasks))
		if rep.Code, err = measureCodeMode(ctx, filepath.Join(root, "bin/plugins"), tmp); err != nil {
			return fmt.Errorf("code mode: %w", err)
		}
	}
	if want != nil { // a study of some paths: no report, or a partial one
		rep.Wall = time.Since(began)
		out, _ := filepath.Abs(o.out)
		if full := filepath.Join(root, "docs", "BENCHMARKS.md"); out == full {
			logf("a partial run leaves %s as it is (give -out another file for its partial report)", full)
		} else if o.outGiven {
			rep.Paths = o.paths
			if err := rep.writeFile(o.out); err != nil {
				return err
			}
			logf("wrote %s (partial)", o.out)
		}
		rep.summary(os.Stdout)
		return nil
	}
	logf("cold start of toolhost serve")
	if rep.Cold, err = runColdStarts(root, tmp, exe.noop, max(3, o.reps/4)); err != nil {
		return err
	}
	logf("SIGKILL of a plugin (%d times)", o.reps)
	if rep.Restart, err = measureRestart(ctx, tmp, exe.noop, o.reps); err != nil {
		return err
	}
	logf("Host.Tools")
	if rep.ToolsFor, err = measureToolsFor(ctx, tmp, 200*o.calls/20, max(50, o.calls/40)); err != nil {
		return err
	}
	logf("RSS")
	if rep.RSS, err = measureRSS(ctx, root, tmp); err != nil {
		return err
	}
	logf("run_command true, sandboxed and not (%d each)", o.reps*10)
	if rep.Sandbox, err = measureSandbox(ctx, root, tmp, o.reps*10); err != nil {
		return err
	}
	logf("context of the first model request on the catalog")
	if rep.Context, err = measureContext(ctx, root, tmp); err != nil {
		return err
	}
	logf("find_tools: recall and time on the committed catalog")
	if rep.Search, err = measureSearch(root, max(3, o.calls/3000)); err != nil {
		return fmt.Errorf("find_tools: %w", err)
	}

	if o.plot != "" {
		var rows [][]*Series
		// Without the PostgreSQL paths, the MCP paths of the 2025 era and
		// our in-process fronts, which would crowd the legend (the
		// tables have them), and the peer paths, whose tool is not the
		// no-op (section 9).
		for _, row := range rep.rowsOf(func(path string) bool {
			return !isPGPath(path) && !isPeerPath(path) && !isMCP2025(path) && !isMCPFront(path)
		}) {
			if c := row[0].Conc; c == 1 || c == 32 {
				rows = append(rows, row)
			}
		}
		if err := writePlot(o.plot, rows); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		if rel, err := filepath.Rel(filepath.Dir(o.out), o.plot); err == nil {
			rep.Plot = rel
		}
	}
	rep.Wall = time.Since(began)
	if o.since > 0 {
		rep.ScriptWall = time.Since(time.Unix(0, o.since))
	}
	if err := rep.writeFile(o.out); err != nil {
		return err
	}
	rep.summary(os.Stdout)
	fmt.Printf("wrote %s and %s\n", o.out, o.plot)
	return nil
}

// parseConcs parses the value of the flag name: numbers of concurrent
// callers, comma-separated.
func parseConcs(name, value string) ([]int, error) {
	var concs []int
	for f := range strings.SplitSeq(value, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return nil, fmt.Errorf("-%s %q: want positive numbers separated by commas", name, value)
		}
		concs = append(concs, c)
	}
	return concs, nil
}
