package main

import (
	"net/http"
	"net/url"
	"strings"
)

// A redirect may lead to another server than the one a call named, and a
// request's headers may hold credentials under any name (X-Api-Key,
// Private-Token, X-Auth-Token, …). Go's client drops only Authorization,
// WWW-Authenticate and Cookie when a redirect leaves the host, and keeps
// them on a downgrade from https to http. So a redirect that leaves the
// server carries only the headers below, which cannot hold a credential,
// and drops every other: an allowlist, because a list of credential names
// is never complete, and a header it missed would reach a server the
// caller never named. The cost falls on a caller that needs a custom header
// at the new server: final_url says where it ended, to be asked directly.

// crossHeaders are the request headers a redirect carries to another server.
var crossHeaders = map[string]bool{
	"Accept":          true,
	"Accept-Charset":  true,
	"Accept-Encoding": true,
	"Accept-Language": true,
	"Cache-Control":   true,
	"Pragma":          true,
	"User-Agent":      true,
}

// bodyHeaders describe the request's body: a redirect carries them to
// another server when it carries the body too (307, 308).
var bodyHeaders = map[string]bool{
	"Content-Type":     true,
	"Content-Encoding": true,
	"Content-Language": true,
}

// dropForeignHeaders keeps of r's headers only crossHeaders (and
// bodyHeaders with a body) once the redirects leading to r, or r itself,
// left the server of the request that started them (via[0]): once gone, a
// header stays gone, even when a later redirect comes back.
func dropForeignHeaders(r *http.Request, via []*http.Request) {
	left := !sameServer(via[0].URL, r.URL)
	for _, hop := range via[1:] {
		left = left || !sameServer(via[0].URL, hop.URL)
	}
	if !left {
		return
	}
	withBody := r.Body != nil && r.Body != http.NoBody
	for k := range r.Header {
		if !crossHeaders[k] && !(withBody && bodyHeaders[k]) {
			delete(r.Header, k)
		}
	}
}

// sameServer reports whether a redirect from one URL to another stays with
// the same server: the same host name and port, or the same host name moved
// from http to https, each on its default port. Another host name (a
// subdomain too), another port or a move from https to http, which would
// send the headers in clear, leaves it.
func sameServer(from, to *url.URL) bool {
	if !strings.EqualFold(from.Hostname(), to.Hostname()) {
		return false
	}
	switch {
	case from.Scheme == to.Scheme:
		return port(from) == port(to)
	case from.Scheme == "http" && to.Scheme == "https":
		return port(from) == "80" && port(to) == "443"
	}
	return false
}

// port is u's port, or its scheme's default.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
