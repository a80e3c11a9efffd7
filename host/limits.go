package host

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// takeLimits takes a token, for the call's agent, from the bucket of each of
// limits that counts the call's tool, all or none ([store.Store.TakeTokens]):
// a call two limits count spends nothing when either refuses. A refusal is
// rate_limited, naming each limit that refused and saying when to retry
// ([toolhost.Error.RetryAfter]: when every one of them will have a token).
// Each limit's verdict goes into the call's terminal event (c.limits). The
// buckets live in the store, so that hosts sharing a PostgreSQL database
// share them; a store that cannot take fails the call (internal): a limit
// is not skipped.
func (c *call) takeLimits(ctx context.Context, limits []rules.Limit) (err error) {
	tool, group := c.tool.spec.Name, c.tool.group.Spec.ID
	var counted []rules.Limit
	var buckets []store.Bucket
	for _, l := range limits {
		if l.Counts(tool, group) {
			counted = append(counted, l)
			buckets = append(buckets, store.Bucket{Role: c.req.Context.Role, Agent: c.req.Context.AgentID, Target: l.Target, Calls: l.Calls, Per: l.Per})
		}
	}
	if len(buckets) == 0 {
		return nil
	}
	ctx, span := c.stage(ctx, "limits")
	defer func() { endStage(span, err) }()
	takes, ok, err := c.h.store.TakeTokens(ctx, buckets)
	if err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "call limits of role %s: %w", c.req.Context.Role, err)
	}
	var refused []string
	var retry time.Duration
	for i, t := range takes {
		l := counted[i]
		d := map[string]any{"limit": l.Target, "calls": l.Calls, "per": l.Per.String(), "taken": ok}
		switch {
		case ok:
			d["tokens_left"] = t.Left
		case !t.Granted:
			d["retry_after_ms"] = ceilMs(t.RetryAfter).Milliseconds()
			refused = append(refused, fmt.Sprintf("%q (%d calls per %s)", l.Target, l.Calls, l.Per))
			retry = max(retry, t.RetryAfter)
		}
		c.limits = append(c.limits, d)
	}
	if ok {
		return nil
	}
	who := "agent " + c.req.Context.AgentID
	if c.req.Context.AgentID == "" {
		who = "the callers without an agent"
	}
	return &toolhost.Error{Code: toolhost.CodeRateLimited, RetryAfter: retry, Message: fmt.Sprintf(
		"call of %s refused: %s spent the limit %s of role %s; retry in %s",
		tool, who, strings.Join(refused, " and "), c.req.Context.Role, ceilMs(retry))}
}

// ceilMs rounds d up to the millisecond: a caller who waits as long as it
// says is not early.
func ceilMs(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// markLimits puts the verdicts of the call's limits, if any counted it,
// into its terminal event's payload.
func (c *call) markLimits(payload map[string]any) {
	if len(c.limits) > 0 {
		payload["limits"] = c.limits
	}
}
