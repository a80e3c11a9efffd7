package netpolicy

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"
)

// policyHeader is the response header of a refusal by a [Proxy]; its value is
// the refusal's message.
const policyHeader = "X-Toolhost-Policy"

// Defaults of ProxyOptions, and the time a client has to send a request's
// headers.
const (
	readHeaderTimeout       = 10 * time.Second
	defaultProxyDialTimeout = 10 * time.Second
	defaultHeaderTimeout    = 60 * time.Second
	defaultIdleTimeout      = 90 * time.Second
	defaultMaxRefusals      = 256
)

// ProxyOptions tune a [Proxy]; nil or zero fields mean the defaults.
type ProxyOptions struct {
	// DialTimeout bounds each upstream connection attempt, TLS handshake
	// included; default 10 s.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the headers of an upstream
	// response to a plain request; default 60 s.
	ResponseHeaderTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections, the client's and
	// upstream ones, and a tunnel one side of which has ended; default 90 s.
	IdleTimeout time.Duration
	// MaxRefusals is how many of the latest refusals are kept for Since;
	// default 256.
	MaxRefusals int
	// CloseOnRefusal answers a refusal by closing the client's connection
	// instead of with a 403, so that a browser sees a network error for a
	// refused plain request too (as it does for a refused CONNECT), not a
	// page it shows or a response a no-cors fetch resolves with. The
	// refusal is recorded either way.
	CloseOnRefusal bool
	// Socket, when set, is the path of a unix socket to listen on instead of
	// a port on 127.0.0.1 (a sandbox reaches its proxy through one); Close
	// removes it.
	Socket string
}

// Proxy is a forward HTTP proxy on 127.0.0.1 that connects upstream only
// through its [Dialer], so only where the policy permits. It serves plain
// requests with an absolute http(s) URI (a WebSocket Upgrade among them) and
// CONNECT tunnels (https, ws and wss); anything else is a 400. A refusal is
// answered 403 with a short text body and the X-Toolhost-Policy header (or, with
// CloseOnRefusal, by closing the connection), and is recorded for [Proxy.Since].
// Proxies from the environment are never used upstream.
type Proxy struct {
	dialer      *Dialer
	dialTimeout time.Duration
	idleTimeout time.Duration
	hangUp      bool // CloseOnRefusal
	ln          net.Listener
	srv         *http.Server
	transport   *http.Transport
	reverse     *httputil.ReverseProxy
	ctx         context.Context // ends at Close, and every request's and tunnel's with it
	cancel      context.CancelFunc

	mu     sync.Mutex
	closed bool
	active sync.WaitGroup // requests and tunnels being served

	refusals refusalLog
}

