package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/server"
)

// serveCmd runs the host and its HTTP server until SIGINT or SIGTERM, then
// shuts both down gracefully.
func serveCmd(args []string, _, stderr io.Writer) int {
	fs, c := newFlags("serve", stderr, "info")
	if fs.Parse(args) != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	sess, ok := c.startHost(ctx, stderr, serveAgents, "")
	if !ok {
		return 1
	}
	defer sess.Close()
	h := sess.h
	log := c.logger(stderr)
	lis, err := net.Listen("tcp", h.Config().Listen)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: listen: %v\n", err)
		return 1
	}
	handler, err := server.New(h, &server.Options{Runtime: sess.rt})
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	log.Info("serving", "url", "http://"+lis.Addr().String(), "groups", len(h.Manager().IDs()), "ready_in", time.Since(start))
	switch auth := h.Config().Auth; {
	case auth.Disabled:
		log.Warn("authentication is disabled (auth { disabled = true }): any local process and any web page the browser opens on this host can use every route")
	case auth.Token == "":
		log.Info("every route needs a token: `toolhost token -url` prints the page's address with the admin token", "token_file", filepath.Join(h.DataDir(), server.AdminTokenFile))
	}
	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = srv.Shutdown(sctx)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "toolhost: serve: %v\n", err)
		return 1
	}
	return 0
}
