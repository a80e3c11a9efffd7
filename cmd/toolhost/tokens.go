package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/server"
	"github.com/toolhost/toolhost/store"
)

const tokensUsage = `usage:
  toolhost tokens create [-config F] -role R [-name N] [-expires 720h]   print a new token for a role, once
  toolhost tokens create [-config F] -metrics [-name N] [-expires 720h]  print a new token that opens GET /metrics only, once
  toolhost tokens list [-config F] [-json]                               name, role (or metrics), created, last used, expiry
  toolhost tokens revoke [-config F] NAME                                it stops working at once (on hosts sharing
                                                                         a PostgreSQL store, within milliseconds)`

// tokenCmd prints the admin token, or with -url the page's address carrying
// it in the fragment (which the browser never sends to the server).
func tokenCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("token", stderr, "warn")
	asURL := fs.Bool("url", false, "print the page's address with the token in its fragment (#token=…)")
	if fs.Parse(args) != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: toolhost token [-config F] [-url]")
		return 2
	}
	cfg, ok := c.load(stderr)
	if !ok {
		return 1
	}
	if cfg.Auth.Disabled {
		fmt.Fprintln(stderr, "toolhost: authentication is disabled (auth { disabled = true }): there is no admin token")
		return 1
	}
	token, err := server.AdminToken(cfg, cfg.DataDir)
	if err != nil {
		fmt.Fprintf(stderr, "toolhost: %v\n", err)
		return 1
	}
	if *asURL {
		fmt.Fprintf(stdout, "http://%s/#token=%s\n", dialable(cfg.Listen), token)
		return 0
	}
	fmt.Fprintln(stdout, token)
	return 0
}

// dialable turns a listen address into one a browser can open: an
// unspecified host becomes the loopback address of its family.
func dialable(listen string) string {
	h, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip, err := netip.ParseAddr(h); h == "" || err == nil && ip.IsUnspecified() {
		h = "127.0.0.1"
		if err == nil && ip.Is6() {
			h = "::1"
		}
	}
	return net.JoinHostPort(h, port)
}

// tokensCmd makes, lists and revokes scoped tokens: role tokens, and
// metrics tokens for a Prometheus server. It reconciles the roles declared
// in the config into the store first, and starts no module.
func tokensCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, tokensUsage)
		return 2
	}
	sub := args[0]
	fs, c := newFlags("tokens "+sub, stderr, "warn")
	role := fs.String("role", "", "the role the token opens (create)")
	metrics := fs.Bool("metrics", false, "make a token that opens GET /metrics and nothing else, instead of a role's (create)")
	name := fs.String("name", "", "the token's name; default ROLE-RANDOM (create)")
	expires := fs.String("expires", "", "how long the token works, such as 720h; default until revoked (create)")
	asJSON := fs.Bool("json", false, "print JSON")
	if fs.Parse(args[1:]) != nil {
		return 2
	}
	want := map[string]int{"create": 0, "list": 0, "revoke": 1}
	if n, ok := want[sub]; !ok || fs.NArg() != n || (sub == "create" && (*role == "") == !*metrics) {
		fmt.Fprintln(stderr, tokensUsage)
		return 2
	}
	return c.withRoles(stderr, func(ctx context.Context, h *host.Host) int {
		var err error
		switch sub {
		case "create":
			var exp time.Time
			var secret string
			var t store.Token
			if exp, err = server.ExpiryOf(*expires, time.Now()); err == nil && *metrics {
				secret, t, err = h.Tokens().CreateMetrics(ctx, *name, exp, "cli")
			} else if err == nil {
				secret, t, err = h.Tokens().Create(ctx, *name, *role, exp, "cli")
			}
			if err == nil {
				if *asJSON {
					printJSON(stdout, server.NewToken{Token: t, Secret: secret})
				} else {
					fmt.Fprintln(stdout, secret)
					fmt.Fprintf(stderr, "token %s for %s (%s); it is shown this once, only its hash is kept\n", t.Name, opened(t), expiry(t))
				}
			}
		case "list":
			var tokens []store.Token
			if tokens, err = h.Store().Tokens(ctx); err == nil {
				err = printList(stdout, tokens, *asJSON, "NAME\tROLE\tCREATED\tLAST USED\tEXPIRES", tokenRow)
			}
		case "revoke":
			if err = h.Tokens().Revoke(ctx, fs.Arg(0), "cli"); err == nil {
				fmt.Fprintf(stdout, "revoked token %s\n", fs.Arg(0))
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "toolhost: %v\n", err)
			return 1
		}
		return 0
	})
}

// tokenRow is a token's line in tokens list.
func tokenRow(t store.Token) string {
	used := "never"
	if !t.LastUsedAt.IsZero() {
		used = t.LastUsedAt.Local().Format(time.DateTime)
	}
	role := t.Role
	if t.Scope == store.ScopeMetrics {
		role = "(metrics)"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", t.Name, role, t.CreatedAt.Local().Format(time.DateTime), used, expiry(t))
}

// opened says what a token opens.
func opened(t store.Token) string {
	if t.Scope == store.ScopeMetrics {
		return "GET /metrics"
	}
	return "role " + t.Role
}

// expiry says when a token expires.
func expiry(t store.Token) string {
	switch {
	case t.ExpiresAt.IsZero():
		return "never expires"
	case t.Expired(time.Now()):
		return "expired " + t.ExpiresAt.Local().Format(time.DateTime)
	}
	return "expires " + t.ExpiresAt.Local().Format(time.DateTime)
}
