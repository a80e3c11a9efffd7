package netpolicy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// server is a test server on a loopback address that counts the
// connections it accepts.
type server struct {
	*httptest.Server
	conns atomic.Int32
}

// newServer starts a server on ip (a loopback address), with TLS or not.
func newServer(t *testing.T, ip string, tls bool, h http.Handler) *server {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{Server: httptest.NewUnstartedServer(h)}
	s.Listener.Close()
	s.Listener = ln
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// hostPort is the server's address, "127.0.0.2:PORT".
func (s *server) hostPort() string { return s.Listener.Addr().String() }

// echo answers with the request it saw as JSON, and upgrades a WebSocket
// request to a line echo.
func echo(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") == "websocket" {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		for {
			line, err := buf.ReadString('\n')
			if err != nil {
				return
			}
			fmt.Fprint(conn, "echo "+line)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "uri": r.RequestURI, "header": r.Header})
}

// loopbackOnly is the dial of the proxy tests: real, to loopback only, so a
// bug can never send traffic elsewhere.
func loopbackOnly(ctx context.Context, network, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("test dial: %s is not a loopback address", addr)
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// testProxy serves a proxy that allows 127.0.0.2 and names under .test,
// with a fake resolver (ok.test is 127.0.0.2, victim.test 127.0.0.1,
// metadata.test 169.254.169.254, rebind.test 127.0.0.2 then 127.0.0.1).
func testProxy(t *testing.T, opts *ProxyOptions) (*Proxy, *fakeNet) {
	t.Helper()
	f := newFakeNet(map[string][][]string{
		"ok.test":       {{"127.0.0.2"}},
		"victim.test":   {{"127.0.0.1"}},
		"localhost":     {{"127.0.0.1", "::1"}},
		"metadata.test": {{"169.254.169.254"}},
		"mixed.test":    {{"127.0.0.2", "10.0.0.1"}},
		"rebind.test":   {{"127.0.0.2"}, {"127.0.0.1"}},
	})
	pol := mustCompile(t, Config{AllowHosts: []string{"127.0.0.2", "*.test"}})
	p, err := NewProxy(&Dialer{Policy: pol, Resolve: f.resolve, Dial: loopbackOnly}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, f
}

// send writes a raw request to the proxy and reads the response; the
// connection stays open for what follows (a tunnel, an upgrade).
func send(t *testing.T, p *Proxy, raw string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	req := &http.Request{Method: strings.Fields(raw)[0]}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", raw, err)
	}
	return resp, conn, br
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProxyAttacks: every way of asking the proxy for a refused place is
// answered 403 with the refusal, recorded, and the victim on 127.0.0.1
// sees no connection.
func TestProxyAttacks(t *testing.T) {
	victim := newServer(t, "127.0.0.1", false, http.HandlerFunc(echo))
	_, vport, _ := net.SplitHostPort(victim.hostPort())
	p, f := testProxy(t, nil)
	for _, tc := range []struct {
		name, request string
		host, rule    string
	}{
		{"plain GET of 127.0.0.1", "GET http://127.0.0.1:%s/ HTTP/1.1\r\nHost: 127.0.0.1:%[1]s\r\n\r\n", "127.0.0.1", RuleAllowHosts},
		{"plain GET of [::1]", "GET http://[::1]:%s/ HTTP/1.1\r\nHost: [::1]:%[1]s\r\n\r\n", "::1", RuleAllowHosts},
		{"plain GET of localhost", "GET http://localhost:%s/ HTTP/1.1\r\nHost: localhost:%[1]s\r\n\r\n", "localhost", RuleAllowHosts},
		{"a Host header does not steer", "GET http://victim.test:%s/ HTTP/1.1\r\nHost: 127.0.0.2:%[1]s\r\n\r\n", "victim.test", "a loopback address"},
		{"an allowed name resolving to loopback", "GET http://victim.test:%s/ HTTP/1.1\r\nHost: victim.test\r\n\r\n", "victim.test", "a loopback address"},
		{"https by absolute URI", "GET https://victim.test:%s/ HTTP/1.1\r\nHost: victim.test\r\n\r\n", "victim.test", "a loopback address"},
		{"a name resolving to the metadata address", "GET http://metadata.test:%s/latest/meta-data/ HTTP/1.1\r\nHost: metadata.test\r\n\r\n", "metadata.test", "a link-local address"},
		{"a name resolving to public and private", "GET http://mixed.test:%s/ HTTP/1.1\r\nHost: mixed.test\r\n\r\n", "mixed.test", "a private address"},
		{"CONNECT to 127.0.0.1", "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%[1]s\r\n\r\n", "127.0.0.1", RuleAllowHosts},
		{"CONNECT to a name resolving to loopback", "CONNECT victim.test:%s HTTP/1.1\r\nHost: victim.test:%[1]s\r\n\r\n", "victim.test", "a loopback address"},
		{"CONNECT to the metadata address", "CONNECT metadata.test:%s HTTP/1.1\r\n\r\n", "metadata.test", "a link-local address"},
		{"WebSocket upgrade to loopback", "GET http://victim.test:%s/ws HTTP/1.1\r\nHost: victim.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "victim.test", "a loopback address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark := p.Mark()
			resp, _, _ := send(t, p, fmt.Sprintf(tc.request, vport))
			msg := resp.Header.Get(policyHeader)
			b := body(t, resp)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, tc.rule) || !strings.Contains(b, msg) {
				t.Errorf("status %d, %s %q, body %q; want 403 naming %q", resp.StatusCode, policyHeader, msg, b, tc.rule)
			}
			got := p.Since(mark)
			if len(got) != 1 || got[0].Host != tc.host || got[0].Rule != tc.rule || got[0].Error() != msg {
				t.Errorf("Since(mark) = %+v, want one refusal of %s by %s", got, tc.host, tc.rule)
			}
		})
	}
	if n := victim.conns.Load(); n != 0 {
		t.Errorf("the victim saw %d connections", n)
	}
	for _, d := range f.dialled() {
		t.Errorf("the fake network dialled %s", d)
	}
}

