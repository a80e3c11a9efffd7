package host

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// takeLimits takes a token from the bucket of each of limits that counts the
// call's tool, all or none ([store.Store.TakeTokens]): the bucket of the
// call's credential (whatever agent, session or key it calls as: those are
// free to make, so they never reset a bucket), or the role's one bucket
// for a limit by role.
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
			b := store.Bucket{Role: c.req.Context.Role, Caller: c.req.Context.Credential, Target: l.Target, Calls: l.Calls, Per: l.Per}
			if l.By == rules.ByRole {
				b.Caller = ""
			}
			buckets = append(buckets, b)
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
		d := map[string]any{"limit": l.Target, "calls": l.Calls, "per": l.Per.String(), "by": cmp.Or(l.By, rules.ByCredential), "taken": ok}
		switch {
		case ok:
			d["tokens_left"] = t.Left
		case !t.Granted:
			d["retry_after_ms"] = ceilMs(t.RetryAfter).Milliseconds()
			refused = append(refused, fmt.Sprintf("%q (%d calls per %s, %s)", l.Target, l.Calls, l.Per, limitWhose(l, c.req.Context.Credential)))
			retry = max(retry, t.RetryAfter)
		}
		c.limits = append(c.limits, d)
	}
	if ok {
		return nil
	}
	return &toolhost.Error{Code: toolhost.CodeRateLimited, RetryAfter: retry, Message: fmt.Sprintf(
		"call of %s refused: the limit %s of role %s is spent; retry in %s",
		tool, strings.Join(refused, " and "), c.req.Context.Role, ceilMs(retry))}
}

// limitWhose names whose calls the limit l counts for a call of cred.
func limitWhose(l rules.Limit, cred string) string {
	switch {
	case l.By == rules.ByRole:
		return "shared by the role's callers"
	case cred == "":
		return "counted for the embedding program's calls"
	}
	return "counted for " + cred
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
