package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/internal/proctest"
)

// conformanceVersion is the version of @modelcontextprotocol/conformance the
// tests run; scripts/test installs it and docs/mcp-conformance.md names it.
const conformanceVersion = "0.2.0-alpha.12"

// conformanceEras are the protocol eras the suite is run at: 2025-11-25
// (initialize and a session) and 2026-07-28 (sessionless requests).
var conformanceEras = []string{mcpversion.Legacy, mcpversion.Stateless}

// noTasks is why the scenarios of the tasks extension are not run.
const noTasks = "the go-sdk has no tasks extension (io.modelcontextprotocol/tasks), and the fixture has no implementation of its own (a task store, tasks/get, tasks/update, tasks/cancel, status notifications)"

// conformanceExcluded are the server scenarios of the suite that are not
// run, each with why: the fixture (internal/mcp/mcptest/conformserver)
// fails them itself. docs/mcp-conformance.md has the same table.
var conformanceExcluded = map[string]string{
	"tasks-lifecycle":              noTasks,
	"tasks-capability-negotiation": noTasks,
	"tasks-wire-fields":            noTasks,
	"tasks-request-state-removal":  noTasks,
	"tasks-mrtr-input":             noTasks,
	"tasks-request-headers":        noTasks,
	"tasks-dispatch-and-envelope":  noTasks,
	"tasks-status-notifications":   noTasks,
	"tasks-required-task-error":    noTasks,
	"tasks-mrtr-composition":       noTasks,
}

// conformanceChecksApart are the checks that may succeed directly and not
// through toolhost (where they must still not fail), each with why.
// docs/mcp-conformance.md has the same table.
var conformanceChecksApart = map[string]string{
	"server-sse-disconnect-resume": "test_reconnection closes its SSE stream mid-call (a MAY); toolhost talks to the fixture over stdio, where there is no stream to close, and keeps its own open, which the suite reports as INFO",
}

// conformanceScenario is one server scenario of the suite at one era.
type conformanceScenario struct {
	name, era string
	extension bool // an extension's scenario: not on the spec's timeline, run at the suite's default era
}

// String is the subtest's name: the scenario and its era.
func (s conformanceScenario) String() string { return s.name + "@" + s.era }

// conformanceList returns the suite's server scenarios, each at every era
// of conformanceEras it applies to (by `list --server`; an extension's
// scenario at 2026-07-28, where the suite runs it by default).
func conformanceList(t *testing.T, node, suite string) []conformanceScenario {
	t.Helper()
	out, err := exec.Command(node, suite, "list", "--server").CombinedOutput()
	if err != nil {
		t.Fatalf("conformance list: %v\n%s", err, out)
	}
	var list []conformanceScenario
	for _, m := range regexp.MustCompile(`(?m)^\s+- ([a-z0-9-]+) \[([^\]]*)\]$`).FindAllStringSubmatch(string(out), -1) {
		if m[2] == "extension" {
			list = append(list, conformanceScenario{name: m[1], era: mcpversion.Stateless, extension: true})
			continue
		}
		eras := strings.Split(m[2], ",")
		n := len(list)
		for _, era := range conformanceEras {
			if slices.Contains(eras, era) {
				list = append(list, conformanceScenario{name: m[1], era: era})
			}
		}
		if len(list) == n {
			t.Errorf("server scenario %s applies to none of the eras run (%s): decide on it", m[1], m[2])
		}
	}
	if len(list) == 0 {
		t.Fatalf("conformance list named no server scenario:\n%s", out)
	}
	return list
}

