package mcpsource

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxSummary bounds, in characters, a group description taken from a
// server's instructions.
const maxSummary = 160

// summary is a group description made from an MCP server's instructions,
// which are often Markdown written for a model: the first sentence of the
// first paragraph of prose (a heading when there is none), as plain text,
// at most maxSummary characters (cut at a word, ending in "…"). Code
// blocks, tables and rules are skipped; heading marks, list and quote
// markers, emphasis, inline code's backticks, links' and images' targets
// and HTML tags are dropped. It is "" when the instructions hold no text.
func summary(instructions string) string {
	heading := ""
	for _, p := range paragraphs(instructions) {
		text := plainText(cutText(p.text, maxMarkup))
		if text != "" && !p.heading {
			return bound(firstSentence(text), maxSummary)
		}
		if heading == "" {
			heading = text
		}
	}
	return bound(firstSentence(heading), maxSummary)
}

// maxMarkup bounds the Markdown of a paragraph that summary reads: far
// more than a sentence of maxSummary characters with its markup needs, and
// little enough that no paragraph costs much to read.
const maxMarkup = 4096

// cutText is at most the first n bytes of s, not splitting a character.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// paragraph is a block of Markdown text: the lines of a paragraph or a
// list item joined, or a heading's text.
type paragraph struct {
	text    string
	heading bool
}

var (
	fenceRE   = regexp.MustCompile("^(```|~~~)")
	headingRE = regexp.MustCompile(`^#{1,6}(\s+|$)`)
	ruleRE    = regexp.MustCompile(`^([-*_=]\s*){3,}$`)
	itemRE    = regexp.MustCompile(`^([-*+]|\d{1,9}[.)])\s+`)
	quoteRE   = regexp.MustCompile(`^(>\s?)+`)
)

// paragraphs splits Markdown into its paragraphs, headings and list items,
// leaving out fenced code, tables and rules.
func paragraphs(md string) []paragraph {
	var out []paragraph
	var cur []string
	end := func() {
		if len(cur) > 0 {
			out = append(out, paragraph{text: strings.Join(cur, " ")})
			cur = nil
		}
	}
	fence := ""
	for _, line := range strings.Split(md, "\n") {
		line = strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(line, fence) {
				fence = ""
			}
			continue
		}
		line = strings.TrimSpace(quoteRE.ReplaceAllString(line, ""))
		switch {
		case fenceRE.MatchString(line):
			end()
			fence = line[:3]
		case line == "" || strings.HasPrefix(line, "|"):
			end()
		case ruleRE.MatchString(line):
			// A setext underline makes the paragraph above it a heading.
			if len(cur) > 0 && (line[0] == '=' || line[0] == '-') {
				out = append(out, paragraph{text: strings.Join(cur, " "), heading: true})
				cur = nil
			}
			end()
		case headingRE.MatchString(line):
			end()
			text := strings.TrimRight(headingRE.ReplaceAllString(line, ""), "# ")
			out = append(out, paragraph{text: text, heading: true})
		case itemRE.MatchString(line):
			end()
			cur = append(cur, itemRE.ReplaceAllString(line, ""))
		default:
			cur = append(cur, line)
		}
	}
	end()
	return out
}

var (
	imageRE    = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	linkRE     = regexp.MustCompile(`\[([^\]]+)\](\([^)]*\)|\[[^\]]*\])`)
	autolinkRE = regexp.MustCompile(`<((?:https?|mailto):[^>\s]+)>`)
	tagRE      = regexp.MustCompile(`</?[A-Za-z][^>]*>`)
	strongRE   = regexp.MustCompile(`(\*\*|__)(\S(?:.*?\S)?)(\*\*|__)`)
	starRE     = regexp.MustCompile(`\*(\S(?:[^*]*\S)?)\*`)
	underRE    = regexp.MustCompile(`(^|[^\p{L}\p{N}_])_(\S(?:[^_]*\S)?)_([^\p{L}\p{N}_]|$)`)
	strikeRE   = regexp.MustCompile(`~~(.+?)~~`)
	escapeRE   = regexp.MustCompile("\\\\([\\\\`*_{}\\[\\]()#+\\-.!>~|])")
)

// plainText drops the inline Markdown of one paragraph. What is inside a
// code span stays as written, its backticks dropped; an escaped character
// stays as itself.
func plainText(md string) string {
	var b strings.Builder
	for len(md) > 0 {
		start := strings.IndexByte(md, '`')
		if start < 0 {
			b.WriteString(inline(md))
			break
		}
		ticks := len(md[start:]) - len(strings.TrimLeft(md[start:], "`"))
		body, ok := codeSpan(md[start+ticks:], ticks)
		if !ok { // no closing run: the backticks are text
			b.WriteString(inline(md[:start+ticks]))
			md = md[start+ticks:]
			continue
		}
		b.WriteString(inline(md[:start]))
		b.WriteString(strings.TrimSpace(body))
		md = md[start+ticks+len(body)+ticks:]
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// codeSpan returns the text of s before the first run of exactly ticks
// backticks, the end of a code span that started with as many.
func codeSpan(s string, ticks int) (string, bool) {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		n := len(s[i:]) - len(strings.TrimLeft(s[i:], "`"))
		if n == ticks {
			return s[:i], true
		}
		i += n
	}
	return "", false
}

// escaped is where inline keeps an escaped ASCII character while it drops
// the markup around it: a rune of Unicode's private use area.
const escaped = 0xE000

// inline drops the Markdown of text outside code spans.
func inline(s string) string {
	s = escapeRE.ReplaceAllStringFunc(s, func(m string) string { return string(rune(escaped + int(m[1]))) })
	s = imageRE.ReplaceAllString(s, "$1")
	s = linkRE.ReplaceAllString(s, "$1")
	s = autolinkRE.ReplaceAllString(s, "$1")
	s = tagRE.ReplaceAllString(s, "")
	s = strongRE.ReplaceAllString(s, "$2")
	s = starRE.ReplaceAllString(s, "$1")
	s = underRE.ReplaceAllString(s, "$1$2$3")
	s = strikeRE.ReplaceAllString(s, "$1")
	return strings.Map(func(r rune) rune {
		if r >= escaped && r < escaped+utf8.RuneSelf {
			return r - escaped
		}
		return r
	}, s)
}

// firstSentence is text up to its first full stop, question or exclamation
// mark that is followed by a space and not by a lower-case letter (so
// "e.g. this" goes on).
func firstSentence(text string) string {
	for i, r := range text {
		if r != '.' && r != '!' && r != '?' {
			continue
		}
		rest := text[i+1:]
		if rest == "" {
			break
		}
		next := strings.TrimLeft(rest, `"')]`)
		after := strings.TrimLeft(next, " ")
		if len(after) == len(next) { // no space: "v1.2", "example.com"
			continue
		}
		if r, _ := utf8.DecodeRuneInString(after); !unicode.IsLower(r) {
			return text[:len(text)-len(next)]
		}
	}
	return text
}

// bound cuts text to at most n characters, at a word when there is one,
// ending it with "…".
func bound(text string, n int) string {
	if utf8.RuneCountInString(text) <= n {
		return text
	}
	runes := []rune(text)[:n-1]
	cut := string(runes)
	if i := strings.LastIndexByte(cut, ' '); i > len(cut)/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,;:-–") + "…"
}
