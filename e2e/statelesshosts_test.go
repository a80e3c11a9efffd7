package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// Sessionless MCP clients (2026-07-28) behind a load balancer without
// affinity: three real serves on one PostgreSQL, a round-robin balancer
// in front of them, and a client whose every request may reach any host.
// One scenario, driven by two clients: the TypeScript SDK v2
// (client_v2.mjs, statelessclients_test.go) and the go-sdk.

// statelessConfig is the config (after newServe's listen line) of each
// serve of TestStatelessClientsAnyHost: the plugin directory (%[1]q), one
// PostgreSQL (%[2]q), one admin token, and one workspace (%[3]q), which
// every host mounts as docs/several-hosts.md has the artifacts' directory
// mounted, so that a file is where the test looks whichever host wrote it.
// write_file needs an approval, which the developer role's clients give
// (mcp { client_approvals }); the command group is deferred, so that
// run_command is listed only once loaded; a runtime lease of 5 s makes a
// dead host's work known dead soon, and is long enough that a host slowed
// by a loaded machine is never taken for dead (renewals come every third
// of it). Calls may run for minutes: a task's
// sleep ends only when cancelled, or with its host, within the test's
// patience, so that its end says the cancellation or the kill worked.
const statelessConfig = `
data_dir   = "data"
plugin_dir = %[1]q
auth {
  token = "e2e-shared-admin-token-0123456789"
}
store {
  driver = "postgres"
  dsn    = %[2]q
}
executor {
  approval_timeout = "30s"
}
limits {
  timeout = "5m"  # a task's sleep outlives a slow step
}
runtime {
  lease = "5s"
}
builtin "workspace" {
  config {
    roots = [%[3]q]
  }
  tool "write_file" {
    requires_approval = true
  }
}
builtin "command" {
  config {
    workdir         = %[3]q
    timeout_seconds = 300
  }
}
mcp {
  client_approvals = ["developer"]
}
role "developer" {
  prompt          = "You are the e2e developer: read, edit and run."
  tool_groups     = ["workspace", "command"]
  deferred_groups = ["command"]
}
`

// balancer is a round-robin load balancer on 127.0.0.1 in front of
// several serves, with no affinity: each request goes to the next backend
// in turn that is in rotation. It records every exchange (a wireProxy's
// record), with the backend that served it, and streams responses as
// they come.
type balancer struct {
	*wireProxy // URL is the balancer's base URL

	backends []string // base URLs, in turn order

	mu    sync.Mutex
	turn  int
	out   map[string]bool   // backends taken out of rotation
	avoid map[string]string // JSON-RPC method → a backend its requests skip
}

// newBalancer starts a balancer over the backends' base URLs until the
// test ends.
func newBalancer(t *testing.T, backends ...string) *balancer {
	t.Helper()
	b := &balancer{wireProxy: &wireProxy{}, backends: backends, out: map[string]bool{}, avoid: map[string]string{}}
	b.URL = b.serve(t, "", b.route)
	return b
}

// route picks the backend of an exchange: the next in turn that is in
// rotation and, when another one is, not avoided for the request's
// method. "" when none is in rotation.
func (b *balancer) route(e *exchange) string {
	methods := e.methods()
	b.mu.Lock()
	defer b.mu.Unlock()
	for pass := range 2 { // the second pass ignores what is avoided
		for range b.backends {
			backend := b.backends[b.turn%len(b.backends)]
			b.turn++
			avoided := slices.ContainsFunc(methods, func(m string) bool { return b.avoid[m] == backend })
			if !b.out[backend] && (pass == 1 || !avoided) {
				return backend
			}
		}
	}
	return ""
}

// remove takes a backend out of rotation, as a health-checked balancer
// does once the host stopped answering.
func (b *balancer) remove(backend string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out[backend] = true
}

// steer sends the requests of a JSON-RPC method to another backend than
// away while another is in rotation; away "" ends that.
func (b *balancer) steer(method, away string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.avoid[method] = away
}

// methods are the JSON-RPC methods of the exchange's request body: one
// message or a batch.
func (e exchange) methods() []string {
	var batch []struct{ Method string }
	if json.Unmarshal(e.Body, &batch) != nil {
		m, _ := e.rpc()
		batch = []struct{ Method string }{{m}}
	}
	var out []string
	for _, msg := range batch {
		if msg.Method != "" {
			out = append(out, msg.Method)
		}
	}
	return out
}

// replies are the JSON-RPC messages of the exchange's response.
func (e exchange) replies() []map[string]any {
	return jsonrpcMessages(e.ResponseType, e.Response)
}

