// Package mcpfront is toolhost's MCP front: each role's tools offered as
// an MCP server, built on the go-sdk's public surface. Over streamable
// HTTP ([Front], mounted by the server at /mcp/ROLE once it has
// authenticated the caller) it serves both eras: sessions of the 2025
// protocols and the sessionless requests of [mcpversion.Stateless]. Over
// newline-delimited JSON ([Serve], for `toolhost mcp`) it reads lines with
// its own decoder (stdio.go).
//
// Every client is one or more agents of the role: one per session, or per
// credential for sessionless requests, and one more for each agent key the
// client names. Their calls go through [host.Host.Call], the same pipeline
// as any other caller's; calls that outlive their request run as tasks
// (tasks.go), and a call waiting for an approval may be held for the
// client to retry (approval.go). What a sessionless client holds — its
// agents, their tasks, its held calls' rounds — is in the store, so that
// any host sharing it answers any of the client's requests (shared.go).
package mcpfront
