// Command conformserver serves the conformance fixture (package
// conformserver): over stdio by default, or with -http ADDR over streamable
// HTTP at /mcp on ADDR (a loopback address), printing the endpoint's URL on
// stdout once it listens.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/mcp/mcptest/conformserver"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	flag.Parse()
	s := conformserver.New()
	if *addr == "" {
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler())
	fmt.Printf("http://%s/mcp\n", l.Addr())
	log.Fatal(http.Serve(l, mux))
}