// TestConformance runs every server scenario of the MCP conformance suite
// (@modelcontextprotocol/conformance, conformanceVersion) at each era it
// applies to, twice: against the fixture server (conformserver) directly
// over streamable HTTP on loopback, and against /mcp/conformance of a real
// `toolhost serve` that loads the same fixture over stdio as an mcp_server
// group of the role conformance, allowed every request of the client
// (client_requests), as the suite's input_required scenarios ask for
// sampling and roots as well as elicitation. Each run fails on any check the suite
// reports as a FAILURE (a WARNING is logged). What passes directly must
// pass through toolhost, check by check: a check that succeeds directly
// must succeed through toolhost, not be skipped or only warned of. A
// scenario the fixture fails is in conformanceExcluded with its reason;
// every other scenario the suite lists is run, so a new version's
// scenarios are held to the rule at once (one that applies to neither era
// fails the test). The suite's client sends no credential and wants a
// localhost URL, so each run talks to a recording proxy on 127.0.0.1 that
// adds the role's bearer token (none for the fixture) and keeps the Host
// header the suite sends; a failure prints what went over the wire.
func TestConformance(t *testing.T) {
	node := npmNode(t)
	suite := filepath.Join(mcptest.NPMPackage(t, "@modelcontextprotocol/conformance"), "dist", "index.js")
	if out, err := exec.Command(node, suite, "--version").Output(); err != nil || strings.TrimSpace(string(out)) != conformanceVersion {
		t.Fatalf("the conformance suite in the npm cache is %q (%v), want %s: run scripts/test, which installs it", out, err, conformanceVersion)
	}
	list := conformanceList(t, node, suite)
	listed := map[string]bool{}
	for _, s := range list {
		listed[s.name] = true
	}
	for name := range conformanceExcluded {
		if !listed[name] {
			t.Errorf("excluded scenario %s is no longer listed by the suite (conformanceExcluded, docs/mcp-conformance.md)", name)
		}
	}
	list = slices.DeleteFunc(list, func(s conformanceScenario) bool { return conformanceExcluded[s.name] != "" })

	bin := filepath.Join(t.TempDir(), "conformserver")
	build(t, "../internal/mcp/mcptest/conformserver/cmd", bin)
	srv := newServe(t, fmt.Sprintf(`
data_dir = "data"
mcp_server "conform" {
  command         = %q
  client_requests = ["logging", "elicitation", "sampling", "roots"]
}
role "conformance" {
  tool_groups = ["conform"]
}
`, bin))
	srv.start()
	token := srv.roleToken("conformance", "conformance", "")
	direct := startConformServer(t, bin)

	targets := []struct{ name, endpoint, token string }{
		{"direct", direct, ""},
		{"toolhost", srv.base + "/mcp/conformance", token},
	}
	// Each era's scenarios in one run of the suite a target (and each
	// extension scenario in one of its own, run at no era): a node process
	// costs about a second of CPU, and the suite runs a batch's scenarios
	// in a few seconds, so that one process a scenario took most of this
	// test's two minutes. The fixture's runs go at once; toolhost's one
	// after the other, as the suite expects a server to itself: toolhost
	// forwards a 2025 stdio server's log messages and requests, which name
	// no call, only while one call of the group runs (docs/mcp.md), and a
	// batch's calls made another's log messages go unforwarded.
	start := time.Now()
	type batch struct {
		era       string
		scenarios []conformanceScenario
	}
	var batches []batch
	for _, era := range conformanceEras {
		b := batch{era: era}
		for _, s := range list {
			if !s.extension && s.era == era {
				b.scenarios = append(b.scenarios, s)
			}
		}
		batches = append(batches, b)
	}
	for _, s := range list {
		if s.extension {
			batches = append(batches, batch{scenarios: []conformanceScenario{s}})
		}
	}
	runs := make([][]map[string]conformanceRun, len(batches)) // by batch, then target: by scenario
	var wg sync.WaitGroup
	var inTurn sync.Mutex // toolhost's batches
	for i, b := range batches {
		runs[i] = make([]map[string]conformanceRun, len(targets))
		for j, target := range targets {
			proxy, dir := newWireProxy(t, target.endpoint, target.token), t.TempDir()
			wg.Go(func() {
				if target.name == "toolhost" {
					inTurn.Lock()
					defer inTurn.Unlock()
				}
				runs[i][j] = runConformance(node, suite, proxy, dir, b.era, b.scenarios)
			})
		}
	}
	wg.Wait()
	t.Run("scenarios", func(t *testing.T) {
		for i, b := range batches {
			for _, s := range b.scenarios {
				t.Run(s.String(), func(t *testing.T) {
					failed := false
					for j, target := range targets {
						t.Run(target.name, func(t *testing.T) {
							r := runs[i][j][s.name]
							r.report(t)
							if j > 0 {
								r.succeedsAs(t, runs[i][0][s.name], targets[0].name)
							}
							failed = failed || t.Failed()
						})
					}
					if failed { // what went over the wire, the scenario run alone
						for _, target := range targets {
							proxy, dir := newWireProxy(t, target.endpoint, target.token), t.TempDir()
							alone := runConformance(node, suite, proxy, dir, b.era, []conformanceScenario{s})[s.name]
							t.Logf("%s, the scenario run alone: %d checks failed\n%s", target.name, alone.failures(), exchangesString(alone.exchanges))
						}
					}
				})
			}
		}
	})
	t.Logf("%d scenario runs a target in %s", len(list), time.Since(start).Round(time.Second))
}

