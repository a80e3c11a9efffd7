package server

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpfront"
)

// routesMCP serves each role's MCP server as streamable HTTP at /mcp/{role}
// ([mcpfront.Front]), to the admin and to the role's tokens: the guard has
// authenticated the request, openRole checks the role, and the front is
// told who the caller is.
func (s *Server) routesMCP() {
	s.mcp = mcpfront.New(s.h)
	s.roleRoute("/mcp/{role}", func(w http.ResponseWriter, r *http.Request) {
		if role, ok := s.openRole(w, r, r.PathValue("role")); ok {
			p := principalOf(r)
			s.mcp.ServeRole(w, r, role.Name, mcpfront.Caller{Credential: p.credential(), Principal: p.subject()})
		}
	})
}

// ServeMCP serves the MCP server of a role on one transport (such as
// &mcp.StdioTransport{}) until the client disconnects or ctx ends, as
// `toolhost mcp` does: in either protocol era, as the command line's
// credential, each connection an agent of the role. A line that is not
// JSON-RPC is answered with an error and the connection goes on.
func ServeMCP(ctx context.Context, h *host.Host, role string, t mcp.Transport) error {
	return mcpfront.Serve(ctx, h, role, t)
}
