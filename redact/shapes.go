package redact

import (
	"slices"
	"strings"
)

// A shape is a kind of key recognisable wherever it appears: a fixed prefix
// starting a word, then a body of at least min bytes of a set. An exact shape
// has exactly min body bytes and must end a word; any other takes the whole
// run of body bytes, so no part of a longer key stays visible.
type shape struct {
	prefix string
	anchor int // index in prefix, after the first, of the byte scanned for: a rare one
	body   *byteSet
	min    int
	exact  bool
}

var (
	b64urlBytes = setOf(alnum + "_-")
	alnumBytes  = setOf(alnum)
	upperDigits = setOf(upper + digits)
	slackBytes  = setOf(alnum + "-")
)

var shapes = []shape{
	{"sk-", 1, b64urlBytes, 20, false}, // OpenAI, Anthropic (sk-proj-, sk-ant-)
	{"ghp_", 3, alnumBytes, 30, false}, // GitHub personal access token
	{"gho_", 3, alnumBytes, 30, false}, // GitHub OAuth
	{"ghu_", 3, alnumBytes, 30, false}, // GitHub user-to-server
	{"ghs_", 3, alnumBytes, 30, false}, // GitHub server-to-server
	{"ghr_", 3, alnumBytes, 30, false}, // GitHub refresh
	{"github_pat_", 6, wordBytes, 22, false},
	{"AKIA", 2, upperDigits, 16, true},  // AWS access key id
	{"ASIA", 2, upperDigits, 16, true},  // AWS temporary access key id
	{"xoxb-", 2, slackBytes, 10, false}, // Slack
	{"xoxp-", 2, slackBytes, 10, false},
	{"xoxa-", 2, slackBytes, 10, false},
	{"xoxr-", 2, slackBytes, 10, false},
	{"xoxs-", 2, slackBytes, 10, false},
	{"AIza", 1, b64urlBytes, 35, false},    // Google API key
	{"sk_live_", 2, alnumBytes, 16, false}, // Stripe secret key
	{"rk_live_", 2, alnumBytes, 16, false}, // Stripe restricted key
	{"thk_", 2, b64urlBytes, 43, false},    // toolhost's own tokens (store.NewSecret)
}

// shapeRules returns a rule for each byte the shapes are anchored on.
func shapeRules() []rule {
	var list []rule
	var groups [][]shape
	for _, sh := range shapes {
		b := sh.prefix[sh.anchor]
		k := slices.IndexFunc(list, func(r rule) bool { return r.anchor == b })
		if k < 0 {
			k = len(list)
			list = append(list, rule{anchor: b, before: new(byteSet)})
			groups = append(groups, nil)
		}
		list[k].before[sh.prefix[sh.anchor-1]] = true
		groups[k] = append(groups[k], sh)
	}
	for k := range list {
		list[k].match = matchShapes(groups[k])
	}
	return list
}

// matchShapes returns the matcher of shapes anchored on one byte; at most
// one prefix fits a hit. Its memo.to is the end of the last match: a hit
// before it lies in a run of body bytes that the match covers whole.
func matchShapes(group []shape) matcher {
	return func(s string, i int, m memo) (int, int, memo) {
		if i < m.to {
			return 0, 0, m
		}
		for _, sh := range group {
			start := i - sh.anchor
			if start < 0 || !strings.HasPrefix(s[start:], sh.prefix) || wordBefore(s, start) {
				continue
			}
			body := start + len(sh.prefix)
			n := sh.body.span(s[body:])
			if n < sh.min || (sh.exact && (n > sh.min || (body+n < len(s) && wordBytes[s[body+n]]))) {
				break
			}
			m.to = body + n
			return start, m.to, m
		}
		return 0, 0, m
	}
}

