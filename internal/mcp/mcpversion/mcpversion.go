// Package mcpversion names the MCP protocol versions toolhost tells apart:
// the first of the stateless era, and the newest of the session era. Every
// other package (the front in server, the module source, the bench)
// refers to these, so that each date is written once. It imports nothing,
// so that a program as small as the bench's go-sdk baseline can use it.
//
// The go-sdk names the same versions, unexported; it exports only
// [mcp.SupportedProtocolVersions], which does not say which is which.
//
// [mcp.SupportedProtocolVersions]: https://pkg.go.dev/github.com/modelcontextprotocol/go-sdk/mcp#SupportedProtocolVersions
package mcpversion

const (
	// Stateless is the first protocol version of the stateless era:
	// server/discover, the version and capabilities in each request's
	// _meta, no sessions. Versions compare as their dates do, so a request
	// of version v is sessionless when v >= Stateless.
	Stateless = "2026-07-28"
	// Legacy is the newest version of the session era (initialize, a
	// session), the one a client asks for with initialize when a server
	// does not offer Stateless.
	Legacy = "2025-11-25"
)
