// Package redact scrubs secrets from text and from JSON values before they
// leave toolhost: tool results returned to callers and audit event payloads.
//
// A secret is replaced by ***REDACTED*** and only the secret: the context around it
// stays readable ("OPENAI_API_KEY=***REDACTED***",
// "Authorization: Bearer ***REDACTED***"). [String] recognises
//
//   - assignments to secret-looking names (NAME=value, NAME: value,
//     "NAME": "value", export NAME=value, ?access_token=...&);
//   - Authorization values and standalone "Bearer <token>";
//   - PEM private key blocks;
//   - well-known key shapes (OpenAI/Anthropic sk-, GitHub, AWS access key
//     ids, Slack, Google API keys, Stripe live keys, JWTs);
//   - the password of a URL with credentials (scheme://user:password@host).
//
// A secret-looking name, ignoring case, ends with a separator (_ - .) and a
// word such as token, secret, password, passwd, pass, pwd, key or apikey, or
// is token, secret, password, passwd, apikey or authorization: GITHUB_TOKEN,
// db.password, --api-key, X-Auth-Token. KEY, PWD and monkey are not. An assigned value is kept when it cannot be the secret: empty,
// a reference ($VAR, ${VAR}, $(cmd)), a slot (%s, {name}), null/true/false,
// the lookup of an environment variable ([os.Getenv]("API_KEY")) or an empty
// call (getToken()); a name that ends a path (open /etc/passwd: ...) is not
// assigned to.
//
// Redaction is idempotent: the mask is never redacted again, and redacting
// redacted text reports no change. Text without any of the bytes the rules
// are anchored on is returned at once, without allocating.
package redact

import (
	"cmp"
	"slices"
	"strings"
)

// mask replaces every secret.
const mask = "***REDACTED***"

// String returns s with every secret replaced by ***REDACTED***, and whether anything was replaced.
func String(s string) (string, bool) {
	spans := find(s, nil, span{0, len(s)})
	if spans == nil {
		return s, false
	}
	for range maxPasses {
		var masks []span
		s, masks = replace(s, spans)
		spans = nil
		for _, line := range lines(s, masks) {
			spans = find(s, spans, line)
		}
		if spans == nil {
			break
		}
	}
	return s, true
}

// maxPasses bounds how often String looks again at what it replaced. A
// replacement can expose a match that the original text hid (a value that
// ran into a private key block now ends at the mask), so String repeats
// until nothing changes; in practice the second look finds nothing. No match
// but a private key block spans lines, and a replaced block cannot become a
// new one, so only the lines holding a new mask need another look.
const maxPasses = 8

// A span is a byte range [start, end) of a string to replace with mask.
type span struct{ start, end int }

// A matcher looks at s around i, where s[i] is the byte its rule is
// anchored on, and returns the range to replace (end <= start: none). It is
// given what it memoised at the earlier hits of the same scan, which come in
// increasing order, and returns what to keep for the next ones.
type matcher func(s string, i int, m memo) (start, end int, next memo)

// A memo keeps a scan linear: the runs of bytes a matcher has measured, so
// that hits inside them are not measured again (without it, each '=' of
// "a_token=a_token=..." would rescan the rest of the line). Its meaning
// belongs to the matcher.
type memo struct {
	from, to int  // a run of bytes, measured from from
	cut      int  // assignment: where a value in the run ends
	lit      span // assignment: the string literal the run's code hands over
}

// A rule is a matcher, the byte it is anchored on, and the bytes that may
// precede that byte in a match. Scanning for a byte with strings.IndexByte
// is far cheaper than looking at every position, so rules are anchored on
// bytes that are rare in ordinary command output, and the byte before each
// hit is checked before the matcher runs: text without the anchors costs a
// few vector scans and no allocation.
type rule struct {
	anchor byte
	before *byteSet
	match  matcher
}

