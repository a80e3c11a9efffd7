package netpolicy

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// specialAddrs is every kind of address refused by default, one row an
// attack: the address a hostile name resolves to (or a URL names), and the
// rule that must refuse it.
var specialAddrs = []struct{ ip, rule string }{
	{"127.0.0.1", "a loopback address"},
	{"127.5.5.5", "a loopback address"},
	{"127.255.255.254", "a loopback address"},
	{"::1", "a loopback address"},
	{"::ffff:127.0.0.1", "a loopback address"},
	{"64:ff9b::7f00:1", "a loopback address"}, // NAT64 of 127.0.0.1
	{"::127.0.0.1", "a loopback address"},     // IPv4-compatible
	{"10.0.0.1", "a private address"},
	{"10.255.255.255", "a private address"},
	{"172.16.0.1", "a private address"},
	{"172.31.255.255", "a private address"},
	{"192.168.1.1", "a private address"},
	{"fc00::1", "a private address"},
	{"fd12:3456::1", "a private address"},
	{"fd00:ec2::254", "a private address"}, // the IPv6 cloud metadata address
	{"::ffff:10.1.2.3", "a private address"},
	{"::ffff:192.168.0.1", "a private address"},
	{"64:ff9b::a00:1", "a private address"}, // NAT64 of 10.0.0.1
	{"169.254.169.254", "a link-local address"},
	{"169.254.0.1", "a link-local address"},
	{"::ffff:169.254.169.254", "a link-local address"},
	{"::169.254.169.254", "a link-local address"},
	{"64:ff9b::a9fe:a9fe", "a link-local address"}, // NAT64 of 169.254.169.254
	{"fe80::1", "a link-local address"},
	{"fe80::1%eth0", "a link-local address"},
	{"0.0.0.0", "an unspecified address"},
	{"0.1.2.3", "an unspecified address"},
	{"::", "an unspecified address"},
	{"::ffff:0.0.0.0", "an unspecified address"},
	{"224.0.0.1", "a link-local address"}, // link-local multicast
	{"239.1.2.3", "a multicast address"},
	{"ff02::1", "a link-local address"},
	{"ff0e::1", "a multicast address"},
	{"::ffff:239.1.2.3", "a multicast address"},
	{"255.255.255.255", "a broadcast address"},
	{"100.64.0.1", "a CGNAT (100.64.0.0/10) address"},
	{"100.127.255.254", "a CGNAT (100.64.0.0/10) address"},
	{"::ffff:100.64.0.1", "a CGNAT (100.64.0.0/10) address"},
}

// publicAddrs are ordinary addresses, some beside the special ranges.
var publicAddrs = []string{
	"8.8.8.8", "1.1.1.1", "93.184.216.34", "172.15.255.255", "172.32.0.1", "100.63.255.255",
	"100.128.0.1", "::ffff:8.8.8.8", "2001:4860::8888", "2606:4700:4700::1111", "64:ff9b::808:808",
}

// TestClassify: every refused range, in every form, and a few public
// addresses, through classify and the default policy; nothing is dialled.
func TestClassify(t *testing.T) {
	var def Policy
	for _, tc := range specialAddrs {
		ip := netip.MustParseAddr(tc.ip)
		if got := classify(ip); got != tc.rule {
			t.Errorf("classify(%s) = %q, want %q", tc.ip, got, tc.rule)
		}
		err := def.permit("h.example", ip)
		var ref *Refusal
		if !errors.As(err, &ref) || ref.Rule != tc.rule || ref.Host != "h.example" || ref.Addr != ip.WithZone("").Unmap() {
			t.Errorf("Permit(%s) = %#v, want a refusal by %q", tc.ip, err, tc.rule)
			continue
		}
		if want := "h.example resolves to " + ref.Addr.String() + ", " + tc.rule + ": refused"; err.Error() != want {
			t.Errorf("Permit(%s) = %q, want %q", tc.ip, err, want)
		}
	}
	for _, s := range publicAddrs {
		ip := netip.MustParseAddr(s)
		if got := classify(ip); got != "" {
			t.Errorf("classify(%s) = %q, want public", s, got)
		}
		if err := def.permit("h.example", ip); err != nil {
			t.Errorf("Permit(%s) = %v", s, err)
		}
	}
}

