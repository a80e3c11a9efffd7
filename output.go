package toolhost

import "context"

// Output receives a call's output as its tool writes it: each call is a
// piece of the call's stdout, or of its stderr when stderr is set. A caller
// that keeps output in bounded memory (the host, for a tool that keeps its
// output's end, [ToolSpec.OutputTail]) puts one in the call's context with
// [WithOutput]; a provider that can stream (a plugin's handler through
// [github.com/toolhost/toolhost/sdk.Request.Stdout] and Stderr) writes
// there rather than in the result, whose own Stdout and Stderr then follow
// what it wrote. An error means the caller takes no more; p is not kept
// after the call returns.
type Output func(stderr bool, p []byte) error

type outputKey struct{}

// WithOutput returns ctx carrying o for the calls made with it.
func WithOutput(ctx context.Context, o Output) context.Context {
	return context.WithValue(ctx, outputKey{}, o)
}

// OutputFrom returns the [Output] in ctx, or nil when the caller takes the
// output in the result alone.
func OutputFrom(ctx context.Context) Output {
	o, _ := ctx.Value(outputKey{}).(Output)
	return o
}