// jsonrpcMessages are the JSON-RPC messages of a response body of the
// content type: the JSON body, or the data of its server-sent events.
func jsonrpcMessages(contentType string, body []byte) []map[string]any {
	datas := []string{string(body)}
	if strings.HasPrefix(contentType, "text/event-stream") {
		datas = nil
		for line := range strings.Lines(string(body)) {
			if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:"); ok && strings.TrimSpace(data) != "" {
				datas = append(datas, data)
			}
		}
	}
	var out []map[string]any
	for _, d := range datas {
		var msg map[string]any
		if json.Unmarshal([]byte(d), &msg) == nil {
			out = append(out, msg)
		}
	}
	return out
}

// resultType is the resultType of the exchange's JSON-RPC result, "" when
// it answered none.
func (e exchange) resultType() string {
	for _, msg := range e.replies() {
		if result, ok := msg["result"].(map[string]any); ok {
			rt, _ := result["resultType"].(string)
			return rt
		}
	}
	return ""
}

// statelessHosts are three serves sharing one PostgreSQL behind a
// balancer, and a developer token made on one of them.
type statelessHosts struct {
	serves    []*hostile
	procs     []*exec.Cmd       // their serve processes
	names     map[string]string // backend base URL → A, B or C
	hostIDs   map[string]string // data_dir/host.id → A, B or C
	killed    map[string]bool   // the names of the serves killed
	lb        *balancer
	workspace string
	tokenName string
	token     string
}

// startStatelessHosts starts three serves of statelessConfig on a fresh
// database and a balancer over them, and makes a developer token named
// tokenName.
func startStatelessHosts(t *testing.T, tokenName string) *statelessHosts {
	t.Helper()
	dsn := pgtest.Start(t)
	workspace := t.TempDir()
	src := fmt.Sprintf(statelessConfig, pluginDir, dsn, workspace)
	first := newServe(t, src)
	hs := &statelessHosts{serves: []*hostile{first, first.sibling(src), first.sibling(src)},
		names: map[string]string{}, hostIDs: map[string]string{}, killed: map[string]bool{}, workspace: workspace, tokenName: tokenName}
	var backends []string
	for i, s := range hs.serves {
		name := string(rune('A' + i))
		hs.procs = append(hs.procs, s.start())
		id, err := os.ReadFile(filepath.Join(s.dir, "data", "host.id"))
		if err != nil {
			t.Fatalf("host %s: %v", name, err)
		}
		hs.names[s.base] = name
		hs.hostIDs[strings.TrimSpace(string(id))] = name
		backends = append(backends, s.base)
	}
	if len(hs.hostIDs) != len(hs.serves) {
		t.Fatalf("the serves' host ids are not distinct: %v", hs.hostIDs)
	}
	hs.lb = newBalancer(t, backends...)
	hs.token = first.roleToken("developer", tokenName, "")
	return hs
}

// endpoint is the developer role's MCP endpoint through the balancer.
func (hs *statelessHosts) endpoint() string {
	return hs.lb.URL + "/mcp/developer"
}

// kill ends the serve of the host named name with SIGKILL and takes it
// out of the balancer's rotation.
func (hs *statelessHosts) kill(t *testing.T, name string) {
	t.Helper()
	for i, s := range hs.serves {
		if hs.names[s.base] == name {
			if err := hs.procs[i].Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatalf("SIGKILL host %s: %v", name, err)
			}
			hs.killed[name] = true
			hs.lb.remove(s.base)
			return
		}
	}
	t.Fatalf("no host %s", name)
}

// backend is the base URL of the host named name.
func (hs *statelessHosts) backend(name string) string {
	for base, n := range hs.names {
		if n == name {
			return base
		}
	}
	return ""
}

// live is a serve not killed.
func (hs *statelessHosts) live() *hostile {
	for _, s := range hs.serves {
		if !hs.killed[hs.names[s.base]] {
			return s
		}
	}
	return nil
}

// hops are the exchanges from mark on whose request has the JSON-RPC
// method.
func (hs *statelessHosts) hops(mark int, method string) []exchange {
	var out []exchange
	for _, e := range hs.lb.recorded(mark) {
		if slices.Contains(e.methods(), method) {
			out = append(out, e)
		}
	}
	return out
}

// hostsOf names the hosts that served the exchanges, in order.
func (hs *statelessHosts) hostsOf(exchanges []exchange) []string {
	var out []string
	for _, e := range exchanges {
		out = append(out, hs.names[e.Backend])
	}
	return out
}

