package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/plugins/toolsearch"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// TestSessionlessClientAnyHost: a sessionless client whose requests go to
// two hosts on one PostgreSQL in turn, as a load balancer without affinity
// sends them, loses nothing. Its requests are one agent on both; what
// load_tools loaded through A is in B's tools/list; a task that runs on A
// is polled and cancelled through B (the call's context is cancelled on A);
// a call held on A for its client's approval is resumed by the retry that
// reaches B. Another agent key, on either host, reaches none of it.
func TestSessionlessClientAnyHost(t *testing.T) {
	g := newGate()
	guarded := func() *sdk.Group {
		return &sdk.Group{ID: "guard", Description: "Guarded.", Tools: []sdk.Tool{
			sdk.NewTool("guarded", "Needs approval.", func(_ context.Context, r *sdk.Request[textArgs]) (*sdk.Result, error) {
				return sdk.Text("guarded:" + r.Args.Text), nil
			}, sdk.RequiresApproval()),
		}}
	}
	cfg := func() *config.Config {
		return &config.Config{
			Roles: []config.Role{{Name: "worker", ToolGroups: []string{"console", "gate", "guard", host.ToolSearchGroup},
				DeferredGroups: []string{"gate"}, Pos: "config.hcl:1,1"}},
			Executor: config.Executor{Approver: "queue", ApprovalTimeout: 10 * time.Minute, IdempotencyWindow: time.Hour},
			MCP:      config.MCP{ClientApprovals: []string{"worker"}},
		}
	}
	hosts := pgHosts(t, 2, cfg, func() *sdk.Group { return group("console", "console_print") }, g.group, guarded)
	urls := make([]string, len(hosts))
	for i, h := range hosts {
		if err := h.Modules().Register(context.Background(), toolsearch.Group(h.Agents())); err != nil {
			t.Fatal(err)
		}
		urls[i] = newHTTPServer(t, h, nil).URL + "/mcp/worker"
		t.Cleanup(func() {
			for _, ar := range h.Approvals().Pending() {
				_ = h.Approvals().Decide(ar.ID, host.Decision{Kind: host.Deny, Reason: "the test ended"})
			}
		})
	}
	a, b := urls[0], urls[1]
	token := roleToken(t, hosts[0], "client")
	caps := `{"extensions":{"io.modelcontextprotocol/tasks":{}},"elicitation":{"form":{}}}`
	send := func(url string, id int, method, params, key string) rpcResponse {
		t.Helper()
		extra := ""
		if key != "" {
			extra = fmt.Sprintf(`"toolhost/agent":%q`, key)
		}
		return rpc(t, url, token, request(id, method, params, metaCaps(caps, extra)), nil)
	}
	list := func(url, key string) []string {
		t.Helper()
		var res struct{ Tools []struct{ Name string } }
		m := send(url, 1, "tools/list", `{}`, key)
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatalf("tools/list: %s %s", m.Result, m.Error)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		return names
	}

	// One agent on both hosts; what it loaded through A is listed by B.
	if names := list(a, ""); slices.Contains(names, "hold") || !slices.Contains(names, "load_tools") {
		t.Fatalf("A lists %v before load_tools: want load_tools, not the deferred hold", names)
	}
	if r := resultOf(t, send(b, 2, "tools/call", `{"name":"load_tools","arguments":{"names":["hold"]}}`, "")); r.IsError {
		t.Fatalf("load_tools through B: %s", r.text())
	}
	if names := list(a, ""); !slices.Contains(names, "hold") {
		t.Errorf("A lists %v after load_tools through B: want hold", names)
	}
	if names := list(b, "other"); slices.Contains(names, "hold") {
		t.Errorf("another agent key lists %v on B: what the first loaded is not its", names)
	}
	for _, url := range urls {
		if r := resultOf(t, send(url, 3, "tools/call", `{"name":"console_print","arguments":{"text":"x"}}`, "")); r.IsError {
			t.Fatalf("console_print: %s", r.text())
		}
	}
	var agents []string
	for _, h := range hosts {
		if err := h.Events().Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	events, err := hosts[1].Events().List(context.Background(), store.EventFilter{Type: store.EventCallStarted, Tool: "console_print"})
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, e := range events {
		agents = append(agents, e.AgentID)
		ran[fmt.Sprint(e.Payload["host"])] = true
	}
	slices.Sort(agents)
	if len(slices.Compact(agents)) != 1 || len(ran) != 2 {
		t.Errorf("the client's calls through A and B ran as agents %v on hosts %v: want one agent, and each host named", agents, ran)
	}

	// A task that runs on A, seen and cancelled through B.
	handle := taskOf(t, send(a, 4, "tools/call", `{"name":"hold","arguments":{}}`, ""))
	select {
	case <-g.started:
	case <-time.After(proctest.Patience):
		t.Fatal("the hold call did not start")
	}
	if handle.ResultType != "task" {
		t.Fatalf("the hold call: %+v, want a task", handle)
	}
	taskReq := fmt.Sprintf(`{"taskId":%q}`, handle.TaskID)
	if v := taskOf(t, send(b, 5, "tasks/get", taskReq, "")); v.Status != "working" {
		t.Errorf("tasks/get through B: %+v, want working", v)
	}
	if m := send(b, 6, "tasks/get", taskReq, "other"); m.Error == nil {
		t.Errorf("another agent key's tasks/get through B: %s, want an error", m.Result)
	}
	mallory := roleToken(t, hosts[1], "mallory")
	if m := rpc(t, b, mallory, request(6, "tasks/cancel", taskReq, metaCaps(caps, "")), nil); m.Error == nil {
		t.Errorf("another credential's tasks/cancel through B: %s, want an error", m.Result)
	}
	stillRunning(t, g, "after another credential's tasks/cancel")
	if m := send(b, 7, "tasks/cancel", taskReq, ""); m.Error != nil {
		t.Fatalf("tasks/cancel through B: %s", m.Error)
	}
	if err := g.awaitEnd(t); err == nil {
		t.Error("the call ran to its end: the cancel through B did not reach A")
	}
	for _, url := range urls {
		proctest.Eventually(t, "the task is cancelled, as seen through "+url, func() bool {
			return taskOf(t, send(url, 8, "tasks/get", taskReq, "")).Status == "cancelled"
		})
	}

	// A call held on A for its client's approval, resumed by the retry
	// that reaches B.
	held := resultOf(t, send(a, 9, "tools/call", `{"name":"guarded","arguments":{"text":"moved"}}`, ""))
	if held.ResultType != "input_required" || held.RequestState == "" {
		t.Fatalf("the guarded call through A: %+v, want input_required", held)
	}
	refusedState(t, "another agent key's retry through B", rpc(t, b, token, retry(10, "moved", held.RequestState, acceptAnswer, `"toolhost/agent":"other"`), nil))
	refusedState(t, "another credential's retry through B", rpc(t, b, mallory, retry(10, "moved", held.RequestState, acceptAnswer, ""), nil))
	done := resultOf(t, rpc(t, b, token, retry(11, "moved", held.RequestState, acceptAnswer, ""), nil))
	if done.IsError || !strings.Contains(done.text(), "guarded:moved") {
		t.Errorf("the retry through B: %+v, want the call's result", done)
	}
	refusedState(t, "the same retry again, through A", rpc(t, a, token, retry(12, "moved", held.RequestState, acceptAnswer, ""), nil))

	// A task whose host stopped renewing its run is failed by the first
	// host asked, never left working.
	agent := events[0].AgentID
	dead, err := hosts[0].Store().BeginRun(context.Background(), "host_gone", 1, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := hosts[0].Store().PutTask(context.Background(), store.ClientTask{ID: "task_orphan", AgentID: agent, Credential: "token/client/x",
		RunID: dead.ID, Status: store.TaskWorking, CreatedAt: now, UpdatedAt: now}, time.Hour, 256); err != nil {
		t.Fatal(err)
	}
	v := taskOf(t, send(b, 13, "tasks/get", `{"taskId":"task_orphan"}`, ""))
	if v.Status != "failed" || !strings.Contains(v.StatusMessage, "host_gone") || !strings.Contains(v.StatusMessage, "stopped") {
		t.Errorf("a task of a run that stopped: %+v, want failed, naming its host", v)
	}
}

// TestSessionlessTaskOfStoppedRun: on SQLite, one host, a task that a run
// of the host which stopped left working (a SIGKILL, a crash) is failed
// when its agent asks, naming the host, with the error object the tasks
// extension requires of a failed task; never left working.
func TestSessionlessTaskOfStoppedRun(t *testing.T) {
	srv, h := serve(t, frontConfig, group("console", "console_print"), slowGroup(newWaiter()))
	url := srv.URL + "/mcp/worker"
	token := roleToken(t, h, "client")
	if m := rpc(t, url, token, request(1, "tools/call", `{"name":"console_print","arguments":{"text":"x"}}`, metaCaps(tasksCaps, "")), nil); m.Error != nil {
		t.Fatal(m.Error)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, err := h.Events().List(context.Background(), store.EventFilter{Type: store.EventCallStarted})
	if err != nil || len(events) == 0 {
		t.Fatalf("no call events: %v", err)
	}
	ctx := context.Background()
	old, err := h.Store().BeginRun(ctx, "host_before", 1, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := h.Store().PutTask(ctx, store.ClientTask{ID: "task_left", AgentID: events[len(events)-1].AgentID, Credential: "c",
		RunID: old.ID, Status: store.TaskWorking, CreatedAt: now, UpdatedAt: now}, time.Hour, 256); err != nil {
		t.Fatal(err)
	}
	m := rpc(t, url, token, taskRequest(2, "tasks/get", "task_left", ""), nil)
	var v struct {
		taskView
		Error *rpcError `json:"error"`
	}
	if err := json.Unmarshal(m.Result, &v); err != nil || v.Status != "failed" || !strings.Contains(v.StatusMessage, "host_before") ||
		v.Error == nil || !strings.Contains(v.Error.Message, "cancelled") {
		t.Errorf("a task a stopped run left: %s (%v), want failed, naming the host, with an error", m.Result, err)
	}
	if m := rpc(t, url, roleToken(t, h, "other"), taskRequest(3, "tasks/get", "task_left", ""), nil); m.Error == nil {
		t.Errorf("another credential's tasks/get of it: %s, want an error", m.Result)
	}
}

// TestDeferredToolCalledUnloaded: a tool of a deferred group that the agent
// has not loaded is out of its list but the role's: its call runs as any
// other, a long one becoming a task (it ran in its request, never a task,
// before).
func TestDeferredToolCalledUnloaded(t *testing.T) {
	g := newGate()
	cfg := &config.Config{Roles: []config.Role{{Name: "worker", ToolGroups: []string{"console", "gate", host.ToolSearchGroup},
		DeferredGroups: []string{"gate"}, Pos: "config.hcl:1,1"}}}
	srv, h := serve(t, cfg, group("console", "console_print"), g.group())
	if err := h.Modules().Register(context.Background(), toolsearch.Group(h.Agents())); err != nil {
		t.Fatal(err)
	}
	url := srv.URL + "/mcp/worker"
	token := roleToken(t, h, "client")
	var res struct{ Tools []struct{ Name string } }
	if m := rpc(t, url, token, request(1, "tools/list", `{}`, metaCaps(tasksCaps, "")), nil); json.Unmarshal(m.Result, &res) != nil {
		t.Fatalf("tools/list: %s %s", m.Result, m.Error)
	}
	for _, tool := range res.Tools {
		if tool.Name == "hold" {
			t.Fatal("hold is listed before it is loaded")
		}
	}
	id := startTask(t, g, url, token)
	if m := rpc(t, url, token, taskRequest(2, "tasks/cancel", id, ""), nil); m.Error != nil {
		t.Fatalf("tasks/cancel: %s", m.Error)
	}
	if err := g.awaitEnd(t); err == nil {
		t.Error("the call ran to its end after its task was cancelled")
	}
}

// sharedPair is two hosts on one PostgreSQL serving role worker (console,
// the gate's hold, the guarded tool needing approval) to sessionless
// clients, with the mcp block given, and the role token's secret.
func sharedPair(t *testing.T, g *gate, m config.MCP, lease time.Duration) (hosts []*host.Host, urls []string, token string) {
	t.Helper()
	cfg := func() *config.Config {
		return &config.Config{
			Roles:    []config.Role{{Name: "worker", ToolGroups: []string{"console", "gate", "guard"}, Pos: "config.hcl:1,1"}},
			Executor: config.Executor{Approver: "queue", ApprovalTimeout: 10 * time.Minute, IdempotencyWindow: time.Hour},
			Runtime:  config.Runtime{Lease: lease},
			MCP:      m,
		}
	}
	guarded := func() *sdk.Group {
		return &sdk.Group{ID: "guard", Description: "Guarded.", Tools: []sdk.Tool{
			sdk.NewTool("guarded", "Needs approval.", func(_ context.Context, r *sdk.Request[textArgs]) (*sdk.Result, error) {
				return sdk.Text("guarded:" + r.Args.Text), nil
			}, sdk.RequiresApproval()),
		}}
	}
	hosts = pgHosts(t, 2, cfg, func() *sdk.Group { return group("console", "console_print") }, g.group, guarded)
	for _, h := range hosts {
		urls = append(urls, newHTTPServer(t, h, nil).URL+"/mcp/worker")
		t.Cleanup(func() {
			for _, ar := range h.Approvals().Pending() {
				_ = h.Approvals().Decide(ar.ID, host.Decision{Kind: host.Deny, Reason: "the test ended"})
			}
		})
	}
	return hosts, urls, roleToken(t, hosts[0], "client")
}

// TestSharedAgentBusyElsewhereStays: an agent whose task runs on host B is
// not ended by host A, neither to make room for the credential's other keys
// there nor when it has been idle on A (and its client silent) for the
// idle timeout: B tells the store it is in use while the task runs, and its
// task stays reachable through A.
func TestSharedAgentBusyElsewhereStays(t *testing.T) {
	g := newGate()
	const idle = time.Second
	hosts, urls, token := sharedPair(t, g, config.MCP{SessionIdleTimeout: idle, MaxSessionsPerCredential: 2}, 0)
	a, b := urls[0], urls[1]
	key := func(k string) string { return metaCaps(tasksCaps, fmt.Sprintf(`"toolhost/agent":%q`, k)) }
	rpc(t, a, token, request(1, "tools/list", `{}`, key("T")), nil) // A knows T
	task := taskOf(t, rpc(t, b, token, request(2, "tools/call", `{"name":"hold","arguments":{}}`, key("T")), nil))
	select {
	case <-g.started:
	case <-time.After(proctest.Patience):
		t.Fatal("the hold call did not start")
	}
	for _, k := range []string{"E0", "E1"} { // A's share of the credential is full: T, idle there, makes room
		rpc(t, a, token, request(3, "tools/list", `{}`, key(k)), nil)
	}
	// What is under test is a timeout: let several idle timeouts pass,
	// with the client silent.
	time.Sleep(4 * idle)
	get := func(url string) taskView {
		return taskOf(t, rpc(t, url, token, request(4, "tasks/get", fmt.Sprintf(`{"taskId":%q}`, task.TaskID), key("T")), nil))
	}
	if v := get(a); v.Status != "working" {
		t.Errorf("the task through A after A made room and its agent idled there: %+v, want working", v)
	}
	agents, err := hosts[0].Store().Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, ag := range agents {
		if ag.ClientKey == "mcp/T" && ag.Final() {
			t.Errorf("T's agent ended (%s) while its task ran on B", ag.Error)
		}
	}
	close(g.open)
	proctest.Eventually(t, "the task completes, as seen through A", func() bool { return get(a).Status == "completed" })
}

// TestHeldCallSaidLostStaysLost: a call held on host B whose run stopped
// saying it lives (frozen, not dead) is declared lost by the retry that
// reaches A; when B wakes, the same retry through B is refused, and the
// call is cancelled there: it never runs after the client was told it was
// cancelled.
func TestHeldCallSaidLostStaysLost(t *testing.T) {
	g := newGate()
	hosts, urls, token := sharedPair(t, g, config.MCP{ClientApprovals: []string{"worker"}}, time.Hour)
	a, b := urls[0], urls[1]
	held := resultOf(t, rpc(t, b, token, request(1, "tools/call", `{"name":"guarded","arguments":{"text":"late"}}`, metaCaps(elicitCaps, "")), nil))
	if held.ResultType != "input_required" {
		t.Fatalf("the guarded call through B: %+v", held)
	}
	ar := pendingApproval(t, hosts[1], "late")
	// B's run stops saying it lives, as a frozen process's does.
	if err := hosts[1].Store().RenewRun(context.Background(), hosts[1].Agents().Run(), time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	lost := resultOf(t, rpc(t, a, token, retry(2, "late", held.RequestState, acceptAnswer, ""), nil))
	if !lost.IsError || !strings.Contains(lost.text(), "stopped") {
		t.Fatalf("the retry through A while B is taken for dead: %+v, want an error saying B stopped", lost)
	}
	refusedState(t, "the same retry through B, awake again", rpc(t, b, token, retry(3, "late", held.RequestState, acceptAnswer, ""), nil))
	proctest.Eventually(t, "B cancels the call it held", func() bool { return approvalStatus(t, hosts[1], ar.ID) == "cancelled" })
}
