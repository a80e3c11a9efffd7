package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// historyEvents are the events the history tests query, with ids 1 to 14
// in a new store: calls of two roles and credentials, each outcome, a
// child agent spawned by c1 calling under its turn.
func historyEvents(base time.Time) []Event {
	sec := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	cred := func(c string, more ...any) map[string]any {
		p := map[string]any{"credential": c}
		for i := 0; i+1 < len(more); i += 2 {
			p[more[i].(string)] = more[i+1]
		}
		return p
	}
	return []Event{
		{Time: sec(0), Type: EventCallStarted, CallID: "c1", AgentID: "a1", Role: "dev", Tool: "spawn", Payload: cred("t-dev", "arguments", `{"task":"x"}`)},                                                            // 1
		{Time: sec(1), Type: "agent.spawned", AgentID: "a2", Role: "dev", ParentID: "c1", Payload: cred("t-dev")},                                                                                                       // 2
		{Time: sec(2), Type: EventCallCompleted, CallID: "c1", AgentID: "a1", Role: "dev", Tool: "spawn", Payload: cred("t-dev", "latency_ms", 3.5)},                                                                    // 3
		{Time: sec(3), Type: EventCallStarted, CallID: "c2", AgentID: "a2", Role: "dev", Tool: "run", ParentID: "turn1", Payload: cred("t-dev", "arguments", `{"cmd":"date"}`)},                                         // 4
		{Time: sec(4), Type: EventCallFailed, CallID: "c2", AgentID: "a2", Role: "dev", Tool: "run", ParentID: "turn1", Payload: cred("t-dev", "code", "tool_exec")},                                                    // 5
		{Time: sec(5), Type: EventGroupRegistered, Group: "workspace"},                                                                                                                                                  // 6
		{Time: sec(6), Type: EventCallFailed, CallID: "c3", AgentID: "b1", Role: "ops", Tool: "run", Payload: cred("t-ops", "code", "policy", "rule", "no_rm", "rule_action", "deny")},                                  // 7
		{Time: sec(7), Type: EventCallFailed, CallID: "c4", AgentID: "b1", Role: "ops", Tool: "run", Payload: cred("t-ops", "code", "rate_limited")},                                                                    // 8
		{Time: sec(8), Type: EventCallStarted, CallID: "c5", AgentID: "b1", Role: "ops", Tool: "run", Payload: cred("t-ops", "arguments", `{"cmd":"re`, "arguments_truncated", true)},                                   // 9
		{Time: sec(9), Type: EventCallCompleted, CallID: "c5", AgentID: "b1", Role: "ops", Tool: "run", Payload: cred("t-ops", "approval", map[string]any{"decision": "approve", "by": "admin"})},                       // 10
		{Time: sec(10), Type: EventCallFailed, CallID: "c6", AgentID: "b1", Role: "ops", Tool: "run", Payload: cred("t-ops", "code", "approval_denied", "approval", map[string]any{"decision": "deny", "by": "admin"})}, // 11
		{Time: sec(11), Type: EventCallFailed, CallID: "c7", AgentID: "b1", Role: "ops", Tool: "grep", Payload: cred("t-ops", "code", "tool_not_available")},                                                            // 12
		{Time: sec(12), Type: EventCallFailed, CallID: "c8", AgentID: "b1", Role: "ops", Tool: "run", Payload: cred("t-ops", "code", "timeout", "approval", map[string]any{"decision": "modify", "by": "admin"})},       // 13
		{Time: sec(13), Type: "console.print", AgentID: "b1", Role: "ops", ParentID: "c8", Payload: map[string]any{"text": "hi"}},                                                                                       // 14
	}
}

