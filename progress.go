package toolhost

import (
	"context"
	"sync"
	"time"
)

// Progress receives a long call's progress: how far it is (progress, of
// total when total is above zero) and a message. A caller that wants it
// (an MCP client that sent a progress token, the agent runtime) puts one in
// the call's context with WithProgress; a provider that can tell (a plugin's
// handler through sdk.Request.Progress, an MCP server's
// notifications/progress) reports through ProgressFrom.
type Progress func(progress, total float64, message string)

type progressKey struct{}

// WithProgress returns ctx carrying p for the calls made with it.
func WithProgress(ctx context.Context, p Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressFrom returns the Progress in ctx, or nil when the caller wants none.
func ProgressFrom(ctx context.Context) Progress {
	p, _ := ctx.Value(progressKey{}).(Progress)
	return p
}

// Throttle returns a Progress passing reports on to p at most once per
// interval, and a final one (progress ≥ total > 0) always; the others are
// dropped. It is safe for concurrent use and calls p under a lock, so reports
// arrive in order. A nil p gives nil.
func (p Progress) Throttle(every time.Duration) Progress {
	if p == nil {
		return nil
	}
	var (
		mu   sync.Mutex
		last time.Time
	)
	return func(progress, total float64, message string) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if now.Sub(last) < every && (total <= 0 || progress < total) {
			return
		}
		last = now
		p(progress, total, message)
	}
}
