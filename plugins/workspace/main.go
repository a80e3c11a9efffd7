// Command workspace is the first-party toolhost module for files: it lists,
// reads and writes files inside the configured root directories and refuses
// every path that leads out of them. The host loads it with a
// `builtin "workspace"` block; README.md describes its tools and config.
package main

import "github.com/toolhost/toolhost/sdk"

func main() {
	sdk.Serve(newGroup(), nil)
}
