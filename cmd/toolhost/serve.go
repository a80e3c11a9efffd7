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

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost/server"
)

// serveUsage is `toolhost serve`.
var serveUsage = &usage{
	name:    "serve",
	summary: "run the host and its HTTP server: API, page, MCP endpoints, metrics",
	details: `It runs until SIGINT or SIGTERM. It listens at once: /healthz answers then, /readyz once
the modules have had their first start.`,
	example: "toolhost serve -config config.hcl",
}

// serveCmd runs the host and its HTTP server until SIGINT or SIGTERM, then
// shuts both down gracefully.
func serveCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(serveUsage, stdout, stderr, "info")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	c.serverGC = true
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	var log hclog.Logger // made once the config is loaded: its log_format
	// The server listens before the plugins start: /healthz answers at once,
	// /readyz once they have had their first outcome, and every other route
	// 503 until then.
	var srv *http.Server
	var url string
	errc := make(chan error, 1)
	c.beforeStart = func(s *session) error {
		log = c.logger(stderr)
		lis, err := net.Listen("tcp", s.h.Config().Listen)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		handler, err := server.New(s.h, &server.Options{Runtime: s.rt})
		if err != nil {
			_ = lis.Close()
			return err
		}
		srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		srv.RegisterOnShutdown(handler.Close)
		go func() { errc <- srv.Serve(lis) }()
		url = "http://" + lis.Addr().String()
		log.Debug("listening; starting the plugins", "url", url)
		return nil
	}
	sess, ok := c.startHost(ctx, stderr, serveAgents, "")
	if !ok {
		if srv != nil {
			_ = srv.Close()
		}
		return 1
	}
	defer sess.Close()
	h := sess.h
	log.Info("serving", "url", url, "groups", len(h.Modules().Groups()), "ready_in", time.Since(start))
	switch auth := h.Config().Auth; {
	case auth.Disabled:
		log.Warn("authentication is disabled (auth { disabled = true }): any local process and any web page the browser opens on this host can use every route")
	case auth.Token == "":
		log.Info("every route needs a token: `toolhost token -url` prints the page's address with the admin token", "token_file", filepath.Join(h.Store().Dir(), server.AdminTokenFile))
	}
	var err error
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