var rules = append([]rule{
	{'=', opBefore, assignment},
	{':', opBefore, assignment},
	{'@', userinfoBytes, urlPassword},
	{'B', nonWordBytes, bearer},
	{'B', setOf("-"), privateKeyBlock},
	{'J', setOf("y"), jwt},
}, shapeRules()...)

// find appends to spans the matches within s[in.start:in.end], as ranges of s.
func find(s string, spans []span, in span) []span {
	w := s[in.start:in.end]
	for _, r := range rules {
		var m memo
		for i := 0; ; i++ {
			j := strings.IndexByte(w[i:], r.anchor)
			if j < 0 {
				break
			}
			i += j
			if i > 0 && !r.before[w[i-1]] {
				continue
			}
			var start, end int
			if start, end, m = r.match(w, i, m); start < end {
				spans = append(spans, span{in.start + start, in.start + end})
			}
		}
	}
	return spans
}

// replace replaces each range of spans in s by mask, overlapping and
// touching ranges by a single mask, and returns the ranges of the masks.
func replace(s string, spans []span) (string, []span) {
	slices.SortFunc(spans, func(x, y span) int { return cmp.Compare(x.start, y.start) })
	var b strings.Builder
	b.Grow(len(s) + len(spans)*len(mask))
	var masks []span
	done := 0 // s[:done] is written
	for k := 0; k < len(spans); {
		start, end := spans[k].start, spans[k].end
		for k++; k < len(spans) && spans[k].start <= end; k++ {
			end = max(end, spans[k].end)
		}
		b.WriteString(s[done:start])
		masks = append(masks, span{b.Len(), b.Len() + len(mask)})
		b.WriteString(mask)
		done = end
	}
	b.WriteString(s[done:])
	return b.String(), masks
}

// lines returns the lines of s that hold the ranges, sorted, with their
// newlines; ranges on one line give one.
func lines(s string, ranges []span) []span {
	var list []span
	for _, r := range ranges {
		if n := len(list); n > 0 && r.start < list[n-1].end {
			continue
		}
		line := span{strings.LastIndexByte(s[:r.start], '\n') + 1, len(s)}
		if k := strings.IndexByte(s[r.end:], '\n'); k >= 0 {
			line.end = r.end + k + 1
		}
		list = append(list, line)
	}
	return list
}

// byteSet is a set of bytes.
type byteSet [256]bool

const (
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lower  = "abcdefghijklmnopqrstuvwxyz"
	digits = "0123456789"
	alnum  = upper + lower + digits
	blank  = " \t"
	space  = " \t\r\n\v\f"
	quotes = `"'`
)

// setOf returns the set of the bytes of chars.
func setOf(chars string) *byteSet {
	var t byteSet
	for i := range len(chars) {
		t[chars[i]] = true
	}
	return &t
}

// setExcept returns the set of all bytes but those of chars.
func setExcept(chars string) *byteSet {
	t := setOf(chars)
	for i := range t {
		t[i] = !t[i]
	}
	return t
}

// union returns the set of the bytes in any of sets.
func union(sets ...*byteSet) *byteSet {
	var t byteSet
	for _, set := range sets {
		for c, in := range set {
			t[c] = t[c] || in
		}
	}
	return &t
}

// span returns the length of the longest prefix of s made of bytes in t.
func (t *byteSet) span(s string) int {
	i := 0
	for i < len(s) && t[s[i]] {
		i++
	}
	return i
}

// spanBack returns the length of the longest suffix of s made of bytes in t.
func (t *byteSet) spanBack(s string) int {
	i := len(s)
	for i > 0 && t[s[i-1]] {
		i--
	}
	return len(s) - i
}

var (
	wordBytes    = setOf(alnum + "_")
	nonWordBytes = setExcept(alnum + "_")
	blankBytes   = setOf(blank)
	quoteBytes   = setOf(quotes)
)

// wordBefore reports whether s[i-1] exists and is a word byte, that is
// whether a match starting at i would not start a word.
func wordBefore(s string, i int) bool { return i > 0 && wordBytes[s[i-1]] }
