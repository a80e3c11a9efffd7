// Command notes is an example third-party toolhost module: a small notebook
// kept in memory, built against package sdk only. docs/module-authors.md walks
// through it.
package main

import "github.com/toolhost/toolhost/sdk"

func main() {
	sdk.Serve(newGroup(), nil)
}