func TestProxyPlainRequests(t *testing.T) {
	allowed := newServer(t, "127.0.0.2", false, http.HandlerFunc(echo))
	victim := newServer(t, "127.0.0.1", false, http.HandlerFunc(echo))
	p, _ := testProxy(t, nil)
	// Proxies named by the environment are never used upstream.
	t.Setenv("HTTP_PROXY", victim.URL)
	t.Setenv("HTTPS_PROXY", victim.URL)
	t.Setenv("ALL_PROXY", victim.URL)

	t.Run("hop-by-hop headers dropped", func(t *testing.T) {
		resp, _, _ := send(t, p, "GET http://"+allowed.hostPort()+"/path?q=1 HTTP/1.1\r\nHost: "+allowed.hostPort()+
			"\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 300\r\nProxy-Connection: keep-alive\r\n"+
			"Proxy-Authorization: Basic c2VjcmV0\r\nTE: trailers\r\nX-Keep: yes\r\n\r\n")
		var seen struct {
			Host, URI string
			Header    http.Header
		}
		if err := json.Unmarshal([]byte(body(t, resp)), &seen); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		if seen.Host != allowed.hostPort() || seen.URI != "/path?q=1" || seen.Header.Get("X-Keep") != "yes" {
			t.Errorf("the server saw %+v", seen)
		}
		for _, h := range []string{"X-Hop", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "X-Forwarded-For", "Forwarded"} {
			if v := seen.Header.Values(h); len(v) > 0 {
				t.Errorf("the server saw %s: %q", h, v)
			}
		}
	})
	t.Run("a name resolved by the proxy", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(allowed.hostPort())
		resp, _, _ := send(t, p, "GET http://ok.test:"+port+"/ HTTP/1.1\r\nHost: ok.test\r\n\r\n")
		if b := body(t, resp); resp.StatusCode != 200 || !strings.Contains(b, `"host":"ok.test:`+port+`"`) {
			t.Errorf("status %d, body %s", resp.StatusCode, b)
		}
	})
	t.Run("not a proxy request", func(t *testing.T) {
		for _, raw := range []string{
			"GET / HTTP/1.1\r\nHost: " + allowed.hostPort() + "\r\n\r\n",
			"GET ftp://" + allowed.hostPort() + "/ HTTP/1.1\r\nHost: x\r\n\r\n",
			"CONNECT 127.0.0.2 HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n",
		} {
			if resp, _, _ := send(t, p, raw); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%q: status %d, want 400", raw, resp.StatusCode)
			}
		}
	})
	t.Run("an upstream that does not answer", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		if resp, _, _ := send(t, p, "GET http://"+addr+"/ HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); resp.StatusCode != http.StatusBadGateway || resp.Header.Get(policyHeader) != "" {
			t.Errorf("status %d, want 502", resp.StatusCode)
		}
	})
	if n := victim.conns.Load(); n != 0 {
		t.Errorf("the victim (named by HTTP_PROXY) saw %d connections", n)
	}
}

