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

// tokenUsage is `toolhost token`.
var tokenUsage = &usage{
	name:    "token",
	summary: "print the admin token, or with -url the page's address carrying it",
	details: "The token is in the address's #fragment, which the browser never sends to the server.",
	example: "toolhost token -url",
}

// tokenCmd prints the admin token, or with -url the page's address carrying
// it in the fragment (which the browser never sends to the server).
func tokenCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(tokenUsage, stdout, stderr, "warn")
	asURL := fs.Bool("url", false, "print the page's address with the token in its fragment (#token=…)")
	if code, ok := fs.parse(args); !ok {
		return code
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

// tokensUsage is `toolhost tokens`: scoped tokens, role tokens and
// metrics tokens for a Prometheus server. Its subcommands reconcile the
// roles declared in the config into the store first, and start no module.
var tokensUsage = &usage{
	name:    "tokens",
	summary: "make, list and revoke tokens for a role's clients or for Prometheus",
	example: `toolhost tokens create -role developer -name cursor
toolhost tokens revoke cursor`,
	subs: []*usage{tokensCreateUsage, tokensListUsage, tokensRevokeUsage},
}

var (
	tokensCreateUsage = &usage{
		name:    "tokens create",
		args:    "-role R | -metrics",
		summary: "make a token that opens a role, or GET /metrics only, and print it once",
		details: "Give -role or -metrics. Only the token's hash is kept.",
		example: "toolhost tokens create -role developer -name cursor -expires 720h",
	}
	tokensListUsage = &usage{
		name:    "tokens list",
		summary: "list the tokens: name, role (or metrics), created, last used, expiry",
		example: "toolhost tokens list -json",
	}
	tokensRevokeUsage = &usage{
		name:    "tokens revoke",
		args:    "NAME",
		min:     1,
		max:     1,
		summary: "revoke a token: it stops working at once",
		details: "On hosts sharing a PostgreSQL store, within milliseconds on each.",
		example: "toolhost tokens revoke cursor",
	}
)

func tokensCreateCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(tokensCreateUsage, stdout, stderr, "warn")
	role := fs.String("role", "", "the `role` the token opens")
	metrics := fs.Bool("metrics", false, "make a token that opens GET /metrics and nothing else, instead of a role's")
	name := fs.String("name", "", "the token's `name`; default ROLE-RANDOM")
	expires := fs.String("expires", "", "how long the token works, such as 720h; default until revoked")
	asJSON := fs.Bool("json", false, "print JSON: the token and its secret")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if (*role == "") == !*metrics {
		return fs.fail("give -role R or -metrics")
	}
	return c.withRoles(stderr, func(ctx context.Context, h *host.Host) int {
		exp, err := server.ExpiryOf(*expires, time.Now())
		var secret string
		var t store.Token
		if err == nil && *metrics {
			secret, t, err = h.Tokens().CreateMetrics(ctx, *name, exp, "cli")
		} else if err == nil {
			secret, t, err = h.Tokens().Create(ctx, *name, *role, exp, "cli")
		}
		if err != nil {
			fmt.Fprintf(stderr, "toolhost: %v\n", err)
			return 1
		}
		if *asJSON {
			printJSON(stdout, server.NewToken{Token: t, Secret: secret})
			return 0
		}
		fmt.Fprintln(stdout, secret)
		fmt.Fprintf(stderr, "token %s for %s (%s); it is shown this once, only its hash is kept\n", t.Name, opened(t), expiry(t))
		return 0
	})
}

func tokensListCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(tokensListUsage, stdout, stderr, "warn")
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	return c.withRoles(stderr, func(ctx context.Context, h *host.Host) int {
		tokens, err := h.Store().Tokens(ctx)
		if err == nil {
			err = printList(stdout, tokens, *asJSON, "NAME\tROLE\tCREATED\tLAST USED\tEXPIRES", tokenRow)
		}
		if err != nil {
			fmt.Fprintf(stderr, "toolhost: %v\n", err)
			return 1
		}
		return 0
	})
}

func tokensRevokeCmd(args []string, stdout, stderr io.Writer) int {
	fs, c := newHostFlags(tokensRevokeUsage, stdout, stderr, "warn")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	return c.withRoles(stderr, func(ctx context.Context, h *host.Host) int {
		if err := h.Tokens().Revoke(ctx, fs.Arg(0), "cli"); err != nil {
			fmt.Fprintf(stderr, "toolhost: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "revoked token %s\n", fs.Arg(0))
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