// distinct counts the distinct names.
func distinct(names []string) int {
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	return len(seen)
}

// taskHost names the host whose tools/call, from mark on, made the task
// with the id.
func (hs *statelessHosts) taskHost(t *testing.T, mark int, id string) string {
	t.Helper()
	for _, e := range hs.hops(mark, "tools/call") {
		for _, msg := range e.replies() {
			if result, _ := msg["result"].(map[string]any); result["resultType"] == "task" && result["taskId"] == id {
				return hs.names[e.Backend]
			}
		}
	}
	t.Fatalf("no tools/call answered with task %s", id)
	return ""
}

// wire is the balancer's record from mark on, for a failure's message.
func (hs *statelessHosts) wire(mark int) string {
	lines := []string{"the balancer's record:"}
	for _, e := range hs.lb.recorded(mark) {
		lines = append(lines, "  "+hs.line(e))
	}
	return strings.Join(lines, "\n")
}

// line is an exchange in one line: the host that served it, its
// JSON-RPC methods and Mcp-Name, and the answer.
func (hs *statelessHosts) line(e exchange) string {
	replies, _ := json.Marshal(e.replies())
	s := fmt.Sprintf("host %s: %s %v %q → %d %s", cmpOr(hs.names[e.Backend], "none"), e.Method, e.methods(),
		e.Header.Get("Mcp-Name"), e.Status, clip(string(replies), 600))
	if e.Err != "" {
		s += " (balancer: " + e.Err + ")"
	}
	return s
}

// TestStatelessClientsAnyHost: a sessionless MCP client (2026-07-28) whose
// requests a round-robin balancer spreads over three serves sharing one
// PostgreSQL is served as by one host, with the TypeScript SDK v2 and with
// the go-sdk (runStateless says what holds). Each client has hosts of its
// own, as the scenario kills one.
func TestStatelessClientsAnyHost(t *testing.T) {
	t.Run("typescript-sdk-v2", func(t *testing.T) {
		hs := startStatelessHosts(t, "stateless-ts")
		runStateless(t, hs, newTSStateless(t, hs))
	})
	t.Run("go-sdk", func(t *testing.T) {
		hs := startStatelessHosts(t, "stateless-go")
		runStateless(t, hs, newGoStateless(t, hs))
	})
}

