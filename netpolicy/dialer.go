package netpolicy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// defaultDialTimeout bounds one connection attempt of the default Dial.
const defaultDialTimeout = 30 * time.Second

// Dialer connects only where its [Policy] permits: it resolves the host
// itself, checks every address the host resolves to, refuses the connection
// when any is refused, and dials only checked addresses, so a name that
// resolves to a public address once and to 127.0.0.1 the next time (DNS
// rebinding) is refused when it matters. The zero Dialer uses the default
// policy, the system resolver and a plain TCP dial.
type Dialer struct {
	// Policy decides; nil means the default policy (the zero Policy).
	Policy *Policy
	// Resolve looks up the addresses of a host name; nil means the system
	// resolver. Tests replace it to decide without any lookup.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to one checked address ("ip:port"); nil means a
	// [net.Dialer] with a 30 s timeout. Tests replace it to decide without
	// opening a connection.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Upstream, when set, is an HTTP proxy ("host:port") that every
	// connection goes through with CONNECT: the proxy of a sandbox whose
	// network is "allowed", the only way out of it. The host is checked by
	// name here, then resolved and checked again by that proxy under the
	// sandbox's own policy; its refusal is a [*Refusal] here too.
	Upstream string
}

// Check resolves host (an IP literal stands for itself) and checks it as a
// dial would: CheckName, then each address it resolves to. It returns the
// addresses, or a [*Refusal], or the resolver's error.
func (d *Dialer) Check(ctx context.Context, host string) ([]netip.Addr, error) {
	p := d.policy()
	if err := p.CheckName(host); err != nil {
		return nil, err
	}
	var ips []netip.Addr
	if ip, ok := parseIP(host); ok {
		ips = []netip.Addr{ip}
	} else {
		resolve := d.Resolve
		if resolve == nil {
			resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		var err error
		if ips, err = resolve(ctx, host); err != nil {
			return nil, err
		}
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("%s: no addresses", host)
	}
	for _, ip := range ips {
		if err := p.permit(host, ip); err != nil {
			return nil, err
		}
	}
	return ips, nil
}

// DialContext connects to addr ("host:port") on network ("tcp", "tcp4",
// "tcp6"), after [Dialer.Check], trying the checked addresses in turn; its signature
// is [net.Dialer]'s, for [http.Transport] and the like.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if d.Upstream != "" {
		return d.dialUpstream(ctx, host, port)
	}
	ips, err := d.Check(ctx, host)
	if err != nil {
		return nil, err
	}
	dial := d.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: defaultDialTimeout}).DialContext
	}
	var firstErr error
	for _, ip := range ips {
		ip = ip.WithZone("").Unmap()
		if strings.HasSuffix(network, "4") && !ip.Is4() || strings.HasSuffix(network, "6") && !ip.Is6() {
			continue
		}
		conn, err := dial(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("%s: no %s address", host, network)
	}
	return nil, firstErr
}

// policy is d.Policy, or the default one.
func (d *Dialer) policy() *Policy {
	if d.Policy == nil {
		return &Policy{}
	}
	return d.Policy
}