func TestProxyTunnels(t *testing.T) {
	p, _ := testProxy(t, nil)
	proxyURL, _ := url.Parse(p.URL())

	t.Run("https through CONNECT", func(t *testing.T) {
		tlsSrv := newServer(t, "127.0.0.2", true, http.HandlerFunc(echo))
		tr := tlsSrv.Client().Transport.(*http.Transport).Clone()
		tr.Proxy = http.ProxyURL(proxyURL)
		tr.TLSClientConfig.ServerName = "example.com" // httptest's certificate names 127.0.0.1, not 127.0.0.2
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(tlsSrv.URL + "/secure")
		if err != nil {
			t.Fatal(err)
		}
		if b := body(t, resp); resp.StatusCode != 200 || !strings.Contains(b, `"uri":"/secure"`) {
			t.Errorf("status %d, body %s", resp.StatusCode, b)
		}
	})
	t.Run("ws through CONNECT, bytes sent with the request included", func(t *testing.T) {
		srv := newServer(t, "127.0.0.2", false, http.HandlerFunc(echo))
		// The upgrade request follows CONNECT in the same write, before the
		// proxy has answered: the tunnel must carry it.
		resp, conn, br := send(t, p, "CONNECT "+srv.hostPort()+" HTTP/1.1\r\nHost: "+srv.hostPort()+"\r\n\r\n"+
			"GET /ws HTTP/1.1\r\nHost: "+srv.hostPort()+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT: status %d", resp.StatusCode)
		}
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("the upgrade through the tunnel: %v, %v", resp, err)
		}
		lineEcho(t, conn, br)
	})
	t.Run("ws upgrade without a tunnel", func(t *testing.T) {
		srv := newServer(t, "127.0.0.2", false, http.HandlerFunc(echo))
		resp, conn, br := send(t, p, "GET http://"+srv.hostPort()+"/ws HTTP/1.1\r\nHost: "+srv.hostPort()+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d, want 101", resp.StatusCode)
		}
		lineEcho(t, conn, br)
	})
	t.Run("DNS rebinding between two tunnels", func(t *testing.T) {
		srv := newServer(t, "127.0.0.2", false, http.HandlerFunc(echo))
		_, port, _ := net.SplitHostPort(srv.hostPort())
		req := "CONNECT rebind.test:" + port + " HTTP/1.1\r\n\r\n"
		if resp, _, _ := send(t, p, req); resp.StatusCode != 200 {
			t.Fatalf("first CONNECT: status %d", resp.StatusCode)
		}
		resp, _, _ := send(t, p, req)
		if msg := resp.Header.Get(policyHeader); resp.StatusCode != 403 || msg != "rebind.test resolves to 127.0.0.1, a loopback address: refused" {
			t.Errorf("second CONNECT: status %d, %q", resp.StatusCode, msg)
		}
	})
}

