// Package sdkhttp serves a go-sdk MCP server over streamable HTTP in both
// protocol eras, as the benchmarks' go-sdk programs (bench/mcpnoop -http and
// bench/sdkgateway) do: on a free loopback port, its endpoint
// ("http://127.0.0.1:PORT/mcp") printed as the first line on stdout, until
// stdin closes.
//
// A request whose Mcp-Protocol-Version header names mcpversion.Stateless or
// later goes to the go-sdk's StreamableHTTPHandler with Stateless set, which
// the SDK requires for that era (a temporary session per request); any
// other to one with no options (2025 sessions, by Mcp-Session-Id). Of the
// options toolhost's front (internal/mcp/mcpfront) gives the SDK's handlers,
// these are the ones a client needs to call it in both eras.
package sdkhttp

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// Serve serves srv at /mcp as the package's comment says, until stdin
// closes.
func Serve(srv *mcp.Server) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	get := func(*http.Request) *mcp.Server { return srv }
	sessions := mcp.NewStreamableHTTPHandler(get, nil)
	sessionless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Mcp-Protocol-Version") >= mcpversion.Stateless {
			sessionless.ServeHTTP(w, req)
			return
		}
		sessions.ServeHTTP(w, req)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(lis) }()
	fmt.Printf("http://%s/mcp\n", lis.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = hs.Close()
	}()
	if err := <-served; err != http.ErrServerClosed {
		return err
	}
	return nil
}
