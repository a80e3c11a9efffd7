// Package noopgroup is the benchmarks' no-op group: one tool that does
// nothing and answers "ok". bench/noop serves it as a plugin; bench/mcpfront
// registers it in-process.
package noopgroup

import (
	"context"

	"github.com/toolhost/toolhost/sdk"
)

// NoArgs is the no-op tool's input: an empty object.
type NoArgs struct{}

// New returns the group, its id and its one tool's name both id.
func New(id string) *sdk.Group {
	return &sdk.Group{
		ID:          id,
		Description: "A tool that does nothing, for benchmarks.",
		Version:     "1.0.0",
		Tools: []sdk.Tool{
			sdk.NewTool(id, "Do nothing and answer ok.", func(context.Context, *sdk.Request[NoArgs]) (*sdk.Result, error) {
				return sdk.Text("ok"), nil
			}),
		},
	}
}
