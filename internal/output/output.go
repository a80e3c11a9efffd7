// Package output cuts tool output to the host's limits of lines and bytes,
// keeping either its beginning (reads) or its end (command output), and never
// splitting a UTF-8 character; and it keeps what a module writes to its
// stderr bounded and escaped, for its error ([Stderr]) and the log
// ([LogLines]).
package output

import (
	"strings"
	"unicode/utf8"
)

// Cut is the outcome of [Limit].
type Cut struct {
	Text  string // what is kept
	Lines bool   // lines were dropped
	Bytes bool   // bytes were dropped (beyond whole lines)
}

// Limit keeps at most maxLines lines and maxBytes bytes of s: its beginning,
// or its end when tail is set. A limit of 0 or less means no limit.
func Limit(s string, maxLines, maxBytes int, tail bool) Cut {
	c := Cut{Text: s}
	if maxLines > 0 {
		c.Text, c.Lines = lines(c.Text, maxLines, tail)
	}
	if maxBytes > 0 && len(c.Text) > maxBytes {
		c.Text, c.Bytes = bytes(c.Text, maxBytes, tail), true
	}
	return c
}

// lines keeps n lines of s; a final newline does not start another line.
func lines(s string, n int, tail bool) (string, bool) {
	if tail {
		end := len(s)
		if strings.HasSuffix(s, "\n") {
			end--
		}
		i := end
		for range n {
			j := strings.LastIndexByte(s[:i], '\n')
			if j < 0 {
				return s, false
			}
			i = j
		}
		return s[i+1:], true
	}
	i := 0
	for range n {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return s, false
		}
		i += j + 1
	}
	if i == len(s) {
		return s, false
	}
	return s[:i], true
}

// bytes keeps at most n bytes of s, on a character boundary.
func bytes(s string, n int, tail bool) string {
	if tail {
		i := len(s) - n
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		return s[i:]
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// OneLine folds s's whitespace runs into single spaces and shortens it to n
// runes, ending in "…" when cut: a summary for a table or a tree.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
