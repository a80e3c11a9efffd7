package main

import (
	"net/netip"
	"strings"
	"testing"
)

// TestClassify covers every refused range, IPv4-mapped forms included, and
// a few public addresses; it never dials.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		ip, kind string // kind "" means allowed
	}{
		{"127.0.0.1", "a loopback"},
		{"127.255.255.254", "a loopback"},
		{"::1", "a loopback"},
		{"::ffff:127.0.0.1", "a loopback"},
		{"10.0.0.1", "a private"},
		{"10.255.255.255", "a private"},
		{"172.16.0.1", "a private"},
		{"172.31.255.255", "a private"},
		{"192.168.1.1", "a private"},
		{"fc00::1", "a private"},
		{"fd12:3456::1", "a private"},
		{"::ffff:10.1.2.3", "a private"},
		{"::ffff:192.168.0.1", "a private"},
		{"169.254.169.254", "a link-local"},
		{"169.254.0.1", "a link-local"},
		{"::ffff:169.254.169.254", "a link-local"},
		{"fe80::1", "a link-local"},
		{"fe80::1%eth0", "a link-local"},
		{"0.0.0.0", "an unspecified"},
		{"0.1.2.3", "an unspecified"},
		{"::", "an unspecified"},
		{"::ffff:0.0.0.0", "an unspecified"},
		{"224.0.0.1", "a link-local"}, // link-local multicast
		{"239.1.2.3", "a multicast"},
		{"ff02::1", "a link-local"},
		{"ff0e::1", "a multicast"},
		{"::ffff:239.1.2.3", "a multicast"},
		{"255.255.255.255", "a broadcast"},
		{"100.64.0.1", "a CGNAT (100.64.0.0/10)"},
		{"100.127.255.254", "a CGNAT (100.64.0.0/10)"},
		{"::ffff:100.64.0.1", "a CGNAT (100.64.0.0/10)"},
		{"64:ff9b::7f00:1", "a loopback"}, // NAT64 of 127.0.0.1
		{"::127.0.0.1", "a loopback"},     // IPv4-compatible
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.216.34", ""},
		{"172.15.255.255", ""},
		{"172.32.0.1", ""},
		{"100.63.255.255", ""},
		{"100.128.0.1", ""},
		{"::ffff:8.8.8.8", ""},
		{"2001:4860::8888", ""},
		{"2606:4700:4700::1111", ""},
	} {
		ip := netip.MustParseAddr(tc.ip)
		if got := classify(ip); got != tc.kind {
			t.Errorf("classify(%s) = %q, want %q", tc.ip, got, tc.kind)
		}
		// The same through the default rules, as the dialer uses them.
		err := (&rules{}).permit("h.example", ip)
		if (err == nil) != (tc.kind == "") {
			t.Errorf("permit(%s) = %v", tc.ip, err)
		}
		if err != nil && !strings.HasSuffix(err.Error(), tc.kind+" address: refused") {
			t.Errorf("permit(%s) = %v", tc.ip, err)
		}
	}
}

func mustRules(t testing.TB, allow, deny []string, private bool) *rules {
	t.Helper()
	a, err := parseHostList("allow_hosts", allow)
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseHostList("deny_hosts", deny)
	if err != nil {
		t.Fatal(err)
	}
	return &rules{allow: a, deny: d, allowPrivate: private}
}

func TestRules(t *testing.T) {
	r := mustRules(t, []string{"api.example.com", "*.corp.example", "10.1.0.0/16", "::ffff:192.168.5.5"}, []string{"bad.corp.example", "10.1.2.0/24"}, false)
	for _, tc := range []struct {
		host, ip string
		ok       bool
	}{
		{"api.example.com", "93.184.216.34", true},
		{"API.Example.COM.", "93.184.216.34", true},
		{"api.example.com", "127.0.0.1", false}, // allowed name, but loopback
		{"x.corp.example", "8.8.8.8", true},
		{"a.b.corp.example", "8.8.8.8", true},
		{"corp.example", "8.8.8.8", false}, // the wildcard needs a subdomain
		{"bad.corp.example", "8.8.8.8", false},
		{"10.1.9.9", "10.1.9.9", true}, // private, but an allow CIDR covers it
		{"10.1.2.3", "10.1.2.3", false},
		{"x.corp.example", "10.1.2.3", false}, // deny by resolved address
		{"192.168.5.5", "192.168.5.5", true},
		{"192.168.5.6", "192.168.5.6", false},
		{"other.example.com", "8.8.8.8", false},
	} {
		err := r.permit(tc.host, netip.MustParseAddr(tc.ip))
		if (err == nil) != tc.ok {
			t.Errorf("permit(%s, %s) = %v, want ok %v", tc.host, tc.ip, err, tc.ok)
		}
	}
	for host, ok := range map[string]bool{
		"api.example.com": true, "x.corp.example": true, "bad.corp.example": false,
		"10.1.9.9": true, "10.1.2.3": false, "evil.example": false, "[::ffff:10.1.9.9]": true,
	} {
		if err := r.checkName(host); (err == nil) != ok {
			t.Errorf("checkName(%s) = %v, want ok %v", host, err, ok)
		}
	}
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
		var r rules
		var err error
		if r.allow, err = parseHostList("allow_hosts", strings.Split(allow, ",")); err != nil {
			r.allow, _ = parseHostList("allow_hosts", nil)
		}
		if r.deny, err = parseHostList("deny_hosts", strings.Split(deny, ",")); err != nil {
			return // an invalid deny list stops the plugin from loading
		}
		r.allowPrivate = private
		_ = r.checkName(host)
		ip, err := netip.ParseAddr(addr)
		if err != nil {
			return
		}
		_ = classify(ip)
		denied := r.deny.matchName(normHost(host)) || r.deny.matchAddr(ip.WithZone("").Unmap())
		if err := r.permit(host, ip); denied && err == nil {
			t.Fatalf("deny %q matches %s/%s, but permit allowed it (allow %q)", deny, host, ip, allow)
		}
		if hip, ok := parseIP(host); ok && r.deny.matchAddr(hip) {
			if err := r.checkName(host); err == nil {
				t.Fatalf("deny %q matches %s, but checkName allowed it", deny, host)
			}
		}
		if r.deny.matchName(normHost(host)) {
			if err := r.checkName(host); err == nil {
				t.Fatalf("deny %q matches %s, but checkName allowed it", deny, host)
			}
		}
	})
}
