package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// listOrder is the order ListAgents promises: agents not final first, newest
// first, then the final ones, the most recently ended first.
func listOrder(a, b Agent) int {
	if a.Final() != b.Final() {
		if a.Final() {
			return 1
		}
		return -1
	}
	at, bt := a.CreatedAt, b.CreatedAt
	if a.Final() {
		at, bt = a.UpdatedAt, b.UpdatedAt
	}
	return cmp.Or(bt.Compare(at), cmp.Compare(b.ID, a.ID))
}

// agentIDs returns the ids of agents.
func agentIDs(agents []Agent) []string {
	out := make([]string, len(agents))
	for i, a := range agents {
		out[i] = a.ID
	}
	return out
}

// TestListAgentsPages: pages of any size, followed by their cursors, list
// every agent once, the active, running and waiting ones before the
// failed and terminated ones, each part newest first; a cursor that
// ListAgents did not hand out is refused.
func TestListAgentsPages(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		statuses := []string{StatusActive, StatusTerminated, StatusRunning, StatusFailed, StatusWaiting, StatusTerminated, StatusActive}
		for i := range 24 {
			a, err := s.CreateAgent(ctx, Agent{RoleID: RootRoleID, Kind: AgentRuntime, Status: StatusWaiting})
			if err != nil {
				t.Fatal(err)
			}
			switch st := statuses[i%len(statuses)]; st {
			case StatusTerminated:
				_, err = s.TerminateAgent(ctx, a.ID, "test")
			default:
				a.Status = st
				_, err = s.SaveAgent(ctx, a, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(all, listOrder)
		want := agentIDs(all)
		rapid.Check(t, func(rt *rapid.T) {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > len(want) {
					rt.Fatalf("more than %d pages", len(want))
				}
				limit := rapid.IntRange(1, len(want)+2).Draw(rt, "limit")
				page, next, err := s.ListAgents(ctx, cursor, limit)
				if err != nil {
					rt.Fatal(err)
				}
				if len(page) > limit || (next != "" && len(page) != limit) {
					rt.Fatalf("a page of limit %d holds %d agents, next %q", limit, len(page), next)
				}
				got = append(got, agentIDs(page)...)
				if cursor = next; cursor == "" {
					break
				}
			}
			if !slices.Equal(got, want) {
				rt.Fatalf("the pages list\n%v\nwant\n%v", got, want)
			}
		})
		for _, bad := range []string{"nope", "bGl2ZQ", "bWlkZGxlfHh8eQ"} { // not base64 of three parts; "live"; "middle|x|y"
			if _, _, err := s.ListAgents(ctx, bad, 10); !errors.Is(err, ErrInvalid) {
				t.Errorf("cursor %q: %v, want ErrInvalid", bad, err)
			}
		}
	})
}

// TestRemoveEndedAgents: the agents final before the cutoff go, with their
// conversation and mailbox; those final after it stay, and an agent not
// final stays whatever its age, the root agent among them.
func TestRemoveEndedAgents(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		spawn := func(status string) Agent {
			t.Helper()
			a, err := s.CreateAgent(ctx, Agent{RoleID: RootRoleID, Kind: AgentRuntime, Status: status})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.AppendMessages(ctx, a.ID, []AgentMessage{{Role: "user", Content: "hi"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Send(ctx, Mail{To: a.ID, Body: "hello"}); err != nil {
				t.Fatal(err)
			}
			return a
		}
		var old []string
		for range idsBatch + 3 { // more than one statement's worth
			a, err := s.CreateAgent(ctx, Agent{RoleID: RootRoleID})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.TerminateAgent(ctx, a.ID, "the MCP session ended"); err != nil {
				t.Fatal(err)
			}
			old = append(old, a.ID)
		}
		failed := spawn(StatusWaiting)
		failed.Status, failed.Error = StatusFailed, "model failed"
		if _, err := s.SaveAgent(ctx, failed, nil); err != nil {
			t.Fatal(err)
		}
		old = append(old, failed.ID)
		running, waiting, active := spawn(StatusRunning), spawn(StatusWaiting), spawn(StatusActive)
		cutoff := time.Now()
		late := spawn(StatusWaiting)
		if _, err := s.TerminateAgent(ctx, late.ID, "test"); err != nil {
			t.Fatal(err)
		}

		removed, err := s.RemoveEndedAgents(ctx, cutoff)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(removed)
		slices.Sort(old)
		if !slices.Equal(removed, old) {
			t.Fatalf("removed %d agents, want the %d final before the cutoff", len(removed), len(old))
		}
		for _, id := range []string{failed.ID, old[0]} {
			if _, err := s.Agent(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("agent %s after its removal: %v", id, err)
			}
		}
		if msgs, err := s.Messages(ctx, failed.ID); err != nil || len(msgs) != 0 {
			t.Errorf("the removed agent's conversation: %v %v", msgs, err)
		}
		if mail, err := s.Mailbox(ctx, failed.ID); err != nil || len(mail) != 0 {
			t.Errorf("the removed agent's mailbox: %v %v", mail, err)
		}
		left, err := s.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := agentIDs(left), []string{RootAgentID, running.ID, waiting.ID, active.ID, late.ID}; !slices.Equal(got, want) {
			t.Errorf("left %v, want %v", got, want)
		}
		if removed, err := s.RemoveEndedAgents(ctx, time.Now().Add(time.Hour)); err != nil || !slices.Equal(removed, []string{late.ID}) {
			t.Errorf("a cutoff after every end removes %v (%v), want only %s: never an agent not final", removed, err, late.ID)
		}
	})
}
