package agents_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/rules"
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
	if _, err := e.h.Roles().Create(ctx, host.RoleSpec{Name: "worker", ToolGroups: []string{"console"}, Limits: limits}); err != nil {
		t.Fatal(err)
	}
	parent, err := e.h.Agents().Create(ctx, "worker", store.Agent{Credential: "token/alice/1"})
	if err != nil {
		t.Fatal(err)
	}
	// alice spends the limit herself.
	if res, err := e.h.Call(ctx, &toolhost.CallRequest{Tool: "console_print", Arguments: []byte(`{"text":"mine"}`),
		Context: toolhost.CallContext{AgentID: parent.ID, Credential: "token/alice/1"}}); err != nil || !res.OK {
		t.Fatalf("alice's call: %+v, %v", res, err)
	}
	child, err := e.rt.Spawn(ctx, agents.SpawnRequest{Role: "worker", Task: "print", ParentID: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	own, err := e.rt.Spawn(ctx, agents.SpawnRequest{Role: "worker", Task: "print", ParentID: parent.ID, Credential: "token/bob/2"})
	if err != nil {
		t.Fatal(err)
	}
	if child.Credential != "token/alice/1" || own.Credential != "token/bob/2" {
		t.Fatalf("credentials: the child's %q, want alice's; the one spawned with bob's %q", child.Credential, own.Credential)
	}
	codes := map[string]string{}
	proctest.Eventually(t, "both spawned agents called console_print", func() bool {
		if err := e.h.Events().Flush(ctx); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{child.ID, own.ID} {
			evs, _ := e.h.Events().List(ctx, store.EventFilter{Agent: id, Tool: "console_print"})
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

// TestRoleTokenIsNotTheOperator: org_management's tools that act for their
// caller treat a call without an agent as the operator's only when it is
// the admin's, the CLI's or the embedding program's: a role token of root
// calling without an agent may neither terminate an agent it did not spawn
// nor send a message that reads as the operator's.
func TestRoleTokenIsNotTheOperator(t *testing.T) {
	e := start(t, `{"roles": {}}`, "", "", "")
	ctx := context.Background()
	e.createRole("worker", "console")
	victim, err := e.h.Agents().Create(ctx, "worker", store.Agent{Credential: "token/dev/1"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(cred, tool, args string) error {
		res, err := e.h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: []byte(args), Context: toolhost.CallContext{Role: "root", Credential: cred}})
		if err == nil && !res.OK {
			err = fmt.Errorf("%s: %s", res.Error.Code, res.Error.Message)
		}
		return err
	}
	for _, tool := range []struct{ name, args string }{
		{"send_message", fmt.Sprintf(`{"to":%q,"message":"from the operator, honest"}`, victim.ID)},
		{"terminate_agent", fmt.Sprintf(`{"agentId":%q}`, victim.ID)},
	} {
		if err := call("token/root1/2", tool.name, tool.args); err == nil || !strings.Contains(err.Error(), "policy") || !strings.Contains(err.Error(), "is not the operator") {
			t.Errorf("%s by a root token without an agent: %v, want policy", tool.name, err)
		}
	}
	if a, _ := e.h.Store().Agent(ctx, victim.ID); a.Final() {
		t.Fatalf("the victim was terminated: %s", a.Error)
	}
	if err := call(store.CredentialAdmin, "terminate_agent", fmt.Sprintf(`{"agentId":%q}`, victim.ID)); err != nil {
		t.Fatalf("the admin terminating: %v", err)
	}
}
