package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/runtime"
	"github.com/toolhost/toolhost/store"
)

// TestSpawnedAgentsAreTheirSpawnersCredential: an agent spawned by
// another is of its spawner's credential, and its calls count against that
// credential's limits: spawning agents, which is free, never resets a
// bucket. An agent spawned with a credential of its own keeps it.
func TestSpawnedAgentsAreTheirSpawnersCredential(t *testing.T) {
	e := start(t, `{"roles": {"worker": [{"tool_calls": [{"name": "console_print", "arguments": {"text": "hi"}}]}, {"final_answer": "done"}]}}`, "", "", "")
	ctx := context.Background()
	limits := []rules.Limit{{Target: "console_print", Calls: 1, Per: time.Hour}}
	if _, err := e.h.CreateRole(ctx, host.RoleSpec{Name: "worker", ToolGroups: []string{"console"}, Limits: limits}); err != nil {
		t.Fatal(err)
	}
	parent, err := e.h.CreateAgent(ctx, "worker", store.Agent{Credential: "token/alice/1"})
	if err != nil {
		t.Fatal(err)
	}
	// alice spends the limit herself.
	if res, err := e.h.Call(ctx, &toolhost.CallRequest{Tool: "console_print", Arguments: []byte(`{"text":"mine"}`),
		Context: toolhost.CallContext{AgentID: parent.ID, Credential: "token/alice/1"}}); err != nil || !res.OK {
		t.Fatalf("alice's call: %+v, %v", res, err)
	}
	child, err := e.rt.Spawn(ctx, runtime.SpawnRequest{Role: "worker", Task: "print", ParentID: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.rt.Spawn(ctx, runtime.SpawnRequest{Role: "worker", Task: "print", ParentID: parent.ID, Credential: "token/bob/2"})
	if err != nil {
		t.Fatal(err)
	}
	if child.Credential != "token/alice/1" || own.Credential != "token/bob/2" {
		t.Fatalf("credentials: the child's %q, want alice's; the one spawned with bob's %q", child.Credential, own.Credential)
	}
	codes := map[string]string{}
	proctest.Eventually(t, "both spawned agents called console_print", func() bool {
		if err := e.h.FlushEvents(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{child.ID, own.ID} {
			evs, _ := e.h.Events(ctx, store.EventFilter{AgentID: id, Tool: "console_print"})
			for _, ev := range evs {
				switch ev.Type {
				case store.EventCallCompleted:
					codes[id] = "ok"
				case store.EventCallFailed:
					codes[id], _ = ev.Payload["code"].(string)
				}
			}
		}
		return len(codes) == 2
	})
	if codes[child.ID] != string(toolhost.CodeRateLimited) || codes[own.ID] != "ok" {
		t.Errorf("console_print of alice's child: %s, want rate_limited; of bob's: %s, want ok", codes[child.ID], codes[own.ID])
	}
}