// startConformServer runs the fixture over streamable HTTP on a free port
// of 127.0.0.1 until the test ends and returns its endpoint.
func startConformServer(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "-http", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("conformserver's log:\n%s", clip(stderr.String(), 20000))
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("conformserver: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(line)
}

// conformanceRun is what a scenario's run gave: the suite's checks, the
// output and exit of the suite's process (shared by a batch), the
// exchanges through the proxy (of a scenario run alone), or why there are
// no checks.
type conformanceRun struct {
	checks []struct {
		ID, Name, Description, Status, ErrorMessage string
		Details                                     json.RawMessage
	}
	output    string
	runErr    error
	err       error // no checks.json, or one that does not decode
	exchanges []exchange
}

// conformanceDir is the name of the directory the suite writes a
// scenario's checks.json into: server-NAME-TIMESTAMP.
var conformanceDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT`)

// runConformance runs the scenarios through proxy in one process of the
// suite, with dir for its results (it may run on any goroutine): one by
// its name, or every scenario the suite has at era (--suite all), which
// must include them. It returns each scenario's run.
func runConformance(node, suite string, proxy *wireProxy, dir, era string, scenarios []conformanceScenario) map[string]conformanceRun {
	args := []string{suite, "server", "--url", proxy.URL, "-o", dir}
	if len(scenarios) == 1 {
		args = append(args, "--scenario", scenarios[0].name)
	} else {
		args = append(args, "--suite", "all")
	}
	if era != "" { // the suite skips an extension's scenario at any --spec-version
		args = append(args, "--spec-version", era)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	runErr := runWithin(cmd, 4*proctest.Patience)
	found := map[string]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if m := conformanceDir.FindStringSubmatch(e.Name()); m != nil {
			if _, dup := found[m[1]]; dup {
				found[m[1]] = "" // two: neither is the scenario's
				continue
			}
			found[m[1]] = filepath.Join(dir, e.Name(), "checks.json")
		}
	}
	var exchanges []exchange // a batch's are every scenario's, mixed
	if len(scenarios) == 1 {
		exchanges = proxy.recorded(0)
	}
	out := map[string]conformanceRun{}
	failed := false
	for _, s := range scenarios {
		r := conformanceRun{output: output.String(), exchanges: exchanges}
		if file := found[s.name]; file == "" {
			r.err = fmt.Errorf("the suite wrote no one checks.json of %s (its results of %d scenarios: %q)", s.name, len(found), slices.Sorted(maps.Keys(found)))
		} else if b, err := os.ReadFile(file); err != nil {
			r.err = err
		} else {
			r.err = json.Unmarshal(b, &r.checks)
		}
		failed = failed || r.failures() > 0
		out[s.name] = r
	}
	// The process's exit is a scenario's when it ran alone; that of a batch
	// in which none of the scenarios failed a check is every scenario's.
	if len(scenarios) == 1 || !failed {
		for name, r := range out {
			r.runErr = runErr
			out[name] = r
		}
	}
	return out
}

// failures is how many of the run's checks the suite reports as a FAILURE.
func (r conformanceRun) failures() int {
	n := 0
	for _, c := range r.checks {
		if c.Status == "FAILURE" {
			n++
		}
	}
	return n
}

// report fails t on each check the suite reports as a FAILURE, and on a
// run that made no check or exited with an error without a failed check;
// it logs the others.
func (r conformanceRun) report(t *testing.T) {
	if r.err != nil {
		t.Fatalf("%v (the suite: %v)\n%s", r.err, r.runErr, clip(r.output, 8000))
	}
	for _, c := range r.checks {
		switch c.Status {
		case "FAILURE":
			t.Errorf("%s (%s): %s\n  details: %s", c.ID, c.Description, c.ErrorMessage, clip(string(c.Details), 2000))
		case "WARNING":
			t.Logf("warning: %s (%s): %s", c.ID, c.Description, c.ErrorMessage)
		default:
			t.Logf("%s: %s", strings.ToLower(c.Status), c.ID)
		}
	}
	if r.runErr != nil && r.failures() == 0 {
		t.Errorf("the suite exited with %v but reported no failed check\n%s", r.runErr, clip(r.output, 8000))
	}
	if len(r.checks) == 0 {
		t.Errorf("no checks\n%s", clip(r.output, 8000))
	}
}

// succeedsAs fails t on each check that succeeded in the run ref (of
// target name) but not in r, but those of conformanceChecksApart: a check
// the suite skipped, or made a warning or a note of, is not a pass where
// the fixture itself passes it. (A failure is report's.)
func (r conformanceRun) succeedsAs(t *testing.T, ref conformanceRun, name string) {
	succeeded := map[string]int{}
	for _, c := range r.checks {
		if c.Status == "SUCCESS" {
			succeeded[c.ID]++
		}
	}
	for _, c := range ref.checks {
		if c.Status != "SUCCESS" || conformanceChecksApart[c.ID] != "" {
			continue
		}
		if succeeded[c.ID] > 0 {
			succeeded[c.ID]--
			continue
		}
		var here []string
		for _, h := range r.checks {
			if h.ID == c.ID {
				here = append(here, fmt.Sprintf("%s: %s\n  details: %s", h.Status, h.ErrorMessage, clip(string(h.Details), 2000)))
			}
		}
		if len(here) == 0 {
			here = []string{"no such check"}
		}
		if !slices.ContainsFunc(here, func(h string) bool { return strings.HasPrefix(h, "FAILURE") }) {
			t.Errorf("%s (%s) succeeds %s but not here: %s", c.ID, c.Description, name, strings.Join(here, "\n  "))
		}
	}
}

// TestConformanceDocs: docs/mcp-conformance.md's tables of excluded
// scenarios and of checks apart are conformanceExcluded and
// conformanceChecksApart, and it and scripts/test name the suite's version
// the tests run.
func TestConformanceDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "mcp-conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for heading, table := range map[string]map[string]string{"### Excluded": conformanceExcluded, "### Checks apart": conformanceChecksApart} {
		_, section, ok := strings.Cut(doc, "\n"+heading+"\n")
		if !ok {
			t.Errorf("docs/mcp-conformance.md has no section %s", heading)
			continue
		}
		section, _, _ = strings.Cut(section, "\n#")
		documented := map[string]bool{}
		for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|").FindAllStringSubmatch(section, -1) {
			documented[m[1]] = true
			if table[m[1]] == "" {
				t.Errorf("docs/mcp-conformance.md's %s names `%s`, which the test's table does not", heading, m[1])
			}
		}
		for _, name := range slices.Sorted(maps.Keys(table)) {
			if !documented[name] {
				t.Errorf("docs/mcp-conformance.md's %s does not name `%s`", heading, name)
			}
		}
	}
	pin := "@modelcontextprotocol/conformance@" + conformanceVersion
	script, err := os.ReadFile(filepath.Join("..", "scripts", "test"))
	if err != nil {
		t.Fatal(err)
	}
	for file, text := range map[string]string{"docs/mcp-conformance.md": doc, "scripts/test": string(script)} {
		if !strings.Contains(text, pin) {
			t.Errorf("%s does not name %s", file, pin)
		}
	}
}
