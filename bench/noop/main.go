// Command noop is the trivial plugin the benchmarks call: one group with one
// tool that does nothing and answers "ok" (bench/internal/noopgroup). It
// uses package sdk only.
//
// Its first argument, when given, names the group and its tool (default
// "noop"), so several copies can be loaded side by side without their group
// ids or tool names colliding.
package main

import (
	"os"

	"github.com/toolhost/toolhost/bench/internal/noopgroup"
	"github.com/toolhost/toolhost/sdk"
)

func main() {
	id := "noop"
	if len(os.Args) > 1 {
		id = os.Args[1]
	}
	sdk.Serve(noopgroup.New(id), nil)
}
