package toolhost

import "context"

// Progress receives a long call's progress: how far it is (progress, of
// total when total is above zero) and a message. A caller that wants it
// (an MCP client that sent a progress token) puts one in the call's context
// with WithProgress; a provider that can tell (an MCP server's
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