// runStateless is the scenario of TestStatelessClientsAnyHost, through the
// balancer, one step a subtest (a step that fails leaves the next to
// run). What load_tools loaded through one host is listed through every
// host, and a call of it works; an approval asked for by one host
// (input_required) is given in the retry to another, which completes the
// call; a task made on one host is polled to completion through several
// and cancelled through another than its own, which stops its command;
// once the host running a task is killed, the others report the task
// failed, naming the host's end, and serve the client on. Every call of
// the client was of one agent, and ran on more than one host (the "host"
// of their tool_call.started events).
func runStateless(t *testing.T, hs *statelessHosts, c statelessClient) {
	hs.step(t, "load_tools through one host, listed through every host", func(t *testing.T, mark int) {
		found := c.call(t, "find_tools", map[string]any{"query": "run a shell command"})
		if !found.ok() || !strings.Contains(found.Text, "run_command") {
			t.Fatalf("find_tools: %s", found)
		}
		loadMark := hs.lb.count()
		if loaded := c.call(t, "load_tools", map[string]any{"names": []string{"run_command"}}); !loaded.ok() {
			t.Fatalf("load_tools: %s", loaded)
		}
		loadedOn := hs.hostsOf(hs.hops(loadMark, "tools/call"))
		listMark := hs.lb.count()
		for range hs.serves { // round robin: one tools/list through each host
			if names := c.tools(t); !slices.Contains(names, "run_command") {
				lists := hs.hostsOf(hs.hops(listMark, "tools/list"))
				t.Errorf("tools/list through host %s lacks run_command, which load_tools loaded through host %v: %q",
					lists[len(lists)-1], loadedOn, names)
			}
		}
		if lists := hs.hostsOf(hs.hops(listMark, "tools/list")); distinct(lists) != len(hs.serves) {
			t.Errorf("the tools/list requests went to hosts %v, want each host once", lists)
		}
	})

	hs.step(t, "call", func(t *testing.T, mark int) {
		marker := proctest.Marker()
		res := c.call(t, "run_command", map[string]any{"command": "echo called " + marker})
		if !res.ok() || !strings.Contains(res.Text, "called "+marker) {
			t.Errorf("run_command: %s", res)
		}
	})

	hs.step(t, "approval asked by one host, given to another", func(t *testing.T, mark int) {
		marker := proctest.Marker()
		name := "approved-" + marker + ".txt"
		res := c.call(t, "write_file", map[string]any{"path": name, "content": "content " + marker})
		asked, retried := "", ""
		for _, e := range hs.hops(mark, "tools/call") {
			var req struct{ Params map[string]any }
			_ = json.Unmarshal(e.Body, &req)
			switch {
			case asked == "" && e.resultType() == "input_required":
				asked = hs.names[e.Backend]
			case asked != "" && retried == "" && req.Params["inputResponses"] != nil:
				retried = hs.names[e.Backend]
			}
		}
		if asked == "" || retried == "" || asked == retried {
			t.Errorf("input_required from host %q, the retry with inputResponses to host %q: want two hosts", asked, retried)
		}
		if len(res.Elicitations) != 1 || !strings.Contains(res.Elicitations[0], name) {
			t.Errorf("elicitations %q, want one naming %s", res.Elicitations, name)
		}
		if !res.ok() {
			t.Fatalf("the approved write_file (asked by host %s, retried on host %s): %s", asked, retried, res)
		}
		if b, err := os.ReadFile(filepath.Join(hs.workspace, name)); err != nil || string(b) != "content "+marker {
			t.Errorf("the approved write: %q, %v", b, err)
		}
	})

	hs.step(t, "task polled through several hosts", func(t *testing.T, mark int) {
		marker := proctest.Marker()
		id := c.startTask(t, "sleep 3; echo task done "+marker)
		owner := hs.taskHost(t, mark, id)
		// One tasks/get of its own, then the client's polls from the next
		// host on: two hosts at least, however soon the task ends.
		if first, err := c.getTask(t, id); err != nil {
			t.Errorf("the first tasks/get of the task made on host %s: %v", owner, err)
		} else if first.Status != "working" && first.Status != "completed" {
			t.Errorf("the first tasks/get of the task made on host %s: %+v", owner, first)
		}
		end := c.settleTask(t, id)
		gets := hs.hostsOf(hs.hops(mark, "tasks/get"))
		if end.Status != "completed" || !strings.Contains(end.Text, "task done "+marker) {
			t.Errorf("the task made on host %s, polled through hosts %v, ended %+v", owner, gets, end)
		}
		if distinct(gets) < 2 {
			t.Errorf("tasks/get went to hosts %v, want several", gets)
		}
	})

	hs.step(t, "task cancelled through another host", func(t *testing.T, mark int) {
		marker := proctest.Marker()
		id := c.startTask(t, "sleep "+marker)
		owner := hs.taskHost(t, mark, id)
		proctest.Eventually(t, "the task's sleep runs", func() bool { return proctest.Running("sleep", marker) > 0 })
		hs.lb.steer("tasks/cancel", hs.backend(owner))
		defer hs.lb.steer("tasks/cancel", "")
		end := c.cancelTask(t, id)
		cancels := hs.hostsOf(hs.hops(mark, "tasks/cancel"))
		if len(cancels) == 0 || slices.Contains(cancels, owner) {
			t.Errorf("tasks/cancel went to hosts %v; the task runs on host %s", cancels, owner)
		}
		if end.Status != "cancelled" {
			t.Fatalf("the task made on host %s, cancelled through host %v, ended %+v", owner, cancels, end)
		}
		proctest.Eventually(t, "the cancelled task's sleep is gone", func() bool { return proctest.Running("sleep", marker) == 0 })
	})

	hs.step(t, "the host running a task killed", func(t *testing.T, mark int) {
		marker := proctest.Marker()
		id := c.startTask(t, "sleep "+marker)
		x := hs.taskHost(t, mark, id)
		proctest.Eventually(t, "the task's sleep runs", func() bool { return proctest.Running("sleep", marker) > 0 })
		hs.kill(t, x)
		killed := time.Now()
		getMark := hs.lb.count()
		var end taskState
		for deadline := killed.Add(proctest.Patience); ; time.Sleep(100 * time.Millisecond) { // a client's poll interval
			var err error
			if end, err = c.getTask(t, id); err != nil {
				t.Fatalf("tasks/get of the task of killed host %s: %v", x, err)
			}
			if end.Status != "working" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the task of killed host %s still working %s after the kill: %+v", x, proctest.Patience, end)
			}
		}
		gets := hs.hostsOf(hs.hops(getMark, "tasks/get"))
		t.Logf("the task of killed host %s %s %s after the kill (%d tasks/get through hosts %v)",
			x, end.Status, time.Since(killed).Round(time.Millisecond), len(gets), slices.Compact(slices.Sorted(slices.Values(gets))))
		if end.Status != "failed" || !strings.Contains(end.Message, "host") || !strings.Contains(end.Message, "stopped") {
			t.Errorf("the task of killed host %s: %+v; want failed, saying the host that ran it stopped", x, end)
		}
		if slices.Contains(gets, x) {
			t.Errorf("tasks/get went to killed host %s: %v", x, gets)
		}
		listMark := hs.lb.count()
		for range len(hs.serves) - 1 {
			if names := c.tools(t); !slices.Contains(names, "run_command") {
				lists := hs.hostsOf(hs.hops(listMark, "tools/list"))
				t.Errorf("tools/list through host %s lacks run_command after host %s died: %q", lists[len(lists)-1], x, names)
			}
		}
		if lists := hs.hostsOf(hs.hops(listMark, "tools/list")); distinct(lists) != len(hs.serves)-1 || slices.Contains(lists, x) {
			t.Errorf("the tools/list requests went to hosts %v, want each live host once", lists)
		}
		res := c.call(t, "run_command", map[string]any{"command": "echo after the kill " + marker})
		if !res.ok() || !strings.Contains(res.Text, "after the kill "+marker) {
			t.Errorf("run_command after host %s died: %s", x, res)
		}
		if proctest.Running("sleep", marker) > 0 {
			t.Logf("the sleep of killed host %s's task still runs", x)
		}
	})

	t.Run("events: one agent, several hosts", func(t *testing.T) { checkStatelessEvents(t, hs) })

	t.Run("the balancer spread the requests", func(t *testing.T) {
		exchanges := hs.lb.recorded(0)
		for i := 1; i < len(exchanges); i++ {
			if exchanges[i].Backend == exchanges[i-1].Backend {
				t.Errorf("two requests in a row to one host:\n  %s\n  %s", hs.line(exchanges[i-1]), hs.line(exchanges[i]))
			}
		}
	})
}