// jwt matches a JSON Web Token at the J of "eyJ": three base64url parts of
// at least 10 bytes each, joined by dots. Its memo.to is the end of the last
// first part measured: a hit before it is followed by the same other parts.
func jwt(s string, i int, m memo) (int, int, memo) {
	start := i - 2
	if i < m.to || start < 0 || s[start:i] != "ey" || wordBefore(s, start) {
		return 0, 0, m
	}
	end := start
	for part := range 3 {
		if part > 0 {
			if end == len(s) || s[end] != '.' {
				return 0, 0, m
			}
			end++
		}
		n := b64urlBytes.span(s[end:])
		if part == 0 {
			m.to = end + n
		}
		if n < 10 {
			return 0, 0, m
		}
		end += n
	}
	return start, end, m
}

var bearerBytes = setOf(alnum + "._~+/=-")

// bearer matches the token after a standalone "Bearer" (capitalised as
// clients send it; any case after the B): at least 8 bytes of token
// characters, but not a plain word ("Bearer authentication").
func bearer(s string, i int, m memo) (int, int, memo) {
	const word = "bearer"
	if len(s)-i < len(word) || !strings.EqualFold(s[i:i+len(word)], word) || wordBefore(s, i) {
		return 0, 0, m
	}
	start := i + len(word)
	if n := blankBytes.span(s[start:]); n > 0 {
		start += n
	} else {
		return 0, 0, m
	}
	tok := s[start : start+bearerBytes.span(s[start:])]
	if len(tok) < 8 || isPlainWord(tok) {
		return 0, 0, m
	}
	return start, start + len(tok), m
}

// isPlainWord reports whether w is letters, lower case but for the first.
func isPlainWord(w string) bool {
	return letterBytes[w[0]] && lowerBytes.span(w[1:]) == len(w)-1
}

var lowerBytes = setOf(lower)

var pemLabelBytes = setOf(upper + digits + " ")

// privateKeyBlock matches a PEM private key block at the B of its
// "-----BEGIN <label>-----", whose label names a PRIVATE KEY (RSA, EC,
// OPENSSH, ENCRYPTED, PGP ... BLOCK), through the matching
// "-----END <label>-----", or to the end of s if there is none. Its memo.to
// is the end of the last block: a BEGIN inside a block is part of it.
func privateKeyBlock(s string, i int, m memo) (int, int, memo) {
	const dashes = "-----"
	start := i - len(dashes)
	if i < m.to || start < 0 || !strings.HasPrefix(s[start:], dashes+"BEGIN ") {
		return 0, 0, m
	}
	l := i + len("BEGIN ")
	label := s[l : l+pemLabelBytes.span(s[l:])]
	rest := s[l+len(label):]
	if !strings.Contains(label, "PRIVATE KEY") || !strings.HasPrefix(rest, dashes) {
		return 0, 0, m
	}
	m.to = len(s)
	for from := len(s) - len(rest); ; {
		k := strings.Index(s[from:], dashes+"END ")
		if k < 0 {
			return start, m.to, m
		}
		from += k + len(dashes+"END ")
		if tail := s[from:]; strings.HasPrefix(tail, label) && strings.HasPrefix(tail[len(label):], dashes) {
			m.to = from + len(label) + len(dashes)
			return start, m.to, m
		}
	}
}

var (
	schemeBytes = setOf(alnum + "+.-")
	// userinfoBytes may make up the user information of a URL but for @.
	userinfoBytes = setExcept(space + quotes + "/?#<>\\`@")
)

// urlPassword matches the password of scheme://user:password@host at the
// first @ after "://": from the first colon to the last @ before the host,
// since passwords, and user names that are mail addresses, hold unescaped @s.
func urlPassword(s string, at int, m memo) (int, int, memo) {
	a := at - userinfoBytes.spanBack(s[:at])
	if !strings.HasSuffix(s[:a], "://") || schemeBytes.spanBack(s[:a-len("://")]) == 0 {
		return 0, 0, m
	}
	last := at
	for k := at + 1; k < len(s) && (userinfoBytes[s[k]] || s[k] == '@'); k++ {
		if s[k] == '@' {
			last = k
		}
	}
	colon := strings.IndexByte(s[a:last], ':')
	if colon < 0 || isPlaceholder(s[a+colon+1:last]) {
		return 0, 0, m
	}
	return a + colon + 1, last, m
}