// TestEventsHistoryFilters: each filter of the audit trail (role,
// credential, parent, outcome, a failure's code, until, before) keeps
// exactly its events, on both engines.
func TestEventsHistoryFilters(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		writeEvents(t, s, historyEvents(base))
		for _, tc := range []struct {
			name   string
			filter EventFilter
			want   []int64
		}{
			{"role", EventFilter{Role: "dev"}, []int64{1, 2, 3, 4, 5}},
			{"credential", EventFilter{Credential: "t-ops"}, []int64{7, 8, 9, 10, 11, 12, 13}},
			{"credential of another role", EventFilter{Credential: "t-ops", Role: "dev"}, []int64{}},
			{"parent", EventFilter{Parent: "c1"}, []int64{2}},
			{"outcome ok", EventFilter{Outcome: OutcomeOK}, []int64{3, 10}},
			{"outcome failed", EventFilter{Outcome: OutcomeFailed}, []int64{5, 7, 8, 11, 12, 13}},
			{"outcome failed by code", EventFilter{Outcome: OutcomeFailed, Code: "timeout"}, []int64{13}},
			{"outcome denied", EventFilter{Outcome: OutcomeDenied}, []int64{7, 11, 12}},
			{"outcome approved", EventFilter{Outcome: OutcomeApproved}, []int64{10, 13}},
			{"outcome rate limited", EventFilter{Outcome: OutcomeRateLimited}, []int64{8}},
			{"outcome and role", EventFilter{Outcome: OutcomeFailed, Role: "dev"}, []int64{5}},
			{"until", EventFilter{Until: base.Add(3 * time.Second)}, []int64{1, 2, 3}},
			{"since and until", EventFilter{Since: base.Add(3 * time.Second), Until: base.Add(5 * time.Second)}, []int64{4, 5}},
			{"before", EventFilter{BeforeID: 4}, []int64{1, 2, 3}},
			{"before keeps the most recent", EventFilter{BeforeID: 10, Limit: 2}, []int64{8, 9}},
			{"after and before", EventFilter{AfterID: 4, BeforeID: 8}, []int64{5, 6, 7}},
			{"tool, role and before", EventFilter{Tool: "run", Role: "ops", BeforeID: 13, Limit: 2}, []int64{10, 11}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := s.Events(context.Background(), tc.filter)
				if err != nil || !slices.Equal(ids(got), tc.want) {
					t.Fatalf("ids = %v, %v; want %v", ids(got), err, tc.want)
				}
			})
		}
		for _, f := range []EventFilter{{Outcome: "fine"}, {Outcome: OutcomeOK, Code: "timeout"}, {Code: "timeout"}} {
			if _, err := s.Events(context.Background(), f); err == nil {
				t.Errorf("%+v: no error", f)
			}
		}
	})
}

// TestEventsPageBack: paging back with BeforeID from the newest page
// visits every matching event once, newest page first, however the page
// size divides them; EachEvent reads them all forward, up to the newest event
// written when it started.
func TestEventsPageBack(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t, t.TempDir())
		var emitted []Event
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		for i := range 250 {
			emitted = append(emitted, Event{Time: base.Add(time.Duration(i) * time.Millisecond), Type: EventCallStarted,
				CallID: fmt.Sprintf("c%d", i), Role: []string{"dev", "ops", "qa"}[i%3]})
		}
		writeEvents(t, s, emitted)
		for _, limit := range []int{1, 7, 50, 83, 1000} {
			var seen []int64
			f := EventFilter{Role: "ops", Limit: limit}
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatalf("limit %d: more than 100 pages", limit)
				}
				page, err := s.Events(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				seen = append(ids(page), seen...)
				f.BeforeID = page[0].ID
			}
			var want []int64
			for id := int64(2); id <= 250; id += 3 {
				want = append(want, id)
			}
			if !slices.Equal(seen, want) {
				t.Fatalf("limit %d: paged back through %v, want %v", limit, seen, want)
			}
		}
		var all []int64
		pages := 0
		err := s.EachEvent(ctx, EventFilter{Role: "qa", Limit: 10}, func(events []Event) error {
			pages++
			all = append(all, ids(events)...)
			if pages == 1 { // written after the export started: not in it
				writeMore := s.NewEventWriter(nil)
				writeMore.Emit(Event{Type: EventCallStarted, Role: "qa"})
				if err := writeMore.Close(); err != nil {
					t.Fatal(err)
				}
			}
			return nil
		})
		if err != nil || len(all) != 83 || all[0] != 3 || all[82] != 249 || pages != 9 {
			t.Fatalf("EachEvent: %d events (%v…) in %d pages, %v; want 83 from 3 to 249 in 9", len(all), all[:min(3, len(all))], pages, err)
		}
		stop := errors.New("stop")
		if err := s.EachEvent(ctx, EventFilter{}, func([]Event) error { return stop }); err != stop {
			t.Fatalf("EachEvent returned %v, want emit's error", err)
		}
	})
}