// step runs a step of runStateless as a subtest, given where the
// balancer's record stood as it began; a step that fails logs the record
// from there.
func (hs *statelessHosts) step(t *testing.T, name string, f func(t *testing.T, mark int)) {
	t.Run(name, func(t *testing.T) {
		mark := hs.lb.count()
		defer func() {
			if t.Failed() {
				t.Log(hs.wire(mark))
			}
		}()
		f(t, mark)
	})
}

// checkStatelessEvents: the tool_call.started events of the client's
// calls (its token's), read through a live host, name one agent, and the
// hosts that ran them (payload "host", a serve's data_dir/host.id): more
// than one.
func checkStatelessEvents(t *testing.T, hs *statelessHosts) {
	s := hs.live()
	credential := "token/" + hs.tokenName + "/"
	var started []map[string]any
	proctest.Eventually(t, "the events of the client's calls are written", func() bool {
		status, body := s.send(request{method: "GET", path: "/api/events?type=tool_call.started&limit=1000", token: s.admin})
		var events []map[string]any
		if status != 200 || json.Unmarshal([]byte(body), &events) != nil {
			return false
		}
		started = nil
		for _, e := range events {
			payload, _ := e["payload"].(map[string]any)
			if cred, _ := payload["credential"].(string); strings.HasPrefix(cred, credential) {
				started = append(started, e)
			}
		}
		return len(started) > 0
	})
	agents, hosts := map[string]int{}, map[string]int{}
	var strangers []string // started events naming no serve's host id, or no run
	for _, e := range started {
		payload := e["payload"].(map[string]any)
		agent, _ := e["agentId"].(string)
		agents[agent]++
		host, _ := payload["host"].(string)
		if name, ok := hs.hostIDs[host]; ok && payload["run"] != nil {
			hosts[name]++
		} else {
			strangers = append(strangers, fmt.Sprintf("%s: host %q run %v", e["tool"], host, payload["run"]))
		}
	}
	if len(strangers) > 0 {
		t.Errorf("%d of the client's %d started events lack a run or a host naming a serve's data_dir/host.id (%v): %q",
			len(strangers), len(started), slices.Sorted(maps.Keys(hs.hostIDs)), strangers)
	}
	if len(agents) != 1 {
		t.Errorf("the client's %d calls were of %d agents, want one: %v", len(started), len(agents), agents)
	}
	if len(hosts) < 2 {
		t.Errorf("the client's %d calls ran on hosts %v, want several", len(started), hosts)
	}
	t.Logf("%d calls: agents %v, hosts %v", len(started), agents, slices.Sorted(maps.Keys(hosts)))
}
