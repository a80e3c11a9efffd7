package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// [Store.CallStats] sorts each call into one outcome, by its terminal event
// (tool_call.completed or tool_call.failed), the first that fits:
// [OutcomeRateLimited]; [OutcomeDenied] by the role's policy (code policy or
// tool_not_available); [OutcomeApproval]; [OutcomeOK]; [OutcomeFailed] for
// anything else. So its outcomes partition the calls, where
// [EventFilter.Outcome]'s may overlap: a call its approver refused is
// denied to the filter and an approval here.
const (
	// OutcomeApproval is a call that waited for an approver's decision,
	// whatever that was and however the call then ended.
	OutcomeApproval = "approval"
)

// OutcomeCounts counts calls by outcome, one field for each of the
// Outcome constants.
type OutcomeCounts struct {
	OK          int64 `json:"ok"`          // OutcomeOK
	Failed      int64 `json:"failed"`      // OutcomeFailed
	Denied      int64 `json:"denied"`      // OutcomeDenied
	RateLimited int64 `json:"rateLimited"` // OutcomeRateLimited
	Approval    int64 `json:"approval"`    // OutcomeApproval
}

// add counts n calls of outcome.
func (c *OutcomeCounts) add(outcome string, n int64) {
	switch outcome {
	case OutcomeOK:
		c.OK += n
	case OutcomeDenied:
		c.Denied += n
	case OutcomeRateLimited:
		c.RateLimited += n
	case OutcomeApproval:
		c.Approval += n
	default:
		c.Failed += n
	}
}

// Total is the number of calls counted.
func (c OutcomeCounts) Total() int64 {
	return c.OK + c.Failed + c.Denied + c.RateLimited + c.Approval
}

// CallStatsQuery says which calls [Store.CallStats] counts: those whose
// terminal event's time is in [Since, Until), in buckets of Bucket.
type CallStatsQuery struct {
	// Since and Until bound the window; both must be whole multiples of
	// Bucket (UTC), and the window at most [MaxStatsWindow].
	Since, Until time.Time
	// Bucket is the width of the buckets: [time.Minute], 10 minutes or
	// [time.Hour].
	Bucket time.Duration

	// maxEvents is the most events read (0: MaxStatsEvents), lowered by
	// the store's own tests.
	maxEvents int64
}

// MaxStatsWindow is the longest window [Store.CallStats] counts.
const MaxStatsWindow = 25 * time.Hour

// MaxStatsEvents bounds the events one [Store.CallStats] reads: when the
// window holds more, the latest MaxStatsEvents are counted and the answer
// says so (Partial).
const MaxStatsEvents = 1_000_000

// bucketPrefix is, for each bucket width, how many leading characters of
// an event's ts (tsLayout: "2006-01-02T15:04:05…") name its bucket.
var bucketPrefix = map[time.Duration]int{time.Minute: 16, 10 * time.Minute: 15, time.Hour: 13}

// CallStats are the calls of a window, counted in the database.
type CallStats struct {
	// Since, Until and Bucket are the query's window and buckets, in UTC.
	Since  time.Time     `json:"since"`
	Until  time.Time     `json:"until"`
	Bucket time.Duration `json:"-"`
	// Calls is the number of calls counted, and Outcomes the same by
	// outcome.
	Calls    int64         `json:"calls"`
	Outcomes OutcomeCounts `json:"outcomes"`
	// Buckets has one entry per bucket of the window, oldest first, empty
	// ones included.
	Buckets []CallBucket `json:"buckets"`
	// Roles are the calls by the caller's role ("" for none: the
	// operator), most calls first.
	Roles []RoleCalls `json:"roles"`
	// Tools are the calls by tool, most calls first; the calls that
	// reached no group (an unknown tool, one outside the role) are counted
	// under the tool "".
	Tools []ToolCalls `json:"tools"`
	// Partial says that the window held more than [MaxStatsEvents] events:
	// only the calls that ended from From on were counted.
	Partial bool `json:"partial,omitempty"`
	// From is when the first call counted ended, when Partial.
	From time.Time `json:"from,omitzero"`
}

