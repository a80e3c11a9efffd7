package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/hosttest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// pluginDir holds the workspace and command modules, built once.
var pluginDir string

// TestMain builds the modules and runs the tests; run by a test as host A
// (leaseChild), it is that host instead. The throwaway PostgreSQL cluster
// of pgtest is stopped by its watchdog once the binary exits, since
// RunWithModules exits without returning (pgtest.Main would too).
func TestMain(m *testing.M) {
	if os.Getenv(leaseChildEnv) != "" {
		os.Exit(leaseChild())
	}
	proctest.RunWithModules(m, "..", &pluginDir, "workspace", "command")
}

// env is a host running workspace and command, with a runtime whose model
// is a scripted provider.
type env struct {
	t        testing.TB
	ws, data string
	h        *host.Host
	rt       *agents.Runtime
	model    *model.Scripted
	console  *proctest.Buffer
}

// start runs a host and runtime with the script (JSON) and extra HCL for the
// runtime block; data and ws may be "" for fresh directories; tune, if any,
// changes the config and the host's options.
func start(t testing.TB, script, runtimeBlock, data, ws string, tune ...func(*config.Config, *host.Options)) *env {
	t.Helper()
	if data == "" {
		data = t.TempDir()
	}
	if ws == "" {
		ws = t.TempDir()
	}
	scriptPath := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`
plugin_dir = %q
data_dir   = %q
builtin "workspace" {
  config {
    roots = [%q]
  }
}
builtin "command" {
  config {
    workdir = %q
  }
}
model "test" {
  type   = "scripted"
  script = %q
}
runtime {
  workspace = %q
  %s
}
`, pluginDir, data, ws, ws, scriptPath, ws, runtimeBlock)
	cfg, err := config.Parse([]byte(src), filepath.Join(t.TempDir(), "config.hcl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := &host.Options{Approver: host.AlwaysApprove{}}
	for _, f := range tune {
		f(cfg, opts)
	}
	h, err := host.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Under load a plugin may miss its first start and come up on a restart:
	// the tests need every tool from the first turn.
	if down := hosttest.AwaitRunning(h, 30*time.Second); len(down) > 0 {
		t.Fatalf("plugins not running: %v", down)
	}
	sc, err := model.NewScripted(scriptPath)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ws: ws, data: data, h: h, model: sc, console: &proctest.Buffer{}}
	e.rt = agents.New(h, &agents.Options{Provider: sc, RunAgents: true, Adopt: true, Console: e.console, WatchEvery: 20 * time.Millisecond})
	if err := e.rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	if e.rt != nil {
		if err := e.rt.Close(); err != nil {
			e.t.Error(err)
		}
		e.rt = nil
	}
	if e.h != nil {
		_ = e.h.Close()
		e.h = nil
	}
}

// spawn starts an agent and waits until it and its descendants are idle.
func (e *env) spawn(role, task string) store.Agent {
	e.t.Helper()
	a, err := e.rt.Spawn(context.Background(), agents.SpawnRequest{Role: role, Task: task})
	if err != nil {
		e.t.Fatal(err)
	}
	e.wait(a.ID)
	return e.agent(a.ID)
}

