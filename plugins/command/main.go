// Command command is the first-party toolhost module that runs shell
// commands: each in its own process group, with a timeout that kills the
// whole group, and a small allowlisted environment. The host loads it with a
// `builtin "command"` block; README.md describes its tool and config.
package main

import "github.com/toolhost/toolhost/sdk"

func main() {
	sdk.Serve(newGroup(), nil)
}
