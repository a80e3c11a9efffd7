// Command network is the first-party toolhost module that makes HTTP
// requests: http/https only, with a response size cap, a timeout, redirects
// re-checked, and every connection refused when the address it resolves to
// is loopback, private, link-local and the like (checked at dial time, so DNS
// rebinding cannot get around it). The host loads it with a
// `builtin "network"` block; README.md describes its tool and config.
package main

import "github.com/toolhost/toolhost/sdk"

func main() {
	sdk.Serve(newGroup(), nil)
}
