package agents_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/store"
)

// TestAFailedStepIsNeverReportedAsDone: a scribe whose write is refused
// does not go on to say it wrote the file, nor does the root it reports
// to; its answer, the root's and the tree say what failed.
func TestAFailedStepIsNeverReportedAsDone(t *testing.T) {
	e := start(t, `{"roles": {
  "root": [
    {"tool_calls": [{"name": "spawn_agent_with_task", "arguments": {"roleId": "scribe", "task": "{{.Task}}"}}]},
    {"final_answer": "waiting"},
    {"final_answer": "{{.Last}}"}
  ],
  "scribe": [
    {"tool_calls": [{"name": "write_file", "arguments": {"path": "../outside.txt", "content": "{{.Task}}"}}]},
    {"tool_calls": [{"name": "console_print", "arguments": {"text": "wrote outside.txt"}}]},
    {"final_answer": "wrote outside.txt"}
  ]
}}`, "", "", "")
	e.createRole("scribe", "workspace", "console")
	root := e.spawn(store.RootRole, "write it")
	scribe := onlyChild(t, e, root.ID)

	const failure = `Not done: write_file failed (policy): path "../outside.txt" is outside the workspace roots`
	if scribe.Answer != failure {
		t.Errorf("the scribe answered %q, want %q", scribe.Answer, failure)
	}
	if !strings.HasSuffix(root.Answer, failure) {
		t.Errorf("root answered %q, which does not say what failed", root.Answer)
	}
	if out := e.console.String(); strings.Contains(out, "wrote") {
		t.Errorf("the console says the file was written:\n%s", out)
	}
	if calls := e.events(scribe.ID, store.EventCallStarted); len(calls) != 1 {
		t.Errorf("the scribe made %d calls, want 1 (the refused write)", len(calls))
	}

	tree, err := agents.Tree(context.Background(), e.h.Store(), root.ID)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := tree.Write(&text); err != nil {
		t.Fatal(err)
	}
	var write, turn *agents.Node
	walk(tree, nil, func(n, parent *agents.Node) {
		if n.Kind == "call" && strings.HasPrefix(n.Title, "write_file") {
			write, turn = n, parent
		}
		if n.Status == "ok" && strings.Contains(n.Title, "wrote outside.txt") {
			t.Errorf("node %q says the write was done", n.Title)
		}
	})
	if write == nil || write.Status != "failed" || !strings.Contains(write.Title, "✗ policy") {
		t.Fatalf("the write's node: %+v\n%s", write, text.String())
	}
	if turn.Kind != "turn" || turn.Status != "failed" || !strings.Contains(turn.Title, "1 tool call(s), 1 failed") {
		t.Errorf("the write's turn: %+v\n%s", turn, text.String())
	}
	if !strings.Contains(text.String(), "completed: "+failure) {
		t.Errorf("the tree does not show the scribe's answer:\n%s", text.String())
	}
}

// TestTreeRightAfterWaitIsComplete: Tree, called as soon as Wait returns,
// shows every step of the agents waited for, the last ones included (a
// report's answer, a failure), with nothing else waited for.
func TestTreeRightAfterWaitIsComplete(t *testing.T) {
	e := start(t, `{"roles": {
  "root": [
    {"tool_calls": [{"name": "spawn_agent_with_task", "arguments": {"roleId": "helper", "task": "{{.Task}}"}}]},
    {"final_answer": "waiting"},
    {"final_answer": "done: {{.Last}}"}
  ],
  "helper": [
    {"tool_calls": [{"name": "list_files", "arguments": {"path": "."}}]},
    {"final_answer": "listed"}
  ],
  "doomed": [
    {"tool_calls": [{"name": "list_files", "arguments": {"path": "."}}]}
  ]
}}`, "", "", "")
	e.createRole("helper", "workspace")
	e.createRole("doomed", "workspace")
	ctx := context.Background()
	for i := range 20 {
		for _, role := range []string{store.RootRole, "doomed"} {
			a, err := e.rt.Spawn(ctx, agents.SpawnRequest{Role: role, Task: "task"})
			if err != nil {
				t.Fatal(err)
			}
			e.wait(a.ID)
			tree, err := agents.Tree(ctx, e.h.Store(), a.ID)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			if err := tree.Write(&text); err != nil {
				t.Fatal(err)
			}
			var ends []string
			walk(tree, nil, func(n, _ *agents.Node) {
				if n.Status == "running" {
					t.Errorf("run %d, %s: node %q is still running after Wait", i, role, n.Title)
				}
				if n.Kind == "event" && (strings.HasPrefix(n.Title, "completed: ") || strings.HasPrefix(n.Title, "failed: ")) {
					ends = append(ends, n.Title)
				}
			})
			want := []string{"completed: waiting", "completed: listed", "completed: done: "}
			if role == "doomed" {
				want = []string{`failed: internal: model provider: model: scripted: role "doomed" has no turn 2`}
			}
			for _, w := range want {
				if !containsPrefix(ends, w) {
					t.Errorf("run %d, %s: the tree right after Wait lacks %q:\n%s", i, role, w, text.String())
				}
			}
			if t.Failed() {
				t.FailNow()
			}
		}
	}
}

// onlyChild returns the one agent parent spawned.
func onlyChild(t *testing.T, e *env, parent string) store.Agent {
	t.Helper()
	all, err := e.h.Store().Agents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Agent
	for _, a := range all {
		if a.ParentID == parent {
			out = append(out, a)
		}
	}
	if len(out) != 1 {
		t.Fatalf("agent %s spawned %d agents, want 1", parent, len(out))
	}
	return out[0]
}

// walk calls f with every node under n and its parent, n included.
func walk(n, parent *agents.Node, f func(n, parent *agents.Node)) {
	f(n, parent)
	for _, c := range n.Children {
		walk(c, n, f)
	}
}

func containsPrefix(items []string, prefix string) bool {
	for _, s := range items {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
