package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// statsBase is the start of the windows the call stats tests count.
var statsBase = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// ended is a call's terminal event at t: ok (tool_call.completed) or failed
// with code, its latency, and an approval decision when approved.
func ended(t time.Time, role, tool, group, code string, latency float64, approved bool) Event {
	e := Event{Time: t, Type: EventCallCompleted, Role: role, Tool: tool, Group: group, Payload: map[string]any{"latency_ms": latency}}
	if code != "" {
		e.Type = EventCallFailed
		e.Payload["code"] = code
	}
	if approved {
		e.Payload["approval"] = map[string]any{"decision": "approve", "by": "admin"}
	}
	return e
}

// TestCallStats: the calls whose terminal events fall in the window are
// counted by bucket, outcome, role and tool, on both engines; started
// events, and calls before or after the window, are not.
func TestCallStats(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		at := func(d time.Duration) time.Time { return statsBase.Add(d) }
		events := []Event{
			ended(at(-30*time.Second), "a", "echo", "g", "", 1, false), // before the window
			{Time: at(5 * time.Second), Type: EventCallStarted, Role: "a", Tool: "echo", Group: "g", Payload: map[string]any{}},
		}
		for i := 1; i <= 100; i++ { // ok, 1 to 100 ms, in the first minute
			events = append(events, ended(at(time.Duration(i)*100*time.Millisecond), "a", "echo", "g", "", float64(i), false))
		}
		events = append(events,
			ended(at(65*time.Second), "b", "echo", "g", "tool_exec", 7, false),                    // failed
			ended(at(2*time.Minute), "b", "", "", "policy", 0.01, false),                          // denied by a rule
			ended(at(2*time.Minute+time.Second), "b", "nope", "", "tool_not_available", 0, false), // outside the role
			ended(at(3*time.Minute), "", "echo", "g", "rate_limited", 0.02, false),                // rate-limited, no role
			ended(at(4*time.Minute), "a", "slow", "h", "", 5000, true),                            // approved, then ok
			ended(at(4*time.Minute+30*time.Second), "a", "slow", "h", "approval_denied", 9000, false),
			ended(at(10*time.Minute), "a", "echo", "g", "", 1, false), // at Until: after the window
		)
		writeEvents(t, s, events)

		st, err := s.CallStats(ctx, CallStatsQuery{Since: statsBase, Until: at(10 * time.Minute), Bucket: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		want := OutcomeCounts{OK: 100, Failed: 1, Denied: 2, RateLimited: 1, Approval: 2}
		if st.Calls != 106 || st.Outcomes != want || st.Partial {
			t.Fatalf("calls %d, outcomes %+v, partial %v; want 106, %+v", st.Calls, st.Outcomes, st.Partial, want)
		}
		if len(st.Buckets) != 10 || !st.Buckets[0].Start.Equal(statsBase) || !st.Buckets[9].Start.Equal(at(9*time.Minute)) {
			t.Fatalf("buckets %d, from %v to %v", len(st.Buckets), st.Buckets[0].Start, st.Buckets[len(st.Buckets)-1].Start)
		}
		for i, wantB := range map[int]OutcomeCounts{0: {OK: 100}, 1: {Failed: 1}, 2: {Denied: 2}, 3: {RateLimited: 1}, 4: {Approval: 2}, 5: {}} {
			if got := st.Buckets[i].Outcomes; got != wantB {
				t.Errorf("bucket %d: %+v, want %+v", i, got, wantB)
			}
		}
		if got := st.Buckets[2].Roles; len(got) != 1 || got["b"] != 2 {
			t.Errorf("bucket 2's roles = %v", got)
		}
		if got := st.Buckets[3].Roles; len(got) != 1 || got[""] != 1 {
			t.Errorf("bucket 3's roles = %v (the operator's call is role \"\")", got)
		}
		roles := []string{}
		for _, r := range st.Roles {
			roles = append(roles, fmt.Sprintf("%s:%d", r.Role, r.Calls))
		}
		if !slices.Equal(roles, []string{"a:102", "b:3", ":1"}) {
			t.Errorf("roles = %v", roles)
		}

		tools := map[string]ToolCalls{}
		for _, tc := range st.Tools {
			tools[tc.Tool+"/"+tc.Group] = tc
		}
		echo := tools["echo/g"]
		if echo.Calls != 102 || echo.Timed != 101 || echo.Outcomes != (OutcomeCounts{OK: 100, Failed: 1, RateLimited: 1}) || echo.Max != 100 {
			t.Errorf("echo = %+v", echo)
		}
		// Nearest rank over 1..100 and 7: p50 is 50, p95 95, p99 99.
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"p50", echo.P50, 50}, {"p95", echo.P95, 95}, {"p99", echo.P99, 99}} {
			if math.Abs(c.got-c.want)/c.want > 0.043 {
				t.Errorf("echo %s = %v, want %v within 4.3%%", c.name, c.got, c.want)
			}
		}
		if none := tools["/"]; none.Calls != 2 || none.Outcomes.Denied != 2 || none.Timed != 0 || none.P99 != 0 {
			t.Errorf("the calls that reached no group = %+v", none)
		}
		if slow := tools["slow/h"]; slow.Calls != 2 || slow.Outcomes.Approval != 2 || slow.Timed != 0 {
			t.Errorf("slow = %+v (calls that waited for a person are not timed)", slow)
		}
		if st.Tools[0].Tool != "echo" {
			t.Errorf("tools are not ordered by calls: %+v", st.Tools)
		}

		// Ten-minute buckets: one bucket holds them all.
		st, err = s.CallStats(ctx, CallStatsQuery{Since: statsBase, Until: at(20 * time.Minute), Bucket: 10 * time.Minute})
		if err != nil || st.Calls != 107 || len(st.Buckets) != 2 || st.Buckets[0].Outcomes.Total() != 106 || st.Buckets[1].Outcomes.Total() != 1 {
			t.Fatalf("10m buckets: %+v, %v", st.Buckets, err)
		}

		// More events than the cap: the latest are counted, and the answer
		// says from when.
		st, err = s.CallStats(ctx, CallStatsQuery{Since: statsBase, Until: at(10 * time.Minute), Bucket: time.Minute, maxEvents: 5})
		if from := at(2*time.Minute + time.Second); err != nil || !st.Partial || !st.From.Equal(from) || st.Calls != 4 {
			t.Fatalf("capped: partial %v from %v, %d calls, %v; want from %v, 4 calls", st.Partial, st.From, st.Calls, err, from)
		}

		// A window with no call: every bucket, empty.
		st, err = s.CallStats(ctx, CallStatsQuery{Since: at(time.Hour), Until: at(2 * time.Hour), Bucket: time.Minute})
		if err != nil || st.Calls != 0 || len(st.Buckets) != 60 || len(st.Tools) != 0 || len(st.Roles) != 0 {
			t.Fatalf("an empty window: %d calls, %d buckets, %v", st.Calls, len(st.Buckets), err)
		}
	})
}