func (e *env) wait(id string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := e.rt.Wait(ctx, id); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) agent(id string) store.Agent {
	e.t.Helper()
	a, err := e.h.Store().Agent(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// requests returns the model requests made for an agent, in order.
func (e *env) requests(agentID string) []model.Request {
	var out []model.Request
	for _, r := range e.model.Requests() {
		if r.Agent.ID == agentID && r.Purpose == model.PurposeTurn {
			out = append(out, r)
		}
	}
	return out
}

// events returns an agent's events of a type.
func (e *env) events(agentID, typ string) []store.Event {
	e.t.Helper()
	if err := e.h.Events().Flush(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	evs, err := e.h.Events().List(context.Background(), store.EventFilter{Agent: agentID, Type: typ, Limit: 10000})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func (e *env) createRole(name string, groups ...string) {
	e.t.Helper()
	if _, err := e.h.Roles().Create(context.Background(), host.RoleSpec{Name: name, ToolGroups: groups}); err != nil {
		e.t.Fatal(err)
	}
}

func toolNames(r model.Request) []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

// lastToolResult is the content of the last tool message of a request.
func lastToolResult(r model.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == model.RoleTool {
			return r.Messages[i].Content
		}
	}
	return ""
}

// orgScript: root creates a role limited to workspace, spawns an agent of it
// with a task and waits; the agent writes a file, tries run_command and
// send_message (not its tools; its turns after them go on with "if": "any")
// and finishes: its answer is reported to root, which wakes and answers.
const orgScript = `{
  "roles": {
    "root": [
      {"tool_calls": [{"name": "create_role", "arguments": {"name": "writer", "rolePrompt": "You write files.", "toolGroups": ["workspace"]}}]},
      {"tool_calls": [{"name": "spawn_agent_with_task", "arguments": {"roleId": "writer", "task": "Write hello.txt containing hello, then report back to {{.Agent}}."}}]},
      {"final_answer": "Waiting for the writer."},
      {"final_answer": "The writer reported: {{.Last}}"}
    ],
    "writer": [
      {"tool_calls": [{"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}}]},
      {"tool_calls": [{"name": "run_command", "arguments": {"command": "cat hello.txt"}}]},
      {"tool_calls": [{"name": "send_message", "arguments": {"to": "{{.Parent}}", "message": "wrote hello.txt"}}], "if": "any"},
      {"final_answer": "wrote hello.txt", "if": "any"}
    ]
  }
}`

func TestRootDelegatesToARoleLimitedToWorkspace(t *testing.T) {
	e := start(t, orgScript, "", "", "")
	root := e.spawn(store.RootRole, "Get hello.txt written.")

	if b, err := os.ReadFile(filepath.Join(e.ws, "hello.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("hello.txt = %q, %v", b, err)
	}
	if root.Status != store.StatusWaiting || !strings.Contains(root.Answer, "wrote hello.txt") {
		t.Fatalf("root: status %s, answer %q", root.Status, root.Answer)
	}
	all, _ := e.h.Store().Agents(context.Background())
	var writer store.Agent
	for _, a := range all {
		if a.ParentID == root.ID {
			writer = a
		}
	}
	if writer.ID == "" || writer.Status != store.StatusWaiting || writer.Answer != "wrote hello.txt" || writer.Turns != 4 {
		t.Fatalf("writer: %+v", writer)
	}

	// The root's model saw org_management only; the writer's exactly the
	// workspace tools, which is what Tools returns for it.
	rootList, _ := e.h.Tools(host.ToolQuery{Agent: root.ID})
	for _, r := range e.requests(root.ID) {
		for _, name := range toolNames(r) {
			if m := rootList.Meta[name]; m.Group != "org_management" {
				t.Errorf("root was offered %s from %s", name, m.Group)
			}
		}
	}
	wreqs := e.requests(writer.ID)
	if len(wreqs) != 4 {
		t.Fatalf("writer made %d requests, want 4", len(wreqs))
	}
	list, _ := e.h.Tools(host.ToolQuery{Agent: writer.ID})
	var want []string
	for _, d := range list.Tools {
		want = append(want, d.Function.Name)
		if m := list.Meta[d.Function.Name]; m.Group != "workspace" {
			t.Errorf("Tools(writer) has %s from %s", d.Function.Name, m.Group)
		}
	}
	slices.Sort(want)
	for i, r := range wreqs {
		if got := toolNames(r); !slices.Equal(got, want) {
			t.Errorf("writer request %d offered %v, want %v", i+1, got, want)
		}
		if !strings.Contains(r.System, "workspace") {
			t.Errorf("writer request %d: system prompt %q does not name its group", i+1, r.System)
		}
	}
	// run_command came back as tool_not_available, in the next request.
	if got := lastToolResult(wreqs[2]); !strings.Contains(got, `"code":"tool_not_available"`) || !strings.Contains(got, "run_command") {
		t.Errorf("run_command's result as the model saw it: %s", got)
	}

	// Events: agent → turn → tool_call, with parent ids.
	calls := e.events(writer.ID, "tool_call.")
	turns := e.events(writer.ID, agents.EventTurnStarted)
	if len(turns) != 4 || len(calls) != 6 {
		t.Fatalf("writer events: %d turns, %d call events", len(turns), len(calls))
	}
	for _, c := range calls {
		if !strings.HasPrefix(c.ParentID, writer.ID+".t") {
			t.Errorf("call event %s %s has parent %q", c.Type, c.Tool, c.ParentID)
		}
	}
	for _, typ := range []string{agents.EventAgentStarted, agents.EventAgentCompleted} {
		if n := len(e.events(root.ID, typ)); n != 2 {
			t.Errorf("root has %d %s events, want 2 (woken by the writer's message)", n, typ)
		}
	}
	tree, err := agents.Tree(context.Background(), e.h.Store(), root.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tree.Write(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)
	for _, want := range []string{
		"agent " + root.ID + " (role root) waiting",
		"├─ turn 1 → 1 tool call(s)",
		"│  └─ create_role",
		"spawn_agent_with_task",
		"agent " + writer.ID + " (role writer) waiting: 4 turns",
		"write_file",
		"run_command ✗ tool_not_available",
		"send_message",
		"completed: The writer reported",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("tree lacks %q:\n%s", want, text)
		}
	}
	// The writer sits under the call that spawned it.
	if i, j := strings.Index(text, "spawn_agent_with_task"), strings.Index(text, "(role writer)"); i < 0 || j < i {
		t.Errorf("writer is not under its spawn call:\n%s", text)
	}
}

func TestNoProgressStopsARepeatingAgent(t *testing.T) {
	e := start(t, `{"roles": {"looper": [
	  {"tool_calls": [{"name": "list_files", "arguments": {"path": "."}}], "repeat": -1}
	]}}`, "no_progress = 3", "", "")
	e.createRole("looper", "workspace")
	a := e.spawn("looper", "loop")
	if a.Status != store.StatusFailed || a.ErrorCode != string(toolhost.CodePolicy) || !strings.Contains(a.Error, "no progress") {
		t.Fatalf("agent: %s %s %s", a.Status, a.ErrorCode, a.Error)
	}
	if n := len(e.events(a.ID, store.EventCallStarted)); n != 2 {
		t.Errorf("list_files ran %d times, want 2 (the third identical call is refused)", n)
	}
	if f := e.events(a.ID, agents.EventAgentFailed); len(f) != 1 || f[0].Payload["code"] != "policy" {
		t.Errorf("agent.failed events: %+v", f)
	}
}

// TestProgressOfAnAgentsCallIsRecorded: a command an agent runs reports
// its output lines as it goes, and each is a tool_call.progress event of
// the agent's call, before the call's end.
func TestProgressOfAnAgentsCallIsRecorded(t *testing.T) {
	e := start(t, `{"roles": {"runner": [
	  {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo one; sleep 0.2; echo two; sleep 0.2; echo three"}}]},
	  {"content": "done"}
	]}}`, "", "", "")
	e.createRole("runner", "command")
	a := e.spawn("runner", "run")
	var lines []string
	for _, ev := range e.events(a.ID, "tool_call.") {
		switch ev.Type {
		case store.EventCallProgress:
			lines = append(lines, ev.Payload["message"].(string))
		case store.EventCallCompleted:
			if !slices.Equal(lines, []string{"one", "two", "three"}) {
				t.Fatalf("progress events before the call's end: %q, want one, two, three", lines)
			}
			return
		}
	}
	t.Fatalf("no completed call; progress %q", lines)
}

// TestModelReadsStructuredOutputOnce: a structured tool's result reaches
// the model as its JSON text, without the same again as structured content.
func TestModelReadsStructuredOutputOnce(t *testing.T) {
	e := start(t, `{"roles": {"reader": [
	  {"tool_calls": [{"name": "get_workspace_info", "arguments": {}}]},
	  {"content": "done"}
	]}}`, "", "", "")
	e.createRole("reader", "workspace")
	a := e.spawn("reader", "look")
	reqs := e.requests(a.ID)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if got := lastToolResult(reqs[1]); !strings.Contains(got, `\"roots\"`) || strings.Contains(got, toolhost.MetaStructuredContent) {
		t.Errorf("the model read %s", got)
	}
}

// TestDeferredGroupIsFoundAndLoaded: an agent of a role deferring command
// starts with workspace's tools and tool_search's, not run_command; it finds
// run_command with find_tools, loads it, and its next request carries the
// definition, which it then calls.
func TestDeferredGroupIsFoundAndLoaded(t *testing.T) {
	e := start(t, `{"roles": {"lazy": [
	  {"tool_calls": [{"name": "find_tools", "arguments": {"query": "execute a shell command line"}}]},
	  {"tool_calls": [{"name": "load_tools", "arguments": {"names": ["run_command"]}}]},
	  {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo loaded"}}]},
	  {"content": "done"}
	]}}`, "", "", "")
	if _, err := e.h.Roles().Create(context.Background(), host.RoleSpec{Name: "lazy", ToolGroups: []string{"workspace", "command"}, DeferredGroups: []string{"command"}}); err != nil {
		t.Fatal(err)
	}
	a := e.spawn("lazy", "run something")
	reqs := e.requests(a.ID)
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	tools := func(r model.Request) []string {
		var names []string
		for _, tool := range r.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	first := tools(reqs[0])
	if slices.Contains(first, "run_command") || !slices.Contains(first, "find_tools") || !slices.Contains(first, "load_tools") || !slices.Contains(first, "read_file") {
		t.Errorf("the first request's tools: %v", first)
	}
	if found := lastToolResult(reqs[1]); !strings.Contains(found, `run_command`) || !strings.Contains(found, `why`) {
		t.Errorf("find_tools answered %s", found)
	}
	if slices.Contains(tools(reqs[1]), "run_command") || !slices.Contains(tools(reqs[2]), "run_command") {
		t.Errorf("run_command among the tools before loading: %v; after: %v", tools(reqs[1]), tools(reqs[2]))
	}
	if got := lastToolResult(reqs[3]); !strings.Contains(got, `loaded\n`) {
		t.Errorf("run_command answered %s", got)
	}
}

func TestLimitsStopARunawayAgent(t *testing.T) {
	tests := []struct {
		name, script, limits string
		code                 toolhost.Code
		msg                  string
		turns                int
	}{{
		name:   "max_turns",
		script: `{"tool_calls": [{"name": "list_files", "arguments": {"path": "{{.Turn}}"}}], "repeat": -1, "if": "any"}`,
		limits: "max_turns = 5", code: toolhost.CodePolicy, msg: "max_turns (5)", turns: 5,
	}, {
		name:   "max_tokens",
		script: `{"tool_calls": [{"name": "list_files", "arguments": {"path": "{{.Turn}}"}}], "usage": {"prompt_tokens": 900, "completion_tokens": 100}, "repeat": -1, "if": "any"}`,
		limits: "max_tokens = 2500", code: toolhost.CodePolicy, msg: "max_tokens (2500)", turns: 3,
	}, {
		name:   "max_wall_time",
		script: `{"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep {{.Turn}}0"}}], "repeat": -1}`,
		limits: `max_wall_time = "300ms"`, code: toolhost.CodeTimeout, msg: "max_wall_time (300ms)", turns: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, `{"roles": {"runaway": [`+tt.script+`]}}`, tt.limits, "", "")
			e.createRole("runaway", "workspace", "command")
			begun := time.Now()
			a := e.spawn("runaway", "run away")
			if a.Status != store.StatusFailed || a.ErrorCode != string(tt.code) || !strings.Contains(a.Error, tt.msg) {
				t.Fatalf("agent: %s %s %q", a.Status, a.ErrorCode, a.Error)
			}
			if a.Turns != tt.turns {
				msgs, _ := e.h.Store().Messages(context.Background(), a.ID)
				t.Errorf("turns = %d, want %d; conversation: %+v", a.Turns, tt.turns, msgs)
			}
			if tt.name == "max_wall_time" && time.Since(begun) > 9*time.Second {
				t.Errorf("the sleeping call was not cut short")
			}
		})
	}
}

func TestBadOutputIsReportedThenFails(t *testing.T) {
	e := start(t, `{"roles": {"confused": [
	  {},
	  {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]},
	  {"tool_calls": [{"name": "write_file", "arguments": {"bogus": 1}}], "if": "any"},
	  {"final_answer": "never reached", "if": "any"}
	]}}`, "max_bad_outputs = 3", "", "")
	e.createRole("confused", "workspace")
	a := e.spawn("confused", "be confused")
	if a.Status != store.StatusFailed || a.ErrorCode != string(toolhost.CodeValidation) || !strings.Contains(a.Error, "3 times in a row") {
		t.Fatalf("agent: %s %s %q", a.Status, a.ErrorCode, a.Error)
	}
	reqs := e.requests(a.ID)
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	last := func(r model.Request) string { return r.Messages[len(r.Messages)-1].Content }
	if got := last(reqs[1]); !strings.Contains(got, "neither tool calls nor a final answer") {
		t.Errorf("after the empty reply the model was told %q", got)
	}
	if got := last(reqs[2]); !strings.Contains(got, "unknown_tool") {
		t.Errorf("after the unknown tool the model was told %q", got)
	}
	msgs, _ := e.h.Store().Messages(context.Background(), a.ID)
	if got := msgs[len(msgs)-1].Content; !strings.Contains(got, `"code":"validation"`) || !strings.Contains(got, "bogus") {
		t.Errorf("the invalid arguments were reported as %q", got)
	}
}

func TestTerminateAndMessages(t *testing.T) {
	e := start(t, `{"roles": {"*": [{"final_answer": "ok {{.Turn}}", "repeat": -1}]}}`, "", "", "")
	e.createRole("idler")
	parent := e.spawn("idler", "wait")
	child, err := e.rt.Spawn(context.Background(), agents.SpawnRequest{Role: "idler", ParentID: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := e.rt.Spawn(context.Background(), agents.SpawnRequest{Role: "idler", ParentID: child.ID, Task: "hi"})
	e.wait(parent.ID)

	// The grandchild's answer was reported to the child, which woke and
	// answered (turn 1); a message wakes it again.
	if a := e.agent(child.ID); a.Answer != "ok 1" || a.Turns != 1 {
		t.Fatalf("child after its child's report: %+v", a)
	}
	if _, err := e.rt.Send(context.Background(), parent.ID, child.ID, "ping"); err != nil {
		t.Fatal(err)
	}
	e.wait(parent.ID)
	if a := e.agent(child.ID); a.Answer != "ok 2" || a.Turns != 2 {
		t.Fatalf("child after a message: %+v", a)
	}
	msgs, _ := e.h.Store().Messages(context.Background(), child.ID)
	if len(msgs) != 4 || !strings.Contains(msgs[0].Content, "Message from agent "+grandchild.ID+" (role idler)") || !strings.Contains(msgs[2].Content, "ping") {
		t.Fatalf("child's conversation: %+v", msgs)
	}
	// Only an agent's own descendants may be terminated by it.
	call := func(agentID, tool string, args any) (*toolhost.Result, error) {
		b, _ := json.Marshal(args)
		return e.h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: b, Context: toolhost.CallContext{AgentID: agentID}})
	}
	e.createRole("boss", "org_management")
	boss, _ := e.rt.Spawn(context.Background(), agents.SpawnRequest{Role: "boss"})
	res, err := call(boss.ID, "terminate_agent", map[string]string{"agentId": child.ID})
	if err != nil || res.OK || res.Error.Code != toolhost.CodePolicy {
		t.Fatalf("a stranger terminating: %+v %v", res, err)
	}
	// send_message from an agent (with org_management) wakes the recipient,
	// which sees who wrote; an agent may not write to itself.
	res, err = call(boss.ID, "send_message", map[string]string{"to": child.ID, "message": "status?"})
	if err != nil || !res.OK {
		t.Fatalf("send_message: %+v %v", res, err)
	}
	e.wait(parent.ID)
	if msgs, _ := e.h.Store().Messages(context.Background(), child.ID); !strings.Contains(msgs[len(msgs)-2].Content, "Message from agent "+boss.ID+" (role boss):\nstatus?") {
		t.Errorf("the child got %+v", msgs[len(msgs)-2])
	}
	if res, err := call(boss.ID, "send_message", map[string]string{"to": boss.ID, "message": "me"}); err != nil || res.OK || res.Error.Code != toolhost.CodeValidation {
		t.Errorf("sending to itself: %+v %v", res, err)
	}
	ids, err := e.rt.Terminate(context.Background(), child.ID, "test")
	if err != nil || !slices.Equal(ids, []string{child.ID, grandchild.ID}) {
		t.Fatalf("terminated %v, %v", ids, err)
	}
	for _, id := range ids {
		if a := e.agent(id); a.Status != store.StatusTerminated || a.Error != "test" {
			t.Errorf("%s: %s %q", id, a.Status, a.Error)
		}
	}
	if _, err := e.rt.Send(context.Background(), "", child.ID, "anyone?"); toolhost.CodeOf(err) != toolhost.CodeValidation {
		t.Errorf("sending to a terminated agent: %v", err)
	}
	// Terminated through the store, as another process does, the agent stops.
	if _, err := e.h.Store().TerminateAgent(context.Background(), parent.ID, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	e.wait(parent.ID)
}

func TestAgentsResumeAfterARestart(t *testing.T) {
	script := `{"roles": {"*": [{"final_answer": "answer {{.Turn}} to {{.Last}}", "repeat": -1}]}}`
	e := start(t, script, "", "", "")
	e.createRole("keeper")
	a := e.spawn("keeper", "first")
	if a.Answer != "answer 1 to first" {
		t.Fatalf("answer %q", a.Answer)
	}
	data, ws := e.data, e.ws
	e.close()
	if got := e2agent(t, data, a.ID); got.Owner != "" {
		t.Fatalf("owner %q after close, want none", got.Owner)
	}

	e = start(t, script, "", data, ws)
	if _, err := e.rt.Send(context.Background(), "", a.ID, "second"); err != nil {
		t.Fatal(err)
	}
	e.wait(a.ID)
	got := e.agent(a.ID)
	if got.Answer != "answer 2 to second" || got.Turns != 2 {
		t.Fatalf("after a restart: %+v", got)
	}
	reqs := e.requests(a.ID)
	if len(reqs) != 1 || len(reqs[0].Messages) != 3 {
		t.Fatalf("the resumed agent's request: %+v", reqs)
	}
}

func e2agent(t *testing.T, data, id string) store.Agent {
	st, err := store.Open(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, err := st.Agent(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
