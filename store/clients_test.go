package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestClientAgentOnePerKey: hosts asking at once for the agent of one
// role, credential and client key all get the one agent, made once; a key
// of another credential is another agent; once it ends, the next request
// makes a new one.
func TestClientAgentOnePerKey(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		stores := []*Store{open(t, dir), open(t, dir)} // two hosts
		ctx := context.Background()
		want := Agent{RoleID: RootRoleID, Credential: "token/a/1", ClientKey: "mcp/k"}
		var mu sync.Mutex
		ids, made := map[string]bool{}, 0
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				a, created, err := stores[i%2].ClientAgent(ctx, want)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				ids[a.ID] = true
				if created {
					made++
				}
			})
		}
		wg.Wait()
		if len(ids) != 1 || made != 1 {
			t.Fatalf("16 requests of one key on two hosts: agents %v, %d made; want one, made once", ids, made)
		}
		other := want
		other.Credential = "token/b/2"
		if a, _, err := stores[1].ClientAgent(ctx, other); err != nil || ids[a.ID] {
			t.Fatalf("another credential's key: %s, %v; want another agent", a.ID, err)
		}
		var first string
		for id := range ids {
			first = id
		}
		if _, err := stores[0].TerminateAgent(ctx, first, "gone"); err != nil {
			t.Fatal(err)
		}
		if a, created, err := stores[1].ClientAgent(ctx, want); err != nil || !created || a.ID == first || a.ClientKey != "mcp/k" {
			t.Fatalf("the key after its agent ended: %+v, made %v, %v; want a new agent", a, created, err)
		}
		if _, _, err := stores[0].ClientAgent(ctx, Agent{RoleID: RootRoleID}); !errors.Is(err, ErrInvalid) {
			t.Errorf("no client key: %v, want ErrInvalid", err)
		}
	})
}

// TestClientAgentProperty: whatever the order of requests and ends, a
// role, credential and key have at most one agent not final, which every
// request finds until it ends.
func TestClientAgentProperty(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		cred := fmt.Sprintf("token/p/%d", runs) // a credential of its own each run
		live := map[string]string{}             // key → the agent requests must find
		for range rapid.IntRange(1, 30).Draw(rt, "steps") {
			key := rapid.SampledFrom([]string{"mcp/", "mcp/a", "mcp/b"}).Draw(rt, "key")
			if id, ok := live[key]; ok && rapid.Bool().Draw(rt, "end") {
				if _, err := s.TerminateAgent(ctx, id, "end"); err != nil {
					rt.Fatal(err)
				}
				delete(live, key)
				continue
			}
			a, created, err := s.ClientAgent(ctx, Agent{RoleID: RootRoleID, Credential: cred, ClientKey: key})
			if err != nil {
				rt.Fatal(err)
			}
			if id, ok := live[key]; ok && (created || a.ID != id) || !ok && !created {
				rt.Fatalf("key %s: agent %s (made %v), want %q", key, a.ID, created, id)
			}
			live[key] = a.ID
		}
		var n int
		if err := s.db.queryRow(ctx, `SELECT count(*) FROM agents WHERE credential = ? AND status NOT IN ('failed', 'terminated')`, cred).Scan(&n); err != nil || n != len(live) {
			rt.Fatalf("%d agents not final, want %d (%v)", n, len(live), err)
		}
	})
}

