// Command chrome is a first-party toolhost module that drives a headless
// Chromium: it loads pages and reads their text. Chromium starts on the first
// call and is stopped when the host unloads the plugin. Every request it
// makes goes through a filtering proxy that applies the network policy
// (package netpolicy, the network module's rules). The host loads it with a
// `plugin "chrome"` block; README.md describes its tools and config.
package main

import "github.com/toolhost/toolhost/sdk"

func main() {
	b := newBrowser()
	sdk.Serve(newGroup(b), nil)
	b.close()
}
