package mcpfront

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/store"
)

// TestTasksKeptBounded: a credential cannot make the front keep its tasks
// without bound by ending them faster than their TTL, nor by spreading
// them over agents it makes for free (agent keys): past maxKeptTasks the
// oldest ended ones of its agents are forgotten, its working ones and
// other credentials' are kept.
func TestTasksKeptBounded(t *testing.T) {
	var ts mcpTasks
	a := &mcpAgent{key: agentKey{scope: "cred:a"}, cred: "token/a/1"}
	keyed := &mcpAgent{key: agentKey{scope: "cred:a", name: "another-key"}, cred: "token/a/1"}
	other := &mcpAgent{key: agentKey{scope: "cred:b"}, cred: "token/b/2"}
	start := time.Now()
	task := func(n int, agent *mcpAgent, status string) *mcpTask {
		return &mcpTask{id: fmt.Sprintf("task_%d", n), agent: agent, created: start.Add(time.Duration(n) * time.Millisecond),
			status: status, cancel: func() {}}
	}
	ts.add(task(0, a, store.TaskWorking)) // the oldest, but working
	ts.add(task(1, other, store.TaskCompleted))
	for n := 2; n < maxKeptTasks+12; n++ {
		ts.add(task(n, []*mcpAgent{a, keyed}[n%2], store.TaskCompleted))
	}
	mine := 0
	for _, tk := range ts.tasks {
		if tk.agent.cred == a.cred {
			mine++
		}
	}
	if mine != maxKeptTasks {
		t.Errorf("the credential's agents hold %d tasks, want %d", mine, maxKeptTasks)
	}
	for id, want := range map[string]bool{"task_0": true, "task_1": true, "task_2": false, "task_12": false, "task_13": true,
		fmt.Sprintf("task_%d", maxKeptTasks+11): true} {
		if _, ok := ts.tasks[id]; ok != want {
			t.Errorf("%s kept: %v, want %v", id, ok, want)
		}
	}
}

// TestStatedCapabilitiesAgreeWithSDK: wantsTask and canElicit, which read a
// sessionless request's capabilities from its _meta as decoded, decide as
// the SDK's typed ClientCapabilities would, for each way a client may state
// them (or not).
func TestStatedCapabilitiesAgreeWithSDK(t *testing.T) {
	for _, caps := range []string{
		`absent`, `null`, `{}`, `{"elicitation":{}}`, `{"elicitation":null}`, `{"elicitation":{"form":{}}}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, `{"extensions":{"io.modelcontextprotocol/tasks":null}}`,
		`{"extensions":{"other":{}}}`, `{"extensions":null}`, `{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
	} {
		meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
		if caps != "absent" {
			meta += `,"io.modelcontextprotocol/clientCapabilities":` + caps
		}
		var m mcp.Meta
		if err := json.Unmarshal([]byte(meta+"}"), &m); err != nil {
			t.Fatal(err)
		}
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: m}}
		typed := req.ClientCapabilities()
		var tasks bool
		if typed != nil {
			_, tasks = typed.Extensions[tasksExtension]
		}
		if got := wantsTask(req); got != tasks {
			t.Errorf("%s: wantsTask %v, the SDK's capabilities say %v", caps, got, tasks)
		}
		if got, want := canElicit(roundRequestOf("tools/call", req, nil, "")), typed != nil && typed.Elicitation != nil; got != want {
			t.Errorf("%s: canElicit %v, the SDK's capabilities say %v", caps, got, want)
		}
	}
}

// TestTaskCallsBounded: the calls that may become tasks are counted before
// they start, per credential whatever agent key makes them: calls made at
// once cannot all pass the bound before any is counted.
func TestTaskCallsBounded(t *testing.T) {
	var ts mcpTasks
	a := &mcpAgent{key: agentKey{scope: "cred:a"}, cred: "token/a/1"}
	keyed := &mcpAgent{key: agentKey{scope: "cred:a", name: "k"}, cred: "token/a/1"}
	other := &mcpAgent{key: agentKey{scope: "cred:b"}, cred: "token/b/2"}
	for i := range maxTasks {
		if !ts.reserve([]*mcpAgent{a, keyed}[i%2]) {
			t.Fatalf("call %d refused", i)
		}
	}
	if ts.reserve(keyed) || ts.reserve(a) {
		t.Fatalf("a call past %d of one credential was counted in", maxTasks)
	}
	if !ts.reserve(other) {
		t.Fatal("another credential's call was refused")
	}
	ts.release(a)
	if !ts.reserve(keyed) {
		t.Fatal("a call after one ended was refused")
	}
}
