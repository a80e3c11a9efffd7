// Command mcpfront is toolhost's MCP front with the benchmarks' no-op group
// (bench/internal/noopgroup) in-process: a host with no module, whose role
// "bench" holds the group registered with host.Modules.Register. A call
// goes through the front and the host's pipeline (policy, validation,
// events) and answers in this process, as a go-sdk server's no-op tool
// (bench/mcpnoop) does: the benchmarks hold our front against that server
// with it, neither with a plugin process behind it.
//
// Its data directory is the one -data names (a fresh one per process). By
// default it serves the role over stdin and stdout as `toolhost mcp` does
// (server.ServeMCP) until stdin closes. With -http it serves server.New on
// a free loopback port, prints the role's endpoint and a token of the role
// ("http://127.0.0.1:PORT/mcp/bench TOKEN") as its first line on stdout, and
// serves until stdin closes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/bench/internal/noopgroup"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/server"
)

func main() {
	overHTTP := flag.Bool("http", false, "serve HTTP on a loopback port (endpoint and token printed on stdout) until stdin closes, instead of stdio")
	data := flag.String("data", "", "the host's data directory (required)")
	flag.Parse()
	if err := run(*data, *overHTTP); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "mcpfront:", err)
		os.Exit(1)
	}
}

// run starts the host and serves its role "bench" (see the package's
// comment).
func run(data string, overHTTP bool) error {
	if data == "" {
		return errors.New("-data is required")
	}
	ctx := context.Background()
	cfg, err := config.Parse(fmt.Appendf(nil, "data_dir = %q\nrole \"bench\" {\n  tool_groups = [\"noop\"]\n}\n", data), "mcpfront.hcl", nil)
	if err != nil {
		return err
	}
	h, err := host.New(cfg, nil)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.Start(ctx); err != nil {
		return err
	}
	if err := h.Modules().Register(ctx, noopgroup.New("noop")); err != nil {
		return err
	}
	if !overHTTP {
		return server.ServeMCP(ctx, h, "bench", &mcp.StdioTransport{})
	}
	return serveHTTP(ctx, h)
}

// serveHTTP serves h with server.New on a free loopback port until stdin
// closes, after printing the role's endpoint and a token of it.
func serveHTTP(ctx context.Context, h *host.Host) error {
	srv, err := server.New(h, nil)
	if err != nil {
		return err
	}
	token, _, err := h.Tokens().Create(ctx, "bench", "bench", time.Time{}, "bench")
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(srv.Close)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(lis) }()
	fmt.Printf("http://%s/mcp/bench %s\n", lis.Addr(), token)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		_ = hs.Shutdown(context.Background())
	}()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