// CallBucket is one bucket's calls.
type CallBucket struct {
	// Start is when the bucket begins; it ends a Bucket later.
	Start time.Time `json:"start"`
	// Outcomes are its calls by outcome, Roles by the caller's role.
	Outcomes OutcomeCounts    `json:"outcomes"`
	Roles    map[string]int64 `json:"roles"`
}

// RoleCalls are one role's calls in a window.
type RoleCalls struct {
	// Role is the role's name ("" for none), Calls its calls, Outcomes
	// the same by outcome.
	Role     string        `json:"role"`
	Calls    int64         `json:"calls"`
	Outcomes OutcomeCounts `json:"outcomes"`
}

// ToolCalls are one tool's calls in a window, with the latency of those
// that ran without waiting for a person (outcome ok or failed), in
// milliseconds: its percentiles are read from a histogram whose buckets
// are 1/12 of a natural log wide, so they are within 4.3% of the exact
// value (nearest rank), and never above Max, which is exact.
type ToolCalls struct {
	// Tool and Group name the tool ("" and "" for the calls that reached
	// no group); Calls are its calls, Outcomes the same by outcome.
	Tool     string        `json:"tool"`
	Group    string        `json:"group"`
	Calls    int64         `json:"calls"`
	Outcomes OutcomeCounts `json:"outcomes"`
	// Timed is the number of calls the latencies are of; P50, P95 and P99
	// are their percentiles and Max the largest, in milliseconds (all 0
	// when none was timed).
	Timed int64   `json:"timed"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// latencySteps is how many histogram buckets a factor of e spans.
const latencySteps = 12

// minLatency is the least latency (ms) the histogram tells apart.
const minLatency = 0.001

// idSlack is how far before the window the search for its first event
// starts: events are numbered as written, a little after their time.
const idSlack = 2 * time.Minute

// CallStats counts the calls of the window q names, in the database: by
// bucket, outcome and role, and by tool with their latencies. It reads the
// events between two ids, the first event from idSlack before the window
// and the newest (found by a binary search on the primary key, events being
// numbered in about the order of their time: no index on time is needed,
// which would cost every write), at most [MaxStatsEvents] of them.
func (s *Store) CallStats(ctx context.Context, q CallStatsQuery) (CallStats, error) {
	prefix, ok := bucketPrefix[q.Bucket]
	span := q.Until.Sub(q.Since)
	switch {
	case !ok:
		return CallStats{}, fmt.Errorf("store: call stats: bucket %s: %w: want 1m, 10m or 1h", q.Bucket, ErrInvalid)
	case span <= 0 || span > MaxStatsWindow:
		return CallStats{}, fmt.Errorf("store: call stats: a window of %s: %w: want more than 0 and at most %s", span, ErrInvalid, MaxStatsWindow)
	case !q.Since.Truncate(q.Bucket).Equal(q.Since) || !q.Until.Truncate(q.Bucket).Equal(q.Until):
		return CallStats{}, fmt.Errorf("store: call stats: the window's bounds must be whole multiples of the bucket (%s): %w", q.Bucket, ErrInvalid)
	}
	st := CallStats{Since: q.Since.UTC(), Until: q.Until.UTC(), Bucket: q.Bucket, Buckets: []CallBucket{}, Roles: []RoleCalls{}, Tools: []ToolCalls{}}
	index := map[string]int{}
	for t := st.Since; t.Before(st.Until); t = t.Add(q.Bucket) {
		index[stamp(t)[:prefix]] = len(st.Buckets)
		st.Buckets = append(st.Buckets, CallBucket{Start: t, Roles: map[string]int64{}})
	}
	low, high, err := s.eventIDs(ctx, q.Since.Add(-idSlack))
	if err != nil {
		return st, fmt.Errorf("store: call stats: %w", err)
	}
	most := cmp.Or(q.maxEvents, MaxStatsEvents)
	if high-low >= most {
		low = high - most + 1
		var from string
		if err := s.db.queryRow(ctx, `SELECT ts FROM events WHERE id >= ? ORDER BY id LIMIT 1`, low).Scan(&from); err != nil {
			return st, fmt.Errorf("store: call stats: %w", err)
		}
		if st.From = parseTime(from); st.From.After(st.Since) {
			st.Partial = true
		} else {
			st.From = time.Time{}
		}
	}
	args := []any{low, high, stamp(q.Since), stamp(q.Until)}
	calls := s.callsSQL()
	type count struct {
		bucket, role, outcome string
		n                     int64
	}
	counts, err := queryAll(ctx, s.db, "call stats", func(row scanner) (c count, err error) {
		err = row.Scan(&c.bucket, &c.role, &c.outcome, &c.n)
		return c, err
	}, `SELECT b, role, outcome, count(*) FROM (SELECT substr(ts, 1, `+strconv.Itoa(prefix)+`) AS b, role, outcome FROM (`+
		calls+`) c) k GROUP BY b, role, outcome`, args...)
	if err != nil {
		return st, err
	}
	roles := map[string]*RoleCalls{}
	for _, c := range counts {
		i, ok := index[c.bucket]
		if !ok {
			return st, fmt.Errorf("store: call stats: a bucket %q outside the window", c.bucket)
		}
		st.Buckets[i].Outcomes.add(c.outcome, c.n)
		st.Buckets[i].Roles[c.role] += c.n
		st.Outcomes.add(c.outcome, c.n)
		st.Calls += c.n
		if roles[c.role] == nil {
			roles[c.role] = &RoleCalls{Role: c.role}
		}
		roles[c.role].Calls += c.n
		roles[c.role].Outcomes.add(c.outcome, c.n)
	}
	for _, r := range roles {
		st.Roles = append(st.Roles, *r)
	}
	slices.SortFunc(st.Roles, func(a, b RoleCalls) int { return cmp.Or(cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Role, b.Role)) })
	st.Tools, err = s.toolCalls(ctx, calls, args)
	return st, err
}

// callsSQL selects the calls ended in a window, one row per terminal event:
// ts, role, tool, group_id, outcome (see the Outcome constants) and
// latency (ms), from the events with ids in [?, ?] and ts in [?, ?). The
// engines put the inner query's expressions in the outer one's place, so a
// JSON field is read only where the CASE reaches it: a completed call's
// code never is.
func (s *Store) callsSQL() string {
	e := s.eng
	return `SELECT ts, role, tool, group_id,
  CASE WHEN type = '` + EventCallCompleted + `' THEN CASE WHEN approval IS NULL THEN '` + OutcomeOK + `' ELSE '` + OutcomeApproval + `' END
    WHEN code = 'rate_limited' THEN '` + OutcomeRateLimited + `'
    WHEN code IN ('policy', 'tool_not_available') THEN '` + OutcomeDenied + `'
    WHEN approval IS NOT NULL OR code = 'approval_denied' THEN '` + OutcomeApproval + `'
    ELSE '` + OutcomeFailed + `' END AS outcome,
  CAST(latency AS DOUBLE PRECISION) AS latency
FROM (SELECT ts, type, role, tool, group_id, ` + e.jsonText("payload", "code") + ` AS code, ` +
		e.jsonText("payload", "approval") + ` AS approval, ` + e.jsonText("payload", "latency_ms") + ` AS latency
  FROM events WHERE id >= ? AND id <= ? AND ts >= ? AND ts < ? AND type IN ('` + EventCallCompleted + `', '` + EventCallFailed + `')) e`
}

// toolCalls counts the calls of calls (callsSQL, with its args) by tool,
// group and outcome, with a histogram of the latencies of those that ran
// (latencySteps buckets per factor of e) from which the percentiles are
// read.
func (s *Store) toolCalls(ctx context.Context, calls string, args []any) ([]ToolCalls, error) {
	type key struct{ tool, group string }
	tools := map[key]*ToolCalls{}
	hists := map[key]map[int]int64{}
	least := strconv.FormatFloat(minLatency, 'g', -1, 64)
	timed := `outcome IN ('` + OutcomeOK + `', '` + OutcomeFailed + `') AND latency IS NOT NULL`
	type count struct {
		key
		outcome string
		lb      sql.NullInt64
		n       int64
		most    sql.NullFloat64
	}
	counts, err := queryAll(ctx, s.db, "call stats by tool", func(row scanner) (c count, err error) {
		err = row.Scan(&c.tool, &c.group, &c.outcome, &c.lb, &c.n, &c.most)
		return c, err
	}, `SELECT tool, group_id, outcome, lb, count(*), max(latency) FROM (
  SELECT CASE WHEN group_id = '' THEN '' ELSE tool END AS tool, group_id, outcome,
    CASE WHEN `+timed+` THEN CAST(floor(ln(CASE WHEN latency < `+least+` THEN `+least+` ELSE latency END) * `+
		strconv.Itoa(latencySteps)+`) AS INTEGER) END AS lb,
    CASE WHEN `+timed+` THEN latency END AS latency
  FROM (`+calls+`) c) t GROUP BY tool, group_id, outcome, lb`, args...)
	if err != nil {
		return nil, err
	}
	for _, c := range counts {
		t := tools[c.key]
		if t == nil {
			t = &ToolCalls{Tool: c.tool, Group: c.group}
			tools[c.key], hists[c.key] = t, map[int]int64{}
		}
		t.Calls += c.n
		t.Outcomes.add(c.outcome, c.n)
		if c.lb.Valid {
			t.Timed += c.n
			hists[c.key][int(c.lb.Int64)] += c.n
			t.Max = max(t.Max, c.most.Float64)
		}
	}
	out := make([]ToolCalls, 0, len(tools))
	for k, t := range tools {
		t.P50, t.P95, t.P99 = percentile(hists[k], t.Timed, .5, t.Max), percentile(hists[k], t.Timed, .95, t.Max), percentile(hists[k], t.Timed, .99, t.Max)
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b ToolCalls) int {
		return cmp.Or(cmp.Compare(b.Calls, a.Calls), cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Group, b.Group))
	})
	return out, nil
}

// percentile reads the p-th percentile (nearest rank) of n latencies from
// their histogram: the geometric middle of the bucket holding it, at most
// most (the largest latency).
func percentile(hist map[int]int64, n int64, p, most float64) float64 {
	if n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(p*float64(n))), 1)
	buckets := make([]int, 0, len(hist))
	for b := range hist {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets)
	var seen int64
	for _, b := range buckets {
		if seen += hist[b]; seen >= rank {
			return min(math.Exp((float64(b)+.5)/latencySteps), most)
		}
	}
	return most
}

// eventIDs returns the ids between which the events from since on lie:
// the first event whose time is at or after since, found by a binary search
// on the primary key (events are numbered about in the order of their
// time), and the newest event. With no events, it returns 1, 0.
func (s *Store) eventIDs(ctx context.Context, since time.Time) (low, high int64, err error) {
	var first, last sql.NullInt64
	if err := s.db.queryRow(ctx, `SELECT min(id), max(id) FROM events`).Scan(&first, &last); err != nil {
		return 0, 0, err
	}
	if !last.Valid {
		return 1, 0, nil
	}
	target := stamp(since)
	lo, hi := first.Int64, last.Int64+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		var id int64
		var ts string
		err := s.db.queryRow(ctx, `SELECT id, ts FROM events WHERE id >= ? ORDER BY id LIMIT 1`, mid).Scan(&id, &ts)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			hi = mid
		case err != nil:
			return 0, 0, err
		case ts >= target:
			hi = mid
		default:
			lo = id + 1
		}
	}
	return lo, last.Int64, nil
}