// NewProxy starts a proxy on 127.0.0.1 (a free port), or on
// [ProxyOptions.Socket], that dials through d
// (nil: the zero [Dialer], the default policy); Close stops it.
func NewProxy(d *Dialer, opts *ProxyOptions) (*Proxy, error) {
	if d == nil {
		d = &Dialer{}
	}
	var o ProxyOptions
	if opts != nil {
		o = *opts
	}
	p := &Proxy{
		dialer:      d,
		dialTimeout: orDefault(o.DialTimeout, defaultProxyDialTimeout),
		idleTimeout: orDefault(o.IdleTimeout, defaultIdleTimeout),
		hangUp:      o.CloseOnRefusal,
		refusals:    refusalLog{ring: make([]Refusal, orDefault(o.MaxRefusals, defaultMaxRefusals))},
	}
	network, addr := "tcp", "127.0.0.1:0"
	if o.Socket != "" {
		network, addr = "unix", o.Socket
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	p.ln = ln
	p.ctx, p.cancel = context.WithCancel(context.Background())
	quiet := log.New(io.Discard, "", 0)
	p.transport = &http.Transport{
		Proxy:                 nil, // never a proxy from the environment
		DialContext:           p.dial,
		DisableCompression:    true, // pass the client's Accept-Encoding and the body as they are
		MaxIdleConns:          64,
		IdleConnTimeout:       p.idleTimeout,
		TLSHandshakeTimeout:   p.dialTimeout,
		ResponseHeaderTimeout: orDefault(o.ResponseHeaderTimeout, defaultHeaderTimeout),
		ExpectContinueTimeout: time.Second,
	}
	p.reverse = &httputil.ReverseProxy{
		// The outgoing request keeps the absolute URL and Host it came
		// with; ReverseProxy drops the hop-by-hop headers (Connection and
		// what it names, Proxy-Connection, Proxy-Authorization, Keep-Alive,
		// TE but "trailers", Upgrade but for an upgrade) and, with Rewrite,
		// adds no X-Forwarded-* headers.
		Rewrite:      func(*httputil.ProxyRequest) {},
		Transport:    p.transport,
		ErrorHandler: p.fail,
		ErrorLog:     quiet,
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       p.idleTimeout,
		BaseContext:       func(net.Listener) context.Context { return p.ctx },
		ErrorLog:          quiet,
	}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func orDefault[T time.Duration | int](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// URL is the proxy's address as a URL, "http://127.0.0.1:PORT", for a
// browser's --proxy-server or a command's HTTP_PROXY.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Mark returns a mark for [Proxy.Since]: the refusals recorded after this call are
// those Since(mark) returns.
func (p *Proxy) Mark() uint64 { return p.refusals.mark() }

// Since returns the refusals recorded since mark, oldest first; only the
// latest MaxRefusals are kept.
func (p *Proxy) Since(mark uint64) []Refusal { return p.refusals.since(mark) }

// Close stops the proxy: it closes the listener, ends every request and
// tunnel, waits for them, and closes the idle upstream connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	closed := p.closed
	p.closed = true
	p.mu.Unlock()
	if closed {
		return nil
	}
	p.cancel()
	err := p.srv.Close()
	p.active.Wait()
	p.transport.CloseIdleConnections()
	return err
}

// enter counts a request as being served, unless the proxy is closed.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.active.Add(1)
	return true
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		http.Error(w, "toolhost proxy: closed", http.StatusServiceUnavailable)
		return
	}
	defer p.active.Done()
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r)
	case r.URL.IsAbs() && (r.URL.Scheme == "http" || r.URL.Scheme == "https") && r.URL.Host != "":
		p.reverse.ServeHTTP(w, r)
	default:
		http.Error(w, "toolhost proxy: only absolute http(s) URLs and CONNECT are served", http.StatusBadRequest)
	}
}

// dial connects upstream through the Dialer, within the dial timeout.
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.dialTimeout)
	defer cancel()
	return p.dialer.DialContext(ctx, network, addr)
}

// fail answers a request that could not be forwarded: 403 for a refusal
// (recorded) or a closed connection, 502 otherwise.
func (p *Proxy) fail(w http.ResponseWriter, _ *http.Request, err error) {
	var ref *Refusal
	if errors.As(err, &ref) {
		p.refusals.add(*ref)
		if p.hangUp {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		w.Header().Set(policyHeader, ref.Error())
		http.Error(w, "refused by the network policy: "+ref.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, "toolhost proxy: "+err.Error(), http.StatusBadGateway)
}

// connect opens a CONNECT tunnel to r.Host, once the Dialer has connected.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	if _, port, err := net.SplitHostPort(r.Host); err != nil || port == "" {
		http.Error(w, "toolhost proxy: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	up, err := p.dial(r.Context(), "tcp", r.Host)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "toolhost proxy: cannot tunnel: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		client.Close()
		up.Close()
		return
	}
	p.splice(client, buf.Reader, up)
}

// splice copies both ways between a client (read through its buffered
// reader, which may hold bytes already sent) and upstream, until both
// directions end or the proxy closes. When one direction ends its end is
// passed on, and the other gets the idle timeout to finish.
func (p *Proxy) splice(client net.Conn, clientR io.Reader, up net.Conn) {
	closeBoth := func() {
		client.Close()
		up.Close()
	}
	defer context.AfterFunc(p.ctx, closeBoth)()
	defer closeBoth()
	done := make(chan struct{}, 2)
	copyTo := func(dst net.Conn, src io.Reader) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go copyTo(up, clientR)
	go copyTo(client, up)
	<-done
	deadline := time.Now().Add(p.idleTimeout)
	_ = client.SetDeadline(deadline)
	_ = up.SetDeadline(deadline)
	<-done
}

// refusalLog keeps the latest refusals in a ring, numbered in order.
type refusalLog struct {
	mu   sync.Mutex
	next uint64    // the number the next refusal gets
	ring []Refusal // refusal n is at n % len(ring)
}

func (l *refusalLog) add(r Refusal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.next%uint64(len(l.ring))] = r
	l.next++
}

func (l *refusalLog) mark() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

func (l *refusalLog) since(mark uint64) []Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := uint64(len(l.ring))
	first := mark
	if l.next > n && first < l.next-n {
		first = l.next - n
	}
	var out []Refusal
	for i := first; i < l.next; i++ {
		out = append(out, l.ring[i%n])
	}
	return out
}
