package netpolicy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestDialerUpstream: a Dialer with an Upstream proxy (a sandbox's) checks
// names itself, leaves the rest to the proxy, and reports the proxy's
// refusal as a *Refusal; an allowed host is reached through the tunnel.
func TestDialerUpstream(t *testing.T) {
	outer, _ := testProxy(t, nil) // allows 127.0.0.2 and *.test; victim.test is 127.0.0.1
	srv := newServer(t, "127.0.0.2", false, http.HandlerFunc(echo))
	_, port, _ := net.SplitHostPort(srv.hostPort())
	inner := &Dialer{
		Policy:   mustCompile(t, Config{AllowHosts: []string{"ok.test", "victim.test", "127.0.0.1", "not-outer.example"}}),
		Upstream: strings.TrimPrefix(outer.URL(), "http://"),
		Dial:     loopbackOnly,
	}
	client := &http.Client{Transport: &http.Transport{DialContext: inner.DialContext}}
	defer client.CloseIdleConnections()

	resp, err := client.Get("http://ok.test:" + port + "/through")
	if err != nil {
		t.Fatal(err)
	}
	if b := body(t, resp); resp.StatusCode != 200 || !strings.Contains(b, `"uri":"/through"`) {
		t.Fatalf("status %d, body %s", resp.StatusCode, b)
	}

	for _, tc := range []struct {
		host     string
		upstream bool // refused by the outer proxy, not here
	}{
		{"elsewhere.test", false},   // not in the inner allow_hosts: never asked upstream
		{"169.254.169.254", false},  // an IP literal is checked here too
		{"victim.test", true},       // resolves to loopback, upstream
		{"not-outer.example", true}, // not in the outer allow_hosts
	} {
		mark := outer.Mark()
		_, err := inner.DialContext(context.Background(), "tcp", net.JoinHostPort(tc.host, port))
		var ref *Refusal
		if !errors.As(err, &ref) {
			t.Errorf("%s: %v, want a refusal", tc.host, err)
			continue
		}
		if asked := len(outer.Since(mark)) > 0; asked != tc.upstream || (ref.Upstream != "") != tc.upstream {
			t.Errorf("%s: refused %q (upstream %q), outer proxy asked: %v", tc.host, ref.Error(), ref.Upstream, asked)
		}
	}
}
