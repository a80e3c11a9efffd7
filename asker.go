package toolhost

import (
	"context"
	"encoding/json"
)

// The requests an MCP server may make of the client during a call, and the
// notification it may send it, as MCP names them.
const (
	MethodSampling    = "sampling/createMessage"
	MethodElicitation = "elicitation/create"
	MethodRoots       = "roots/list"
	MethodLog         = "notifications/message"
)

// ClientRequest is one request a module (an MCP server) makes of the client
// that made a call, while the call runs: its method ([MethodSampling],
// [MethodElicitation], [MethodRoots]) and its params as the server sent them.
type ClientRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// Asker carries what a module asks of the client that made a call back to
// that client. A caller that can reach its client (the MCP front) puts one
// in the call's context with [WithAsker]; a provider that is asked (an MCP
// server's sampling, elicitation and logging) finds it with [AskerFrom].
// The host passes it on wrapped, recording each request as an event.
type Asker interface {
	// Capabilities are the client's capabilities as MCP's
	// ClientCapabilities object (JSON), as it declared them.
	Capabilities() json.RawMessage
	// Ask sends one round of requests to the client, keyed by names the
	// asker chooses, and returns its answers (each the result of its
	// request, as JSON), keyed the same. A request whose capability the
	// client did not declare is refused with a validation error, and the
	// round with it.
	Ask(ctx context.Context, round map[string]ClientRequest) (map[string]json.RawMessage, error)
	// Log passes a notifications/message's params on to the client, if it
	// takes them at their level. It never blocks: what the client cannot
	// take at once is dropped.
	Log(params json.RawMessage)
	// LogLevel is the least level of the messages the client takes ("" for
	// none).
	LogLevel() string
	// Given are the answers the client sent with its call before it was
	// asked (MCP lets a client answer up front), keyed as the module's
	// requests would be; nil when it sent none.
	Given() map[string]json.RawMessage
}

type askerKey struct{}

// WithAsker returns ctx carrying a for the calls made with it.
func WithAsker(ctx context.Context, a Asker) context.Context {
	return context.WithValue(ctx, askerKey{}, a)
}

// AskerFrom returns the [Asker] in ctx, or nil when the caller has no
// client to ask.
func AskerFrom(ctx context.Context) Asker {
	a, _ := ctx.Value(askerKey{}).(Asker)
	return a
}
