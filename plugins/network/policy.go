package main

import (
	"fmt"
	"net/netip"
	"strings"
)

// policyError is a refusal by the network policy; the handler turns it into
// a policy result wherever it surfaces (dial, redirect, URL check).
type policyError struct{ msg string }

func (e *policyError) Error() string { return e.msg }

func refuse(format string, args ...any) error {
	return &policyError{msg: fmt.Sprintf(format, args...)}
}

// hostList is a parsed allow_hosts or deny_hosts list.
type hostList struct {
	names    map[string]bool // exact host names, lower case, no trailing dot
	suffixes []string        // from "*.example.com": ".example.com"
	prefixes []netip.Prefix  // IPs (as /32 or /128) and CIDRs, unmapped
}

// parseHostList parses entries: host names, "*.example.com" wildcards, IP
// addresses or CIDRs. key names the config key in errors.
func parseHostList(key string, entries []string) (hostList, error) {
	l := hostList{names: map[string]bool{}}
	for _, e := range entries {
		if err := l.add(e); err != nil {
			return hostList{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	return l, nil
}

func (l *hostList) add(entry string) error {
	e := strings.TrimSpace(entry)
	if e == "" {
		return fmt.Errorf("empty entry")
	}
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("entry %q: not a CIDR: %v", entry, err)
		}
		p = p.Masked()
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		l.prefixes = append(l.prefixes, p)
		return nil
	}
	if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
		a = a.WithZone("").Unmap()
		l.prefixes = append(l.prefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	name := normHost(e)
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		if !validName(rest) {
			return fmt.Errorf("entry %q: not a host name, *.wildcard, IP or CIDR", entry)
		}
		l.suffixes = append(l.suffixes, "."+rest)
		return nil
	}
	if !validName(name) {
		return fmt.Errorf("entry %q: not a host name, *.wildcard, IP or CIDR", entry)
	}
	l.names[name] = true
	return nil
}

// validName reports whether s looks like a host name: letters, digits,
// hyphens, underscores and dots, no empty label.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// normHost lower-cases a host name and drops a trailing dot.
func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

func (l *hostList) empty() bool {
	return len(l.names) == 0 && len(l.suffixes) == 0 && len(l.prefixes) == 0
}

func (l *hostList) hasAddrs() bool { return len(l.prefixes) > 0 }

// matchName reports whether the host name (normalised) matches a name or a
// wildcard entry.
func (l *hostList) matchName(host string) bool {
	if host == "" {
		return false
	}
	if l.names[host] {
		return true
	}
	for _, s := range l.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// matchAddr reports whether ip (unmapped) lies in an IP or CIDR entry.
func (l *hostList) matchAddr(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	for _, p := range l.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// rules is the whole policy of the config.
type rules struct {
	allow, deny  hostList
	allowPrivate bool
}

// checkName is the check made before any resolution, on a request's URL and
// on each redirect: host (from the URL) is refused when a deny entry names it,
// or when allow_hosts is set and does not name it (a host name must match a
// name or wildcard entry, an IP literal an IP or CIDR entry).
func (r *rules) checkName(host string) error {
	h := normHost(host)
	ip, isIP := parseIP(h)
	if r.deny.matchName(h) || isIP && r.deny.matchAddr(ip) {
		return refuse("host %s is in deny_hosts: refused", host)
	}
	switch {
	case r.allow.empty(), isIP && r.allow.matchAddr(ip), !isIP && r.allow.matchName(h):
		return nil
	}
	return refuse("host %s is not in allow_hosts: refused", host)
}

// permit is the check made at dial time on each address host resolved to:
// deny entries (by name or address) always win; then allow_hosts, when set,
// must match the name or the address; then the address must not be special
// (loopback, private, ...) unless allow_private is set or an allow_hosts IP
// or CIDR entry covers it.
func (r *rules) permit(host string, ip netip.Addr) error {
	h := normHost(host)
	ip = ip.WithZone("").Unmap()
	if r.deny.matchName(h) || r.deny.matchAddr(ip) {
		return refuse("%s resolves to %s, which is in deny_hosts: refused", host, ip)
	}
	allowedByAddr := r.allow.matchAddr(ip)
	if !r.allow.empty() && !allowedByAddr && !r.allow.matchName(h) {
		return refuse("%s resolves to %s, which is not in allow_hosts: refused", host, ip)
	}
	if kind := classify(ip); kind != "" && !r.allowPrivate && !allowedByAddr {
		return refuse("%s resolves to %s, %s address: refused", host, ip, kind)
	}
	return nil
}

// parseIP parses an IP literal, brackets and zone allowed, unmapped.
func parseIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

var (
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	thisNet    = netip.MustParsePrefix("0.0.0.0/8")
	broadcast  = netip.MustParseAddr("255.255.255.255")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	ipv4Compat = netip.MustParsePrefix("::/96")
)

// classify names the kind of a special address ("a loopback", "a private",
// ...) that requests may not reach by default, or returns "" for an ordinary
// public address. IPv4-mapped, IPv4-compatible and NAT64 forms are judged by
// the IPv4 address they carry.
func classify(ip netip.Addr) string {
	ip = ip.WithZone("").Unmap()
	if ip.Is6() && (nat64.Contains(ip) || ipv4Compat.Contains(ip) && !ip.IsUnspecified() && !ip.IsLoopback()) {
		b := ip.As16()
		return classify(netip.AddrFrom4([4]byte(b[12:])))
	}
	switch {
	case !ip.IsValid():
		return "an invalid"
	case ip.IsUnspecified(), thisNet.Contains(ip):
		return "an unspecified"
	case ip.IsLoopback():
		return "a loopback"
	case ip.IsPrivate():
		return "a private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local"
	case ip.IsMulticast():
		return "a multicast"
	case ip == broadcast:
		return "a broadcast"
	case cgnat.Contains(ip):
		return "a CGNAT (100.64.0.0/10)"
	}
	return ""
}