func mustCompile(t testing.TB, c Config) *Policy {
	t.Helper()
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRules: allow and deny by name, wildcard, IP and CIDR, before and after
// resolution.
func TestRules(t *testing.T) {
	p := mustCompile(t, Config{
		AllowHosts: []string{"api.example.com", "*.corp.example", "10.1.0.0/16", "::ffff:192.168.5.5", "[::1]"},
		DenyHosts:  []string{"bad.corp.example", "10.1.2.0/24"},
	})
	for _, tc := range []struct {
		host, ip string
		rule     string // "" means permitted
	}{
		{"api.example.com", "93.184.216.34", ""},
		{"API.Example.COM.", "93.184.216.34", ""},
		{"api.example.com", "127.0.0.1", "a loopback address"}, // an allowed name, but loopback
		{"x.corp.example", "8.8.8.8", ""},
		{"a.b.corp.example", "8.8.8.8", ""},
		{"corp.example", "8.8.8.8", RuleAllowHosts}, // the wildcard needs a subdomain
		{"bad.corp.example", "8.8.8.8", RuleDenyHosts},
		{"10.1.9.9", "10.1.9.9", ""}, // private, but an allow CIDR covers it
		{"10.1.2.3", "10.1.2.3", RuleDenyHosts},
		{"x.corp.example", "10.1.2.3", RuleDenyHosts}, // deny by resolved address
		{"x.corp.example", "::ffff:10.1.2.3", RuleDenyHosts},
		{"192.168.5.5", "192.168.5.5", ""},
		{"192.168.5.6", "192.168.5.6", RuleAllowHosts},
		{"::1", "::1", ""},
		{"other.example.com", "8.8.8.8", RuleAllowHosts},
		{"x.corp.example", "172.16.0.1", "a private address"},
	} {
		err := p.permit(tc.host, netip.MustParseAddr(tc.ip))
		var ref *Refusal
		switch {
		case tc.rule == "" && err != nil:
			t.Errorf("Permit(%s, %s) = %v, want permitted", tc.host, tc.ip, err)
		case tc.rule != "" && (!errors.As(err, &ref) || ref.Rule != tc.rule):
			t.Errorf("Permit(%s, %s) = %v, want a refusal by %s", tc.host, tc.ip, err, tc.rule)
		}
	}
	for _, tc := range []struct{ host, rule string }{
		{"api.example.com", ""}, {"x.corp.example", ""}, {"10.1.9.9", ""}, {"[::ffff:10.1.9.9]", ""}, {"[::1]", ""},
		{"bad.corp.example", RuleDenyHosts}, {"BAD.corp.example.", RuleDenyHosts}, {"10.1.2.3", RuleDenyHosts},
		{"evil.example", RuleAllowHosts}, {"127.0.0.1", RuleAllowHosts}, {"corp.example", RuleAllowHosts},
	} {
		err := p.CheckName(tc.host)
		var ref *Refusal
		switch {
		case tc.rule == "" && err != nil:
			t.Errorf("CheckName(%s) = %v, want permitted", tc.host, err)
		case tc.rule != "" && (!errors.As(err, &ref) || ref.Rule != tc.rule || ref.Addr.IsValid() || ref.Host != tc.host):
			t.Errorf("CheckName(%s) = %#v, want a refusal by %s", tc.host, err, tc.rule)
		}
	}
	if err := p.CheckName("bad.corp.example"); err.Error() != "host bad.corp.example is in deny_hosts: refused" {
		t.Errorf("message %q", err)
	}
	if err := p.CheckName("evil.example"); err.Error() != "host evil.example is not in allow_hosts: refused" {
		t.Errorf("message %q", err)
	}
	if err := p.permit("x.corp.example", netip.MustParseAddr("10.1.2.3")); err.Error() != "x.corp.example resolves to 10.1.2.3, which is in deny_hosts: refused" {
		t.Errorf("message %q", err)
	}
	if err := p.permit("corp.example", netip.MustParseAddr("8.8.8.8")); err.Error() != "corp.example resolves to 8.8.8.8, which is not in allow_hosts: refused" {
		t.Errorf("message %q", err)
	}

	// allow_private lifts the address block, never deny_hosts.
	open := mustCompile(t, Config{AllowPrivate: true, DenyHosts: []string{"169.254.169.254", "fd00:ec2::254"}})
	// The metadata address in NAT64 and IPv4-compatible forms is denied as
	// the IPv4 address it carries.
	for ip, ok := range map[string]bool{"127.0.0.1": true, "10.0.0.1": true, "169.254.169.254": false, "::ffff:169.254.169.254": false, "fd00:ec2::254": false,
		"64:ff9b::a9fe:a9fe": false, "::a9fe:a9fe": false, "64:ff9b::a00:1": true} {
		if err := open.permit("h", netip.MustParseAddr(ip)); (err == nil) != ok {
			t.Errorf("allow_private: Permit(%s) = %v, want ok %v", ip, err, ok)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{AllowHosts: []string{"not a host"}}, `allow_hosts: entry "not a host": not a host name`},
		{Config{AllowHosts: []string{""}}, "allow_hosts: empty entry"},
		{Config{DenyHosts: []string{"10.0.0.0/99"}}, `deny_hosts: entry "10.0.0.0/99": not a CIDR`},
		{Config{DenyHosts: []string{"*."}}, `deny_hosts: entry "*."`},
		{Config{DenyHosts: []string{"a..b"}}, `deny_hosts: entry "a..b"`},
		{Config{DenyHosts: []string{"*.*.b"}}, `deny_hosts: entry "*.*.b"`},
	} {
		if _, err := Compile(tc.cfg); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Compile(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// drawFrom are special ranges and public ones, from which the property
// draws addresses.
var drawFrom = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("::ffff:0:0/96"), netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("::/96"), netip.MustParsePrefix("2000::/3"),
}

// drawAddr draws an address inside one of drawFrom.
func drawAddr(t *rapid.T, label string) netip.Addr {
	p := rapid.SampledFrom(drawFrom).Draw(t, label+" range")
	b := p.Addr().AsSlice()
	for i := range b {
		bits := min(max(p.Bits()-8*i, 0), 8) // the bits of byte i inside the prefix
		keep := byte(0xff) << (8 - bits)
		b[i] = b[i]&keep | rapid.Byte().Draw(t, label)&^keep
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// drawEntries draws allow or deny entries: IPs and CIDRs around drawn
// addresses (in the form written, the prefix meant) and names.
func drawEntries(t *rapid.T, label string) (entries []string, nets []netip.Prefix, names []string) {
	for range rapid.IntRange(0, 3).Draw(t, label+" count") {
		a := drawAddr(t, label)
		switch rapid.IntRange(0, 3).Draw(t, label+" form") {
		case 0:
			entries = append(entries, a.String())
			nets = append(nets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		case 1:
			p := netip.PrefixFrom(a, rapid.IntRange(0, a.BitLen()).Draw(t, label+" bits")).Masked()
			entries = append(entries, p.String())
			if a.Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			nets = append(nets, p)
		case 2:
			n := rapid.SampledFrom([]string{"a.test", "b.test", "localhost"}).Draw(t, label+" name")
			entries, names = append(entries, n), append(names, n)
		case 3:
			entries, names = append(entries, "*.test"), append(names, "a.test", "b.test")
		}
	}
	return entries, nets, names
}

// TestPermitProperty states the address rule and checks it on drawn
// policies and addresses: deny_hosts always wins; otherwise an address that
// classify calls special is refused unless allow_private or an allow_hosts
// IP/CIDR entry covers it; and a set allow_hosts must match the name or the
// address. Coverage is computed here from the drawn prefixes, not by the
// package's host lists; an entry covers a NAT64 or IPv4-compatible address
// when it covers the IPv4 address that carries.
func TestPermitProperty(t *testing.T) {
	nat64, compat := netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("::/96")
	covers := func(nets []netip.Prefix, ip netip.Addr) bool {
		inner := ip
		if nat64.Contains(ip) || compat.Contains(ip) && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback() {
			b := ip.As16()
			inner = netip.AddrFrom4([4]byte(b[12:]))
		}
		for _, n := range nets {
			if n.Contains(ip) || n.Contains(inner) {
				return true
			}
		}
		return false
	}
	rapid.Check(t, func(t *rapid.T) {
		allow, allowNets, allowNames := drawEntries(t, "allow")
		deny, denyNets, denyNames := drawEntries(t, "deny")
		private := rapid.Bool().Draw(t, "allow_private")
		p, err := Compile(Config{AllowHosts: allow, DenyHosts: deny, AllowPrivate: private})
		if err != nil {
			t.Fatalf("Compile: %v", err)
		}
		host := rapid.SampledFrom([]string{"a.test", "b.test", "c.example", "localhost"}).Draw(t, "host")
		ip := drawAddr(t, "ip")
		u := ip.Unmap()
		var want string
		switch {
		case covers(denyNets, u) || slices.Contains(denyNames, host):
			want = RuleDenyHosts
		case len(allow) > 0 && !covers(allowNets, u) && !slices.Contains(allowNames, host):
			want = RuleAllowHosts
		case classify(ip) != "" && !private && !covers(allowNets, u):
			want = classify(ip)
		}
		err = p.permit(host, ip)
		var ref *Refusal
		switch {
		case want == "" && err != nil:
			t.Fatalf("Permit(%s, %s) = %v, want permitted", host, ip, err)
		case want != "" && (!errors.As(err, &ref) || ref.Rule != want):
			t.Fatalf("Permit(%s, %s) = %v, want a refusal by %s", host, ip, err, want)
		}
	})
}

// FuzzHostRules: parsing and matching never panic, and deny always wins: an
// address or name matched by a deny entry is never permitted, whatever the
// allow entries and allow_private say.
func FuzzHostRules(f *testing.F) {
	f.Add("127.0.0.1,*.example.com", "127.0.0.0/8", "localhost", "127.0.0.1", true)
	f.Add("example.com", "example.com", "EXAMPLE.com.", "93.184.216.34", false)
	f.Add("10.0.0.0/8,::ffff:10.0.0.1", "::ffff:10.0.0.0/104", "a.b", "10.0.0.1", true)
	f.Add("*.a.b", "x.a.b", "x.a.b", "::ffff:8.8.8.8", false)
	f.Add("::1", "::/0", "h", "fe80::1%eth0", true)
	f.Fuzz(func(t *testing.T, allow, deny, host, addr string, private bool) {
		p, err := Compile(Config{AllowHosts: strings.Split(allow, ","), DenyHosts: strings.Split(deny, ","), AllowPrivate: private})
		if err != nil {
			if p, err = Compile(Config{DenyHosts: strings.Split(deny, ","), AllowPrivate: private}); err != nil {
				return // an invalid deny list stops a module from loading
			}
		}
		_ = p.CheckName(host)
		ip, err := netip.ParseAddr(addr)
		if err != nil {
			return
		}
		_ = classify(ip)
		denied := p.deny.matchName(normHost(host)) || p.deny.matchAddr(ip.WithZone("").Unmap())
		if err := p.permit(host, ip); denied && err == nil {
			t.Fatalf("deny %q matches %s/%s, but Permit allowed it (allow %q)", deny, host, ip, allow)
		}
		hip, isIP := parseIP(host)
		if p.deny.matchName(normHost(host)) || isIP && p.deny.matchAddr(hip) {
			if err := p.CheckName(host); err == nil {
				t.Fatalf("deny %q matches %s, but CheckName allowed it", deny, host)
			}
		}
	})
}