// lineEcho speaks the echo server's upgraded protocol over conn.
func lineEcho(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	fmt.Fprint(conn, "ping\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo ping\n" {
		t.Errorf("echo: %q, %v", line, err)
	}
}

// TestProxyCloseOnRefusal: with CloseOnRefusal, a refused request, plain or
// CONNECT, gets no response at all, and is still recorded.
func TestProxyCloseOnRefusal(t *testing.T) {
	victim := newServer(t, "127.0.0.1", false, http.HandlerFunc(echo))
	allowed := newServer(t, "127.0.0.2", false, http.HandlerFunc(echo))
	p, _ := testProxy(t, &ProxyOptions{CloseOnRefusal: true})
	for _, raw := range []string{
		"GET http://" + victim.hostPort() + "/ HTTP/1.1\r\nHost: " + victim.hostPort() + "\r\n\r\n",
		"CONNECT " + victim.hostPort() + " HTTP/1.1\r\n\r\n",
	} {
		mark := p.Mark()
		conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, raw)
		if got, err := io.ReadAll(conn); len(got) != 0 || err != nil {
			t.Errorf("%q: got %q, %v; want the connection closed without a response", raw, got, err)
		}
		if got := p.Since(mark); len(got) != 1 || got[0].Host != "127.0.0.1" {
			t.Errorf("%q: refusals %+v", raw, got)
		}
	}
	if resp, _, _ := send(t, p, "GET http://"+allowed.hostPort()+"/ HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 {
		t.Errorf("an allowed request: status %d", resp.StatusCode)
	}
	if n := victim.conns.Load(); n != 0 {
		t.Errorf("the victim saw %d connections", n)
	}
}

func TestProxyRefusalLog(t *testing.T) {
	p, _ := testProxy(t, &ProxyOptions{MaxRefusals: 2})
	if got := p.Since(0); len(got) != 0 {
		t.Fatalf("Since(0) of a new proxy = %v", got)
	}
	for _, h := range []string{"a.example", "b.example", "c.example"} {
		if resp, _, _ := send(t, p, "CONNECT "+h+":443 HTTP/1.1\r\n\r\n"); resp.StatusCode != 403 {
			t.Fatalf("%s: status %d", h, resp.StatusCode)
		}
	}
	got := p.Since(0)
	if len(got) != 2 || got[0].Host != "b.example" || got[1].Host != "c.example" {
		t.Errorf("Since(0) = %+v, want the latest two", got)
	}
	if got := p.Since(p.Mark()); len(got) != 0 {
		t.Errorf("Since(Mark()) = %+v", got)
	}
}

// TestProxyClose: Close ends open tunnels and requests in flight, and the
// port stops answering.
func TestProxyClose(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t, "127.0.0.2", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		echo(w, r)
	}))
	p, _ := testProxy(t, nil)
	resp, tunnel, _ := send(t, p, "CONNECT "+srv.hostPort()+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: status %d", resp.StatusCode)
	}
	hanging, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer hanging.Close()
	fmt.Fprintf(hanging, "GET http://%s/hang HTTP/1.1\r\nHost: x\r\n\r\n", srv.hostPort())
	for srv.conns.Load() < 2 { // the tunnel's and the hanging request's
		time.Sleep(time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Both end: reading them to the end returns.
	_, _ = io.ReadAll(tunnel)
	_, _ = io.ReadAll(hanging)
	if c, err := net.Dial("tcp", strings.TrimPrefix(p.URL(), "http://")); err == nil {
		c.Close()
		t.Error("the proxy still accepts connections after Close")
	}
	if err := p.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
