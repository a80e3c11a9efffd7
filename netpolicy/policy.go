// Package netpolicy is the one network policy of toolhost: which hosts and
// addresses a tool may reach. The network module, the chrome module (through
// a filtering proxy) and sandboxed commands all ask it the same way.
//
// A [Policy] comes from a [Config] (the keys allow_hosts, deny_hosts and
// allow_private of a module's config block) through [Compile]. It is asked
// twice: [Policy.CheckName] on a host name before anything is resolved (a
// URL, a redirect, a CONNECT target), and again on each address the host
// resolves to, at dial time, so that what is checked is what is connected
// to. [Dialer] does both and dials only checked addresses; [Proxy] is a
// forward HTTP proxy whose every upstream connection goes through a Dialer.
//
// By default loopback, private, link-local (the cloud metadata address
// 169.254.169.254 included), CGNAT, unspecified, multicast and broadcast
// addresses are refused, also in their IPv4-mapped, IPv4-compatible and
// NAT64 forms. An IP or CIDR entry in allow_hosts lifts that for its range,
// allow_private lifts it entirely, and deny_hosts always wins.
package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"
)

// Config is the policy as a module's config block holds it; every module
// that reaches the network embeds it, so the keys are the same everywhere.
type Config struct {
	// AllowHosts, when not empty, are the only hosts that may be reached:
	// host names, *.example.com wildcards, IPs or CIDRs. An IP or CIDR entry
	// also lifts the block on special addresses for its range.
	AllowHosts []string `json:"allow_hosts"`
	// DenyHosts are hosts never reached, in the same forms; deny wins over
	// allow.
	DenyHosts []string `json:"deny_hosts"`
	// AllowPrivate lifts the block on loopback, private, link-local and
	// other special addresses entirely.
	AllowPrivate bool `json:"allow_private"`
}

// Rules a [Refusal] names besides the kind of a special address.
const (
	RuleDenyHosts  = "deny_hosts"  // a deny_hosts entry matched
	RuleAllowHosts = "allow_hosts" // allow_hosts is set and no entry matched
)

// Refusal is the error of a host or address the policy refuses; find it with
// [errors.As].
type Refusal struct {
	// Host is the host as it was asked about: a name or an IP literal.
	Host string
	// Addr is the address refused at dial time; invalid (the zero Addr) for
	// a refusal by name.
	Addr netip.Addr
	// Rule is what refused it: [RuleDenyHosts], [RuleAllowHosts], or the kind of
	// special address ("a loopback address", "a link-local address" ...).
	Rule string
	// Upstream is the refusal in the words of an upstream proxy that
	// refused ([Dialer.Upstream]); empty for a refusal made here.
	Upstream string
}

// Error reads like "127.0.0.1 resolves to 127.0.0.1, a loopback address:
// refused" or "host evil.example is in deny_hosts: refused"; a refusal by
// an upstream proxy reads as that proxy put it.
func (r *Refusal) Error() string {
	switch {
	case r.Upstream != "":
		return r.Upstream
	case !r.Addr.IsValid() && r.Rule == RuleDenyHosts:
		return fmt.Sprintf("host %s is in deny_hosts: refused", r.Host)
	case !r.Addr.IsValid():
		return fmt.Sprintf("host %s is not in allow_hosts: refused", r.Host)
	case r.Rule == RuleDenyHosts:
		return fmt.Sprintf("%s resolves to %s, which is in deny_hosts: refused", r.Host, r.Addr)
	case r.Rule == RuleAllowHosts:
		return fmt.Sprintf("%s resolves to %s, which is not in allow_hosts: refused", r.Host, r.Addr)
	}
	return fmt.Sprintf("%s resolves to %s, %s: refused", r.Host, r.Addr, r.Rule)
}

// Policy is a compiled [Config]. The zero Policy is the default: any public
// host, no special address. A Policy is never changed, so any number of
// goroutines may use it.
type Policy struct {
	allow, deny  hostList
	allowPrivate bool
}