// TestCallStory: a call's story holds its caller, arguments (decoded, or
// text when cut), verdicts, approval and approver, duration, parent call
// and children, from its events alone; an unknown id is not found.
func TestCallStory(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		s := open(t, t.TempDir())
		writeEvents(t, s, historyEvents(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))

		c1, err := s.CallStory(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if c1.Outcome != OutcomeOK || c1.Tool != "spawn" || c1.Role != "dev" || c1.Credential != "t-dev" || c1.LatencyMs == nil || *c1.LatencyMs != 3.5 ||
			fmt.Sprint(c1.Arguments) != "map[task:x]" || len(c1.Events) != 2 || len(c1.Children) != 1 || c1.Children[0].AgentID != "a2" {
			t.Fatalf("c1's story = %+v", c1)
		}
		c2, err := s.CallStory(ctx, "c2")
		if err != nil || c2.Outcome != OutcomeFailed || c2.Code != "tool_exec" || c2.ParentID != "turn1" || c2.ParentCall != "c1" {
			t.Fatalf("c2's story = %+v, %v; want failed, under c1 (which spawned its agent)", c2, err)
		}
		c3, err := s.CallStory(ctx, "c3")
		if err != nil || c3.Rule != "no_rm" || c3.RuleAction != "deny" || c3.Started != nil {
			t.Fatalf("c3's story = %+v, %v", c3, err)
		}
		c5, err := s.CallStory(ctx, "c5")
		approval, _ := c5.Approval.(map[string]any)
		if err != nil || approval["by"] != "admin" || c5.Arguments != `{"cmd":"re` || !c5.ArgumentsTruncated {
			t.Fatalf("c5's story = %+v, %v", c5, err)
		}
		c8, err := s.CallStory(ctx, "c8")
		if err != nil || len(c8.Children) != 1 || c8.Children[0].Type != "console.print" {
			t.Fatalf("c8's story = %+v, %v", c8, err)
		}
		if _, err := s.CallStory(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an unknown call: %v", err)
		}
	})
}

// TestReadable: a payload's arguments stored as JSON text read back as
// JSON values; cut arguments stay text; the stored event is not changed.
func TestReadable(t *testing.T) {
	e := Event{Payload: map[string]any{"arguments": `{"command":"date","n":[1,2]}`, "code": "x"}}
	r := e.Readable()
	if fmt.Sprint(r.Payload["arguments"]) != "map[command:date n:[1 2]]" || r.Payload["code"] != "x" {
		t.Fatalf("readable payload = %v", r.Payload)
	}
	if _, ok := e.Payload["arguments"].(string); !ok {
		t.Fatal("Readable changed the event's own payload")
	}
	cut := Event{Payload: map[string]any{"arguments": `{"command":"da`}}
	if cut.Readable().Payload["arguments"] != `{"command":"da` {
		t.Fatal("cut arguments were not kept as text")
	}
}

// TestEventCredentialMigration: the events stored before migration 022
// are found by the credential their payload names, and by their approval.
func TestEventCredentialMigration(t *testing.T) {
	engineOptions(t, func(t *testing.T, o Options) {
		ctx := context.Background()
		dir := t.TempDir()
		old, err := openUpTo(ctx, dir, o, 21)
		if err != nil {
			t.Fatal(err)
		}
		for _, payload := range []string{`{"credential":"t-dev","arguments":"{}"}`, `{"approval":{"by":"admin","decision":"approve"},"credential":"t-ops"}`,
			`{"text":"nul \u0000","credential":"t-dev"}`, `{"approval":{"decision":"deny"}}`, `{}`} {
			if _, err := old.db.exec(ctx, `INSERT INTO events (ts, type, payload) VALUES (?, ?, ?)`, stamp(time.Now()), EventCallStarted, payload); err != nil {
				t.Fatal(err)
			}
		}
		old.Close()
		s := openWith(t, dir, o)
		got, err := s.Events(ctx, EventFilter{Credential: "t-dev"})
		want := []int64{1}
		if o.Driver != DriverPostgres {
			want = []int64{1, 3} // SQLite reads a payload holding \u0000 too
		}
		if err != nil || !slices.Equal(ids(got), want) {
			t.Fatalf("t-dev's events after the migration: %v, %v; want %v", ids(got), err, want)
		}
		if got, err := s.Events(ctx, EventFilter{Outcome: OutcomeApproved}); err != nil || !slices.Equal(ids(got), []int64{2}) {
			t.Fatalf("the approved calls after the migration: %v, %v; want [2]", ids(got), err)
		}
	})
}
