// Command noop is the trivial plugin the benchmarks call: one group with one
// tool that does nothing and answers "ok". It uses package sdk only.
//
// Its first argument, when given, names the group and its tool (default
// "noop"), so several copies can be loaded side by side without their group
// ids or tool names colliding.
package main

import (
	"context"
	"os"

	"github.com/toolhost/toolhost/sdk"
)

// NoArgs is the no-op tool's input: an empty object.
type NoArgs struct{}

func main() {
	id := "noop"
	if len(os.Args) > 1 {
		id = os.Args[1]
	}
	sdk.Serve(&sdk.Group{
		ID:          id,
		Description: "A tool that does nothing, for benchmarks.",
		Version:     "1.0.0",
		Tools: []sdk.Tool{
			sdk.NewTool(id, "Do nothing and answer ok.", func(context.Context, *sdk.Request[NoArgs]) (*sdk.Result, error) {
				return sdk.Text("ok"), nil
			}),
		},
	}, nil)
}