// Compile checks and compiles c; an error names the key and the entry.
func Compile(c Config) (*Policy, error) {
	allow, err := parseHostList(RuleAllowHosts, c.AllowHosts)
	if err != nil {
		return nil, err
	}
	deny, err := parseHostList(RuleDenyHosts, c.DenyHosts)
	if err != nil {
		return nil, err
	}
	return &Policy{allow: allow, deny: deny, allowPrivate: c.AllowPrivate}, nil
}

// CheckName is the check made before any resolution, on a URL's host, on
// each redirect's and on a CONNECT target: host is refused when a deny entry
// names it, or when allow_hosts is set and does not name it (a host name
// must match a name or wildcard entry, an IP literal an IP or CIDR entry).
// An IP literal's address is judged when it is dialled (see permit).
func (p *Policy) CheckName(host string) error {
	h := normHost(host)
	ip, isIP := parseIP(h)
	if p.deny.matchName(h) || isIP && p.deny.matchAddr(ip) {
		return &Refusal{Host: host, Rule: RuleDenyHosts}
	}
	switch {
	case p.allow.empty(), isIP && p.allow.matchAddr(ip), !isIP && p.allow.matchName(h):
		return nil
	}
	return &Refusal{Host: host, Rule: RuleAllowHosts}
}

// permit is the check made at dial time on each address host resolved to:
// deny entries (by name or address) always win; then allow_hosts, when set,
// must match the name or the address; then the address must not be special
// (loopback, private ...) unless allow_private is set or an allow_hosts IP
// or CIDR entry covers it.
func (p *Policy) permit(host string, ip netip.Addr) error {
	h := normHost(host)
	ip = ip.WithZone("").Unmap()
	if p.deny.matchName(h) || p.deny.matchAddr(ip) {
		return &Refusal{Host: host, Addr: ip, Rule: RuleDenyHosts}
	}
	allowedByAddr := p.allow.matchAddr(ip)
	if !p.allow.empty() && !allowedByAddr && !p.allow.matchName(h) {
		return &Refusal{Host: host, Addr: ip, Rule: RuleAllowHosts}
	}
	if kind := classify(ip); kind != "" && !p.allowPrivate && !allowedByAddr {
		return &Refusal{Host: host, Addr: ip, Rule: kind}
	}
	return nil
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
	if a, ok := parseIP(e); ok {
		l.prefixes = append(l.prefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	name := normHost(e)
	wildcard := strings.HasPrefix(name, "*.")
	if !validName(strings.TrimPrefix(name, "*.")) {
		return fmt.Errorf("entry %q: not a host name, *.wildcard, IP or CIDR", entry)
	}
	if wildcard {
		l.suffixes = append(l.suffixes, name[1:])
	} else {
		l.names[name] = true
	}
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
	v4, embeds := carried(ip)
	for _, p := range l.prefixes {
		if p.Contains(ip) || embeds && p.Contains(v4) {
			return true
		}
	}
	return false
}

// carried returns the IPv4 address an IPv4-compatible or NAT64 IPv6 address
// carries (an IPv4-mapped one is unmapped before it gets here).
func carried(ip netip.Addr) (netip.Addr, bool) {
	if ip.Is6() && (nat64.Contains(ip) || ipv4Compat.Contains(ip) && !ip.IsUnspecified() && !ip.IsLoopback()) {
		b := ip.As16()
		return netip.AddrFrom4([4]byte(b[12:])), true
	}
	return netip.Addr{}, false
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

// classify names the kind of a special address ("a loopback address", "a
// private address" ...) that may not be reached by default, or returns ""
// for an ordinary public address. IPv4-mapped, IPv4-compatible and NAT64
// forms are judged by the IPv4 address they carry.
func classify(ip netip.Addr) string {
	ip = ip.WithZone("").Unmap()
	if v4, ok := carried(ip); ok {
		return classify(v4)
	}
	switch {
	case !ip.IsValid():
		return "an invalid address"
	case ip.IsUnspecified(), thisNet.Contains(ip):
		return "an unspecified address"
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsPrivate():
		return "a private address"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address"
	case ip.IsMulticast():
		return "a multicast address"
	case ip == broadcast:
		return "a broadcast address"
	case cgnat.Contains(ip):
		return "a CGNAT (100.64.0.0/10) address"
	}
	return ""
}
