package netpolicy

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

// dialUpstream connects to host:port through the Upstream proxy: the name
// (or IP literal) is checked here, the rest by the proxy, whose answer to
// CONNECT decides.
func (d *Dialer) dialUpstream(ctx context.Context, host, port string) (net.Conn, error) {
	p := d.policy()
	if err := p.CheckName(host); err != nil {
		return nil, err
	}
	if ip, ok := parseIP(host); ok {
		if err := p.permit(host, ip); err != nil {
			return nil, err
		}
	}
	dial := d.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: defaultDialTimeout}).DialContext
	}
	conn, err := dial(ctx, "tcp", d.Upstream)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", d.Upstream, err)
	}
	target := net.JoinHostPort(host, port)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultDialTimeout)
	}
	_ = conn.SetDeadline(deadline)
	br := bufio.NewReader(conn)
	_, err = fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("proxy %s: CONNECT %s: %w", d.Upstream, target, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		if why := resp.Header.Get(policyHeader); why != "" {
			return nil, &Refusal{Host: host, Upstream: why}
		}
		return nil, fmt.Errorf("proxy %s: CONNECT %s: %s", d.Upstream, target, resp.Status)
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

// bufferedConn is a connection some of whose bytes a bufio.Reader already
// read.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// EnvUpstream is the HTTPS proxy the environment names (HTTPS_PROXY or
// https_proxy, as "http://host:port"), for [Dialer.Upstream]: a sandbox with
// network = "allowed" names its proxy there. It is "" when there is none
// or it is not an http:// proxy.
func EnvUpstream() string {
	for _, k := range []string{"HTTPS_PROXY", "https_proxy"} {
		if u, err := url.Parse(os.Getenv(k)); err == nil && u.Scheme == "http" && u.Host != "" {
			return u.Host
		}
	}
	return ""
}
