package agents_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// scripter starts a host whose role "scripter" has the groups named and
// the code group, with spec's rules, limits and code bounds, and returns
// it with an agent of the role.
func scripter(t *testing.T, spec host.RoleSpec, groups []string, tune ...func(*config.Config, *host.Options)) (*env, string) {
	t.Helper()
	e := start(t, `{"roles": {}}`, "", "", "", tune...)
	spec.Name, spec.ToolGroups = "scripter", append(groups, host.CodeGroup)
	if _, err := e.h.Roles().Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	a, err := e.h.Agents().Create(context.Background(), "scripter", store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.txt", "b.txt", "secret.txt"} {
		if err := os.WriteFile(filepath.Join(e.ws, name), []byte("line of "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e, a.ID
}

// runScript calls run_script as the agent with the call id and returns
// its result and, when it succeeded, its structured content.
func (e *env) runScript(agentID, callID, src string) (*toolhost.Result, map[string]any) {
	e.t.Helper()
	args, _ := json.Marshal(map[string]string{"script": src})
	res, err := e.h.Call(context.Background(), &toolhost.CallRequest{Tool: "run_script", Arguments: args,
		Context: toolhost.CallContext{AgentID: agentID, CallID: callID, Credential: "token/dev/1"}})
	if err != nil {
		e.t.Fatalf("run_script: %v", err)
	}
	var out map[string]any
	if res.OK {
		if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
			e.t.Fatalf("run_script's text is not JSON: %q", res.Stdout)
		}
		if sc, _ := json.Marshal(res.Meta[toolhost.MetaStructuredContent]); string(sc) != res.Stdout {
			e.t.Errorf("structured content %s, text %s: not the same JSON", sc, res.Stdout)
		}
	}
	return res, out
}

// children returns the events recorded under the call id, in order.
func (e *env) children(callID string) []store.Event {
	e.t.Helper()
	if err := e.h.Events().Flush(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	evs, err := e.h.Events().List(context.Background(), store.EventFilter{Parent: callID, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// outcomes counts the terminal events of the calls under callID by their
// outcome: "completed", or the failure's code.
func (e *env) outcomes(callID string) map[string]int {
	out := map[string]int{}
	for _, ev := range e.children(callID) {
		switch ev.Type {
		case "tool_call.completed":
			out["completed"]++
		case "tool_call.failed":
			out[ev.Payload["code"].(string)]++
		}
	}
	return out
}

func TestScriptCallsThreeToolsOfItsRole(t *testing.T) {
	e, agent := scripter(t, host.RoleSpec{}, []string{"workspace", "command"})
	src := `
names = list_files(path = ".").splitlines()
first = read_file(path = "a.txt")
echo = run_command(command = "echo hi")
print("read", len(first), "bytes")
result = {"files": sorted(names), "first": first.strip(), "echo": echo}
`
	res, out := e.runScript(agent, "script-1", src)
	if !res.OK {
		t.Fatalf("run_script: %+v", res.Error)
	}
	got := out["result"].(map[string]any)
	if strings.Join(toStrings(got["files"]), " ") != "a.txt b.txt secret.txt" || got["first"] != "line of a.txt" || !strings.Contains(got["echo"].(string), "hi") {
		t.Errorf("result: %v", got)
	}
	if out["printed"] != "read 14 bytes\n" {
		t.Errorf("printed: %q", out["printed"])
	}
	// The three calls are the agent's own, each under the script's call.
	var tools []string
	for _, ev := range e.children("script-1") {
		if ev.Type == "tool_call.completed" {
			tools = append(tools, ev.Tool)
			if ev.AgentID != agent || ev.Role != "scripter" || ev.Payload["credential"] != "token/dev/1" {
				t.Errorf("inner call %s: agent %s role %s payload %v", ev.Tool, ev.AgentID, ev.Role, ev.Payload)
			}
		}
	}
	if strings.Join(tools, " ") != "list_files read_file run_command" {
		t.Errorf("inner calls under the script: %v", tools)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestScriptSeesTheRolesToolsOnly: a tool outside the role is no
// function, and call() refuses it; nothing runs.
func TestScriptSeesTheRolesToolsOnly(t *testing.T) {
	e, agent := scripter(t, host.RoleSpec{}, []string{"workspace"})
	cases := []struct{ src, msg string }{
		{`result = run_command(command = "id")`, "undefined: run_command"},
		{`result = call("run_command", command = "id")`, `"run_command" is not one of your tools`},
		{`result = call("run_script", script = "result = 1")`, `"run_script" is not one of your tools`},
		{`result = parallel([("run_command", {"command": "id"})])`, `"run_command" is not one of your tools`},
	}
	for _, tt := range cases {
		res, _ := e.runScript(agent, "", tt.src)
		if res.OK || !strings.Contains(res.Error.Message, tt.msg) {
			t.Errorf("%s: %+v, want %q", tt.src, res.Error, tt.msg)
		}
	}
	if evs := e.events(agent, "tool_call.started"); len(evs) != len(cases) {
		t.Errorf("%d calls started, want the %d scripts only: a call outside the role ran", len(evs), len(cases))
	}
}

// TestRuleDeniesAnInnerCall: a rule of the role refuses one of a
// script's calls, as it would refuse the agent's; the script sees the
// refusal as a value and goes on.
func TestRuleDeniesAnInnerCall(t *testing.T) {
	spec := host.RoleSpec{Rules: []rules.Rule{{Name: "no_secrets", Tools: []string{"read_file"}, When: `args.path.contains("secret")`, Action: rules.Deny, Reason: "secrets stay put"}}}
	e, agent := scripter(t, spec, []string{"workspace"})
	res, out := e.runScript(agent, "ruled", `
r = [read_file(path = p) for p in ["a.txt", "secret.txt"]]
result = [failed(x) for x in r] + [r[1]["error"]["code"]]
`)
	if !res.OK {
		t.Fatalf("run_script: %+v", res.Error)
	}
	if b, _ := json.Marshal(out["result"]); string(b) != `[false,true,"policy"]` {
		t.Errorf("result: %s", b)
	}
	if got := e.outcomes("ruled"); got["completed"] != 1 || got["policy"] != 1 {
		t.Errorf("outcomes under the script: %v", got)
	}
}

// TestCallLimitHoldsInsideAScript: a limit of 3 calls counts a script's
// calls as the agent's, one at a time or in parallel.
func TestCallLimitHoldsInsideAScript(t *testing.T) {
	spec := host.RoleSpec{Limits: []rules.Limit{{Target: "read_file", Calls: 3, Per: time.Hour}}}
	e, agent := scripter(t, spec, []string{"workspace"})
	for _, tt := range []struct{ id, src string }{
		{"serial", `result = [failed(read_file(path = "a.txt")) for i in range(10)]`},
		{"parallel", `result = [failed(r) for r in parallel([("read_file", {"path": "a.txt"})] * 10)]`},
	} {
		res, out := e.runScript(agent, tt.id, tt.src)
		if !res.OK {
			t.Fatalf("%s: %+v", tt.id, res.Error)
		}
		ok := 0
		for _, f := range out["result"].([]any) {
			if f == false {
				ok++
			}
		}
		want := 3
		if tt.id == "parallel" {
			want = 0 // the serial script spent the bucket
		}
		if got := e.outcomes(tt.id); ok != want || got["completed"] != want || got["rate_limited"] != 10-want {
			t.Errorf("%s: %d succeeded, outcomes %v; want %d", tt.id, ok, got, want)
		}
	}
}

// approver decides by the path of the call: it approves a.txt, denies the
// rest, and records what it was asked.
type approver struct {
	mu    sync.Mutex
	asked []host.ApprovalRequest
}

func (a *approver) Approve(_ context.Context, req host.ApprovalRequest) (host.Decision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, req)
	if strings.Contains(string(req.Arguments), "a.txt") {
		return host.Decision{Kind: host.Approve}, nil
	}
	return host.Decision{Kind: host.Deny, Reason: "not that one"}, nil
}

// TestApprovalInsideAScript: a call that needs approval waits for the
// approver; a denied one is a value the script tests.
func TestApprovalInsideAScript(t *testing.T) {
	ap := &approver{}
	spec := host.RoleSpec{Rules: []rules.Rule{{Name: "ask", Tools: []string{"read_file"}, Action: rules.Approve}}}
	e, agent := scripter(t, spec, []string{"workspace"}, func(_ *config.Config, o *host.Options) { o.Approver = ap })
	res, out := e.runScript(agent, "approved", `
a = read_file(path = "a.txt")
b = read_file(path = "b.txt")
result = {"a": a.strip(), "b": b["error"]["code"], "why": b["error"]["message"]}
`)
	if !res.OK {
		t.Fatalf("run_script: %+v", res.Error)
	}
	got := out["result"].(map[string]any)
	if got["a"] != "line of a.txt" || got["b"] != "approval_denied" || !strings.Contains(got["why"].(string), "not that one") {
		t.Errorf("result: %v", got)
	}
	if len(ap.asked) != 2 || ap.asked[0].AgentID != agent || ap.asked[0].Role != "scripter" || ap.asked[0].Credential != "token/dev/1" {
		t.Errorf("the approver was asked %+v", ap.asked)
	}
}

// TestScriptBounds: each bound stops a script that passes it, with an
// error naming the bound; a role's code block overrides the config's.
func TestScriptBounds(t *testing.T) {
	code := rules.CodeBounds{Steps: 100_000, Timeout: 2 * time.Second, Memory: 64 << 20, Calls: 5, Output: 1000}
	e, agent := scripter(t, host.RoleSpec{Code: code}, []string{"workspace"}, func(c *config.Config, _ *host.Options) {
		c.Code = rules.CodeBounds{Calls: 1000, Parallel: 2}
	})
	// The timeout and memory rows get more steps, so that steps do not
	// stop them first, however slow the machine.
	unstepped := func(b rules.CodeBounds) *rules.CodeBounds { b.Steps = rules.MaxCodeSteps; return &b }
	for _, tt := range []struct {
		name, src string
		code      toolhost.Code
		msg       string
		bounds    *rules.CodeBounds // the role's for this row, when not code
	}{
		{"steps", "while True:\n  pass", toolhost.CodePolicy, "code: steps: the script ran more than 100000 steps", nil},
		{"timeout", `result = [read_file(path = "a.txt") for i in range(3)]` + "\nwhile True:\n  pass", toolhost.CodeTimeout, "code: timeout: the script ran longer than 300ms",
			unstepped(rules.CodeBounds{Timeout: 300 * time.Millisecond})},
		{"memory", "l = []\nwhile True:\n  l.append(\"x\" * 10000)", toolhost.CodePolicy, "code: memory: the script needed more than 64MiB",
			unstepped(rules.CodeBounds{Memory: 64 << 20, Timeout: time.Minute})},
		{"memory in one step", `x = [0] * 40000000`, toolhost.CodePolicy, "code: memory: the script needed more than 64MiB",
			unstepped(rules.CodeBounds{Memory: 64 << 20, Timeout: time.Minute})},
		{"calls", `result = [read_file(path = "a.txt") for i in range(6)]`, toolhost.CodePolicy, "code: calls: the script made more than 5 tool calls", nil},
		{"parallel calls", `result = parallel([("read_file", {"path": "a.txt"})] * 6)`, toolhost.CodePolicy, "code: calls: the script made more than 5 tool calls", nil},
		{"output", `result = "x" * 2000`, toolhost.CodePolicy, "code: output: the script returned 2013 bytes, more than 1000", nil},
		{"printed", "for i in range(200):\n  print(\"0123456789\")", toolhost.CodePolicy, "code: output: the script printed more than 1000 bytes", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.bounds != nil {
				if _, err := e.h.Roles().Update(context.Background(), "scripter", host.RoleUpdate{Code: tt.bounds}); err != nil {
					t.Fatal(err)
				}
				defer func() { _, _ = e.h.Roles().Update(context.Background(), "scripter", host.RoleUpdate{Code: &code}) }()
			}
			begun := time.Now()
			res, _ := e.runScript(agent, "", tt.src)
			if res.OK || res.Error.Code != tt.code || !strings.Contains(res.Error.Message, tt.msg) {
				t.Fatalf("%+v, want %s %q", res.Error, tt.code, tt.msg)
			}
			if took := time.Since(begun); took > 20*time.Second {
				t.Errorf("took %v to stop", took)
			}
		})
	}
	// Within the bounds, the same role's script runs.
	if res, out := e.runScript(agent, "", `result = 6 * 7`); !res.OK || out["result"] != float64(42) {
		t.Errorf("a small script: %+v %v", res.Error, out)
	}
}

// TestScriptEventTree: the script's call and the calls it made form a
// tree in the events: its call under nothing, theirs under its call id.
func TestScriptEventTree(t *testing.T) {
	e, agent := scripter(t, host.RoleSpec{}, []string{"workspace"})
	res, _ := e.runScript(agent, "tree", `result = parallel([(read_file, {"path": "a.txt"}), ("read_file", {"path": "b.txt"})])`)
	if !res.OK {
		t.Fatalf("run_script: %+v", res.Error)
	}
	evs := e.events(agent, "")
	byCall := map[string][]string{}
	parents := map[string]string{}
	for _, ev := range evs {
		byCall[ev.CallID] = append(byCall[ev.CallID], ev.Type)
		parents[ev.CallID] = ev.ParentID
	}
	if parents["tree"] != "" || strings.Join(byCall["tree"], " ") != "tool_call.started tool_call.completed" {
		t.Errorf("the script's call: parent %q, events %v", parents["tree"], byCall["tree"])
	}
	inner := 0
	for id, p := range parents {
		if p == "tree" {
			inner++
			if strings.Join(byCall[id], " ") != "tool_call.started tool_call.completed" {
				t.Errorf("inner call %s: %v", id, byCall[id])
			}
		}
	}
	if inner != 2 {
		t.Errorf("%d calls under the script, want 2: %v", inner, parents)
	}
}

// TestRunScriptDescription: run_script's description lists the functions
// of the caller's tools, deferred ones once loaded; only a role that names
// the code group gets it.
func TestRunScriptDescription(t *testing.T) {
	e, agent := scripter(t, host.RoleSpec{DeferredGroups: []string{"command"}}, []string{"workspace", "command"})
	describe := func() string {
		t.Helper()
		list, err := e.h.Tools(host.ToolQuery{Agent: agent})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range list.Tools {
			if d.Function.Name == "run_script" {
				return d.Function.Description
			}
		}
		t.Fatalf("no run_script among %v", list.Tools)
		return ""
	}
	d := describe()
	for _, want := range []string{"\nFunctions:\n", "\nread_file(path: str, limit: int = None, offset: int = None)\n", "\nfind_tools(query: str, limit: int = None)"} {
		if !strings.Contains(d, want) {
			t.Errorf("the description has no %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "run_command(") || strings.Contains(d, "run_script(") {
		t.Errorf("the description names an unloaded tool or itself:\n%s", d)
	}
	// A deferred tool is the script's all the same, and in the
	// description once loaded.
	if res, out := e.runScript(agent, "", `result = "hi" in run_command(command = "echo hi")`); !res.OK || out["result"] != true {
		t.Errorf("a deferred tool from a script: %+v %v", res.Error, out)
	}
	if _, err := e.h.Agents().LoadTools(context.Background(), agent, []string{"run_command"}); err != nil {
		t.Fatal(err)
	}
	if d := describe(); !strings.Contains(d, "\nrun_command(command: str") {
		t.Errorf("run_command loaded, not described:\n%s", d)
	}
	// No code group for roles that do not name it.
	e.createRole("everything")
	for _, q := range []host.ToolQuery{{Role: "everything"}, {Role: store.RootRole}, {}} {
		list, err := e.h.Tools(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range list.Tools {
			if d.Function.Name == "run_script" {
				t.Errorf("%+v is offered run_script", q)
			}
		}
	}
}

// TestCodeModeAttacks: what a script might try, one row each: it gets
// nothing but its role's tools, through the pipeline, under its own call.
func TestCodeModeAttacks(t *testing.T) {
	spec := host.RoleSpec{Limits: []rules.Limit{{Target: "list_files", Calls: 2, Per: time.Hour}}}
	e, agent := scripter(t, spec, []string{"workspace"})
	outside := filepath.Join(t.TempDir(), "pwned")
	for _, tt := range []struct {
		name, src string
		code      toolhost.Code // "": the script succeeds
		msg       string        // in its error, or in its result
	}{
		{"load", `load("@stdlib//os.star", "system")`, toolhost.CodeToolExec, "load() is not available"},
		{"open a file", `result = open("/etc/passwd")`, toolhost.CodeValidation, "undefined: open"},
		{"write a file", `write_file(path = "` + outside + `", content = "x")` + "\nresult = 1", "", ""},
		{"the network", `result = http.get("http://127.0.0.1/")`, toolhost.CodeValidation, "undefined: http"},
		{"recursion", "def f(n):\n  return f(n - 1)\nresult = f(3)", toolhost.CodeToolExec, "called recursively"},
		{"a script from a script", `result = run_script(script = "result = 1")`, toolhost.CodeValidation, "undefined: run_script"},
		{"a tool outside the role", `result = call("run_command", command = "touch ` + outside + `")`, toolhost.CodeToolExec, "not one of your tools"},
		{"past the call limit in parallel", `result = [r["error"]["code"] for r in parallel([("list_files", {"path": "."})] * 6) if failed(r)]`, "", `["rate_limited","rate_limited","rate_limited","rate_limited"]`},
		{"forging a parent", `result = read_file(path = "a.txt", parent_id = "someone-else")`, "", "validation"},
		{"a deep result", "x = []\nfor i in range(10000):\n  x = [x]\nprint(1)\nresult = x", toolhost.CodePolicy, "code: output: the result nests 10001 levels, more than 64"},
		{"deep JSON", `x = json.decode("[" * 100000 + "]" * 100000)` + "\nresult = 1", toolhost.CodePolicy, "code: depth: json.decode's input nests 100000 levels, more than 64"},
		{"a long error", `fail("a" * 1000000)`, toolhost.CodeToolExec, "bytes, more than the output bound of 32768)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := "attack-" + strings.ReplaceAll(tt.name, " ", "-")
			res, out := e.runScript(agent, id, tt.src)
			switch {
			case tt.code != "" && (res.OK || res.Error.Code != tt.code || !strings.Contains(res.Error.Message, tt.msg)):
				t.Errorf("%+v, want %s %q", res.Error, tt.code, tt.msg)
			case tt.code == "" && !res.OK:
				t.Errorf("%+v", res.Error)
			case tt.code == "":
				if b, _ := json.Marshal(out["result"]); !strings.Contains(string(b), tt.msg) {
					t.Errorf("result %s, want %s", b, tt.msg)
				}
			}
		})
	}
	// Unchanged: nothing written outside the workspace's root, and every
	// call a script made is under that script's call.
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("%s: %v; want it absent", outside, err)
	}
	for _, ev := range e.events(agent, "tool_call.started") {
		if ev.Tool != "run_script" && !strings.HasPrefix(ev.ParentID, "attack-") {
			t.Errorf("call %s of %s has parent %q, not a script's", ev.CallID, ev.Tool, ev.ParentID)
		}
	}
}

// TestScriptWaitsForTheApprovalQueue: with the host's queue as its
// approver, a script's call that needs approval waits in the queue, as
// the agent's own would, until the operator decides.
func TestScriptWaitsForTheApprovalQueue(t *testing.T) {
	spec := host.RoleSpec{Rules: []rules.Rule{{Name: "ask", Tools: []string{"read_file"}, Action: rules.Approve, Reason: "reads are asked"}}}
	e, agent := scripter(t, spec, []string{"workspace"}, func(_ *config.Config, o *host.Options) { o.Approver = nil })
	done := make(chan map[string]any, 1)
	go func() {
		res, out := e.runScript(agent, "waiting", `result = read_file(path = "a.txt").strip()`)
		if !res.OK {
			t.Errorf("run_script: %+v", res.Error)
		}
		done <- out
	}()
	deadline := time.Now().Add(30 * time.Second)
	var pending []host.ApprovalRequest
	for len(pending) == 0 && time.Now().Before(deadline) {
		pending = e.h.Approvals().Pending()
		time.Sleep(10 * time.Millisecond)
	}
	if len(pending) != 1 || pending[0].Tool != "read_file" || pending[0].AgentID != agent || pending[0].Rule != "ask" {
		t.Fatalf("pending: %+v", pending)
	}
	select {
	case out := <-done:
		t.Fatalf("the script ended before the decision: %v", out)
	default:
	}
	if err := e.h.Approvals().Decide(pending[0].ID, host.Decision{Kind: host.Approve}); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-done:
		if out["result"] != "line of a.txt" {
			t.Errorf("result: %v", out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the script did not go on after the approval")
	}
}

// TestAgentRunsAScript: a runtime agent's model calls run_script; the
// script's result, and nothing of the calls it made, is what the model
// reads next; the calls are under the script's call, under the turn.
func TestAgentRunsAScript(t *testing.T) {
	e := start(t, `{"roles": {"scripter": [
	  {"tool_calls": [{"name": "run_script", "arguments": {"script": "files = list_files(path = \".\").splitlines()\nresult = len([f for f in files if f.endswith(\".txt\")])"}}]},
	  {"final_answer": "{{.Last}}"}
	]}}`, "", "", "")
	e.createRole("scripter", "workspace", host.CodeGroup)
	for _, name := range []string{"a.txt", "b.txt", "c.md"} {
		if err := os.WriteFile(filepath.Join(e.ws, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := e.spawn("scripter", "count the text files")
	reqs := e.requests(a.ID)
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if !slices.Contains(toolNames(reqs[0]), "run_script") {
		t.Errorf("the model was not offered run_script: %v", toolNames(reqs[0]))
	}
	// The runtime shows the model every result as its envelope: the
	// script's JSON is its stdout, and nothing else is there.
	var env toolhost.Result
	if err := json.Unmarshal([]byte(lastToolResult(reqs[1])), &env); err != nil || !env.OK || env.Stdout != `{"result":2}` || len(env.Meta) != 0 {
		t.Errorf("the model read %q", lastToolResult(reqs[1]))
	}
	var script string
	for _, ev := range e.events(a.ID, "tool_call.completed") {
		if ev.Tool == "run_script" {
			script = ev.CallID
		}
	}
	var inner []string
	for _, ev := range e.events(a.ID, "tool_call.completed") {
		if ev.ParentID == script {
			inner = append(inner, ev.Tool)
		}
	}
	if script == "" || strings.Join(inner, " ") != "list_files" {
		t.Errorf("script call %q, calls under it %v", script, inner)
	}
}