// TestClientAgentIdle: an agent some host used since the cutoff stays when
// another host ends it idle; one no host used ends, and the sweep ends the
// idle client agents only.
func TestClientAgentIdle(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		a, _, err := s.ClientAgent(ctx, Agent{RoleID: RootRoleID, Credential: "c", ClientKey: "mcp/a"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.UsedAgent(ctx, a.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if ended, err := s.EndIdleAgent(ctx, a.ID, time.Now().Add(-time.Minute), "idle"); err != nil || ended {
			t.Fatalf("an agent used now, ended idle for a minute: %v, %v; want it kept", ended, err)
		}
		if ended, err := s.EndIdleAgent(ctx, a.ID, time.Now().Add(time.Minute), "idle"); err != nil || !ended {
			t.Fatalf("an agent unused since the cutoff: %v, %v; want it ended", ended, err)
		}
		b, _, _ := s.ClientAgent(ctx, Agent{RoleID: RootRoleID, Credential: "c", ClientKey: "mcp/b"})
		plain, _ := s.CreateAgent(ctx, Agent{RoleID: RootRoleID})
		ids, err := s.EndIdleClientAgents(ctx, time.Now().Add(time.Minute), "swept")
		if err != nil || len(ids) != 1 || ids[0] != b.ID {
			t.Fatalf("the sweep ended %v (%v), want %s alone", ids, err, b.ID)
		}
		if got, _ := s.Agent(ctx, plain.ID); got.Final() {
			t.Error("the sweep ended an agent no client named")
		}
	})
}

// TestClientTasksAndRounds: a task's end is taken once (a cancel through
// another host wins over the running host's late end); the tasks a
// credential keeps are bounded; a round is answered once, and a host's
// rounds are found by status; a run is alive until its renewal passes or
// it ends.
func TestClientTasksAndRounds(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		at := time.Now()
		for i := range 5 {
			task := ClientTask{ID: fmt.Sprintf("task_%d", i), AgentID: "agent_1", Credential: "c", RunID: "run_1", Status: TaskWorking,
				CreatedAt: at.Add(time.Duration(i) * time.Second), UpdatedAt: at}
			if err := s.PutTask(ctx, task, time.Hour, 3); err != nil {
				t.Fatal(err)
			}
			if i < 4 {
				if _, err := s.EndTask(ctx, task.ID, TaskCompleted, "", `{"content":[]}`); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := s.Task(ctx, "task_0"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the oldest of 4 ended tasks, 3 kept: %v, want it forgotten", err)
		}
		if got, err := s.Task(ctx, "task_1"); err != nil || got.Status != TaskCompleted || got.Result != `{"content":[]}` {
			t.Errorf("task_1: %+v, %v", got, err)
		}
		if got, err := s.EndTask(ctx, "task_4", TaskCancelled, "cancelled by the client", ""); err != nil || got.Status != TaskCancelled {
			t.Fatalf("cancel: %+v, %v", got, err)
		}
		if got, _ := s.EndTask(ctx, "task_4", TaskCompleted, "", "{}"); got.Status != TaskCancelled {
			t.Errorf("a late end after the cancel: %+v, want it cancelled still", got)
		}
		if ended, err := s.EndedTasks(ctx, []string{"task_4", "task_9"}); err != nil || len(ended) != 1 || ended["task_4"].Status != TaskCancelled {
			t.Errorf("ended tasks: %v, %v", ended, err)
		}

		if err := s.PutRound(ctx, ClientRound{State: "s1", AgentID: "agent_1", Method: "tools/call", RunID: "run_1", Expires: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		var wins int
		for range 2 {
			if ok, err := s.MoveRound(ctx, "s1", RoundAnswered, `{"a":1}`, "", RoundAsking); err != nil {
				t.Fatal(err)
			} else if ok {
				wins++
			}
		}
		if rounds, err := s.RunRounds(ctx, "run_1", RoundAnswered); wins != 1 || err != nil || len(rounds) != 1 || rounds[0].Answers != `{"a":1}` {
			t.Errorf("two answers: %d taken; the run's answered rounds %+v (%v)", wins, rounds, err)
		}
		if ok, _ := s.MoveRound(ctx, "s1", RoundDone, "", `{"result":{}}`, RoundAnswered); !ok {
			t.Error("the reply was not taken")
		}
		if r, err := s.Round(ctx, "s1"); err != nil || r.Status != RoundDone || r.Answers != `{"a":1}` || r.Reply != `{"result":{}}` {
			t.Errorf("the round: %+v, %v", r, err)
		}

		run, err := s.BeginRun(ctx, "host_1", 1, "")
		if err != nil {
			t.Fatal(err)
		}
		check := func(want bool, when string) {
			t.Helper()
			if alive, host, err := s.RunAlive(ctx, run.ID); err != nil || alive != want || host != "host_1" {
				t.Errorf("%s: alive %v of %q (%v), want %v", when, alive, host, err, want)
			}
		}
		check(false, "never renewed")
		if err := s.RenewRun(ctx, run.ID, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		check(true, "renewed")
		if err := s.RenewRun(ctx, run.ID, time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		check(false, "past its renewal")
		_ = s.RenewRun(ctx, run.ID, time.Now().Add(time.Hour))
		if err := s.EndRun(ctx, run.ID); err != nil {
			t.Fatal(err)
		}
		check(false, "ended")
	})
}