// TestCallStatsRefused: a window or bucket the store does not count is
// refused with ErrInvalid, naming what is wrong.
func TestCallStatsRefused(t *testing.T) {
	s := open(t, t.TempDir())
	for _, c := range []struct {
		name string
		q    CallStatsQuery
		says string
	}{
		{"a 5-minute bucket", CallStatsQuery{Since: statsBase, Until: statsBase.Add(time.Hour), Bucket: 5 * time.Minute}, "bucket 5m0s"},
		{"an empty window", CallStatsQuery{Since: statsBase, Until: statsBase, Bucket: time.Minute}, "a window of 0s"},
		{"a window too long", CallStatsQuery{Since: statsBase, Until: statsBase.Add(26 * time.Hour), Bucket: time.Hour}, "at most 25h0m0s"},
		{"bounds off the bucket", CallStatsQuery{Since: statsBase.Add(time.Second), Until: statsBase.Add(time.Hour), Bucket: time.Minute}, "whole multiples of the bucket (1m0s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.CallStats(context.Background(), c.q)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err = %v, want ErrInvalid saying %q", err, c.says)
			}
		})
	}
}

// TestCallStatsSums: whatever the calls, the buckets' counts (by outcome
// and by role), the roles' and the tools' each add up to the number of
// calls that ended in the window; on both engines.
func TestCallStatsSums(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		run := 0
		rapid.Check(t, func(rt *rapid.T) {
			// Each run has a window of its own (at most 2h, its events at
			// most 3 minutes either side), later than the last run's
			// events, so that the runs share the store without meeting.
			since := statsBase.Add(time.Duration(run) * 3 * time.Hour)
			run++
			bucket := rapid.SampledFrom([]time.Duration{time.Minute, 10 * time.Minute}).Draw(rt, "bucket")
			span := bucket * time.Duration(rapid.IntRange(1, 12).Draw(rt, "buckets"))
			offsets := rapid.SliceOf(rapid.Int64Range(int64(-3*time.Minute), int64(span+3*time.Minute))).Draw(rt, "offsets")
			slices.Sort(offsets)
			var events []Event
			want := 0
			for i, off := range offsets {
				at := since.Add(time.Duration(off))
				if rapid.IntRange(0, 5).Draw(rt, fmt.Sprintf("started%d", i)) == 0 {
					events = append(events, Event{Time: at, Type: EventCallStarted, Tool: "t"})
					continue
				}
				code := rapid.SampledFrom([]string{"", "", "tool_exec", "policy", "rate_limited", "approval_denied", "timeout"}).Draw(rt, fmt.Sprintf("code%d", i))
				role := rapid.SampledFrom([]string{"", "a", "b"}).Draw(rt, fmt.Sprintf("role%d", i))
				tool := rapid.SampledFrom([]string{"t1", "t2"}).Draw(rt, fmt.Sprintf("tool%d", i))
				events = append(events, ended(at, role, tool, "g", code, rapid.Float64Range(0, 10000).Draw(rt, fmt.Sprintf("latency%d", i)), code == "" && i%3 == 0))
				if off >= 0 && off < int64(span) {
					want++
				}
			}
			w := s.NewEventWriter(nil)
			for _, e := range events {
				w.Emit(e)
			}
			if err := w.Close(); err != nil {
				rt.Fatal(err)
			}
			st, err := s.CallStats(ctx, CallStatsQuery{Since: since, Until: since.Add(span), Bucket: bucket})
			if err != nil {
				rt.Fatal(err)
			}
			var byOutcome, byRole, roles, tools int64
			for _, b := range st.Buckets {
				byOutcome += b.Outcomes.Total()
				for _, n := range b.Roles {
					byRole += n
				}
			}
			for _, r := range st.Roles {
				roles += r.Calls
			}
			for _, tc := range st.Tools {
				tools += tc.Calls
			}
			if st.Calls != int64(want) || byOutcome != st.Calls || byRole != st.Calls || roles != st.Calls || tools != st.Calls || st.Outcomes.Total() != st.Calls {
				rt.Fatalf("want %d calls: counted %d, buckets by outcome %d, by role %d, roles %d, tools %d", want, st.Calls, byOutcome, byRole, roles, tools)
			}
			if len(st.Buckets) != int(span/bucket) {
				rt.Fatalf("%d buckets for %s by %s", len(st.Buckets), span, bucket)
			}
		})
	})
}
