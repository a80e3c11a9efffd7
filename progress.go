package toolhost

import (
	"context"
	"sync"
	"time"
)

// Progress receives a long call's progress: how far it is (progress, of
// total when total is above zero) and a message. A caller that wants it
// (an MCP client that sent a progress token, the agent runtime) puts one in
// the call's context with [WithProgress]; a provider that can tell (a plugin's
// handler through [github.com/toolhost/toolhost/sdk.Request.Progress], an MCP server's
// notifications/progress) reports through [ProgressFrom].
type Progress func(progress, total float64, message string)

type progressKey struct{}

// WithProgress returns ctx carrying p for the calls made with it.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressFrom returns the [Progress] in ctx, or nil when the caller wants
// none.
func ProgressFrom(ctx context.Context) Progress {
	p, _ := ctx.Value(progressKey{}).(Progress)
	return p
}

// Throttle returns a Progress passing reports on to p at most once per
// interval. A report coming sooner is held, replacing any held before, and
// passed on when the interval ends, so the newest of a burst is never lost;
// a final report (progress ≥ total > 0) goes at once, after the one held. It is safe for
// concurrent use and calls p under a lock, so reports arrive in order. A nil
// p gives nil.
func (p Progress) Throttle(every time.Duration) Progress {
	if p == nil {
		return nil
	}
	type report struct {
		progress, total float64
		message         string
	}
	var (
		mu      sync.Mutex
		last    time.Time
		held    *report
		flushes *time.Timer
	)
	flush := func() {
		mu.Lock()
		defer mu.Unlock()
		flushes = nil
		if r := held; r != nil {
			held, last = nil, time.Now()
			p(r.progress, r.total, r.message)
		}
	}
	return func(progress, total float64, message string) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if wait := every - now.Sub(last); wait > 0 && (total <= 0 || progress < total) {
			held = &report{progress, total, message}
			if flushes == nil {
				flushes = time.AfterFunc(wait, flush)
			}
			return
		}
		if held != nil { // a final report: the one held goes first, in order
			p(held.progress, held.total, held.message)
		}
		held, last = nil, now
		p(progress, total, message)
	}
}
