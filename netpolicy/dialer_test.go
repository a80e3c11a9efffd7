package netpolicy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
)

// fakeNet answers lookups from a table (a name's answers in turn, the last
// one repeated) and records dials, which it serves with an in-memory pipe:
// nothing here opens a connection.
type fakeNet struct {
	mu      sync.Mutex
	answers map[string][][]string
	lookups map[string]int
	dials   []string
}

func newFakeNet(answers map[string][][]string) *fakeNet {
	return &fakeNet{answers: answers, lookups: map[string]int{}}
}

func (f *fakeNet) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq, ok := f.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	ans := seq[min(f.lookups[host], len(seq)-1)]
	f.lookups[host]++
	var out []netip.Addr
	for _, a := range ans {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func (f *fakeNet) dial(_ context.Context, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials = append(f.dials, network+" "+addr)
	c, s := net.Pipe()
	s.Close()
	return c, nil
}

func (f *fakeNet) dialled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.dials)
}

func (f *fakeNet) dialer(p *Policy) *Dialer {
	return &Dialer{Policy: p, Resolve: f.resolve, Dial: f.dial}
}

// TestDialerRefusesSpecialAddresses: each special address, reached by a
// name that resolves to it and by the literal, is refused before any dial.
func TestDialerRefusesSpecialAddresses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range specialAddrs {
		t.Run(tc.ip, func(t *testing.T) {
			f := newFakeNet(map[string][][]string{"attack.test": {{tc.ip}}})
			d := f.dialer(nil)
			for _, addr := range []string{"attack.test:80", net.JoinHostPort(tc.ip, "443")} {
				_, err := d.DialContext(ctx, "tcp", addr)
				var ref *Refusal
				if !errors.As(err, &ref) || ref.Rule != tc.rule {
					t.Errorf("dial %s: %v, want a refusal by %q", addr, err, tc.rule)
				}
			}
			if got := f.dialled(); len(got) != 0 {
				t.Errorf("dialled %v", got)
			}
		})
	}
}

func TestDialer(t *testing.T) {
	ctx := context.Background()
	pol := mustCompile(t, Config{AllowHosts: []string{"*.test", "10.9.0.0/16"}, DenyHosts: []string{"denied.test"}})
	for _, tc := range []struct {
		name    string
		answers [][]string // what ok.test resolves to, lookup after lookup
		addr    string
		network string
		rule    string   // the refusal expected; "" for a connection
		dialled []string // what the fake dial saw
	}{
		{name: "public", answers: [][]string{{"93.184.216.34"}}, addr: "ok.test:80", dialled: []string{"tcp 93.184.216.34:80"}},
		{name: "every address tried in turn", answers: [][]string{{"2606:4700::1", "93.184.216.34"}}, addr: "ok.test:443", dialled: []string{"tcp [2606:4700::1]:443"}},
		{name: "tcp4 skips IPv6", answers: [][]string{{"2606:4700::1", "93.184.216.34"}}, addr: "ok.test:443", network: "tcp4", dialled: []string{"tcp4 93.184.216.34:443"}},
		{name: "an allow CIDR lifts the private block", answers: [][]string{{"10.9.1.1"}}, addr: "ok.test:80", dialled: []string{"tcp 10.9.1.1:80"}},
		{name: "public and private answers", answers: [][]string{{"93.184.216.34", "192.168.1.1"}}, addr: "ok.test:80", rule: "a private address"},
		{name: "public and metadata answers", answers: [][]string{{"93.184.216.34", "169.254.169.254"}}, addr: "ok.test:80", rule: "a link-local address"},
		{name: "mapped loopback answer", answers: [][]string{{"::ffff:127.0.0.1"}}, addr: "ok.test:80", rule: "a loopback address"},
		{name: "IPv6 metadata answer", answers: [][]string{{"fd00:ec2::254"}}, addr: "ok.test:80", rule: "a private address"},
		{name: "denied by name, never resolved", addr: "denied.test:80", rule: RuleDenyHosts},
		{name: "not in allow_hosts, never resolved", addr: "evil.example:80", rule: RuleAllowHosts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNet(map[string][][]string{"ok.test": tc.answers})
			conn, err := f.dialer(pol).DialContext(ctx, cmp.Or(tc.network, "tcp"), tc.addr)
			var ref *Refusal
			switch {
			case tc.rule == "" && err != nil:
				t.Fatalf("dial: %v", err)
			case tc.rule == "":
				conn.Close()
			case !errors.As(err, &ref) || ref.Rule != tc.rule:
				t.Fatalf("dial: %v, want a refusal by %q", err, tc.rule)
			}
			if got := f.dialled(); !slices.Equal(got, tc.dialled) {
				t.Errorf("dialled %q, want %q", got, tc.dialled)
			}
			if tc.rule == RuleDenyHosts || tc.rule == RuleAllowHosts {
				if len(f.lookups) != 0 {
					t.Errorf("looked up %v", f.lookups)
				}
			}
		})
	}
}

// TestDialerRebinding: a name that resolves to a public address when it is
// checked and to 127.0.0.1 at the next lookup is refused when dialled; the
// fake dial never runs.
func TestDialerRebinding(t *testing.T) {
	ctx := context.Background()
	f := newFakeNet(map[string][][]string{"rebind.test": {{"93.184.216.34"}, {"127.0.0.1"}}})
	d := f.dialer(mustCompile(t, Config{AllowHosts: []string{"rebind.test"}}))
	if ips, err := d.Check(ctx, "rebind.test"); err != nil || len(ips) != 1 {
		t.Fatalf("first check: %v, %v", ips, err)
	}
	_, err := d.DialContext(ctx, "tcp", "rebind.test:80")
	if err == nil || err.Error() != "rebind.test resolves to 127.0.0.1, a loopback address: refused" {
		t.Fatalf("dial after rebinding: %v", err)
	}
	if got := f.dialled(); len(got) != 0 {
		t.Errorf("dialled %v", got)
	}
}

func TestDialerErrors(t *testing.T) {
	ctx := context.Background()
	f := newFakeNet(map[string][][]string{"empty.test": {{}}, "v6.test": {{"2606:4700::1"}}})
	d := f.dialer(nil)
	var dnsErr *net.DNSError
	if _, err := d.DialContext(ctx, "tcp", "missing.test:80"); !errors.As(err, &dnsErr) {
		t.Errorf("unknown name: %v", err)
	}
	for addr, want := range map[string]string{
		"empty.test:80": "empty.test: no addresses",
		"v6.test:80":    "v6.test: no tcp4 address",
		"no-port.test":  "address no-port.test: missing port in address",
	} {
		if _, err := d.DialContext(ctx, "tcp4", addr); err == nil || err.Error() != want {
			t.Errorf("dial %s: %v, want %q", addr, err, want)
		}
	}
	failing := &Dialer{Resolve: f.resolve, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, fmt.Errorf("unreachable")
	}}
	if _, err := failing.DialContext(ctx, "tcp", "v6.test:80"); err == nil || err.Error() != "unreachable" {
		t.Errorf("failing dial: %v", err)
	}
	if len(f.dialled()) != 0 {
		t.Errorf("dialled %v", f.dialled())
	}
}
