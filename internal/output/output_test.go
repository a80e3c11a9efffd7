package output

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLimit(t *testing.T) {
	cases := []struct {
		name            string
		in              string
		lines, bytes    int
		tail            bool
		want            string
		cutLines, cutBy bool
	}{
		{"within limits", "a\nb\n", 2, 10, false, "a\nb\n", false, false},
		{"no limits", "a\nb\nc", 0, 0, false, "a\nb\nc", false, false},
		{"head lines", "a\nb\nc\n", 2, 0, false, "a\nb\n", true, false},
		{"tail lines", "a\nb\nc\n", 2, 0, true, "b\nc\n", true, false},
		{"tail lines without final newline", "a\nb\nc", 2, 0, true, "b\nc", true, false},
		{"exactly n lines, no final newline", "a\nb", 2, 0, false, "a\nb", false, false},
		{"head bytes", "abcdef", 0, 4, false, "abcd", false, true},
		{"tail bytes", "abcdef", 0, 4, true, "cdef", false, true},
		{"head bytes keep runes whole", "aé€x", 0, 4, false, "aé", false, true},
		{"tail bytes keep runes whole", "x€éa", 0, 4, true, "éa", false, true},
		{"both", "1111\n2222\n3333\n", 2, 6, false, "1111\n2", true, true},
		{"both, tail", "1111\n2222\n3333\n", 2, 6, true, "\n3333\n", true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Limit(c.in, c.lines, c.bytes, c.tail)
			if got.Text != c.want || got.Lines != c.cutLines || got.Bytes != c.cutBy {
				t.Fatalf("Limit(%q, %d, %d, %v) = %+v, want %q lines=%v bytes=%v", c.in, c.lines, c.bytes, c.tail, got, c.want, c.cutLines, c.cutBy)
			}
		})
	}
}

func FuzzLimit(f *testing.F) {
	f.Add("a\nb\nc\n", 2, 3, false)
	f.Add("x€éa\n\n", 1, 4, true)
	f.Fuzz(func(t *testing.T, s string, maxLines, maxBytes int, tail bool) {
		c := Limit(s, maxLines, maxBytes, tail)
		switch {
		case maxBytes > 0 && len(c.Text) > maxBytes:
			t.Fatalf("kept %d bytes, limit %d", len(c.Text), maxBytes)
		case maxLines > 0 && strings.Count(strings.TrimSuffix(c.Text, "\n"), "\n") >= maxLines:
			t.Fatalf("kept %q, more than %d lines", c.Text, maxLines)
		case tail && !strings.HasSuffix(s, c.Text), !tail && !strings.HasPrefix(s, c.Text):
			t.Fatalf("kept %q, not the %s of %q", c.Text, map[bool]string{true: "end", false: "beginning"}[tail], s)
		case utf8.ValidString(s) && !utf8.ValidString(c.Text):
			t.Fatalf("split a character: %q", c.Text)
		case c.Text != s && !c.Lines && !c.Bytes, c.Text == s && (c.Lines || c.Bytes):
			t.Fatalf("flags %+v do not match the cut of %q", c, s)
		}
	})
}

func TestOneLine(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"a  b\n\tc", 10, "a b c"},
		{"héllo wörld", 5, "héll…"},
		{"exact", 5, "exact"},
		{"", 3, ""},
	} {
		if got := OneLine(tt.in, tt.n); got != tt.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
