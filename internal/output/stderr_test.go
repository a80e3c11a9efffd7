package output

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

func TestStderrLines(t *testing.T) {
	long := strings.Repeat("é", 1000) // two bytes each
	for _, tc := range []struct {
		name   string
		writes []string
		want   []string
	}{
		{"nothing", nil, nil},
		{"blank lines", []string{"\n \n\t\n"}, nil},
		{"lines across writes", []string{"first li", "ne\nsecond\n", "third"}, []string{"first line", "second", "third"}},
		{"the last lines", []string{strings.Repeat("old\n", 20) + "1\n2\n3\n4\n5\n6\n7\n8\n"}, []string{"1", "2", "3", "4", "5", "6", "7", "8"}},
		{"crlf", []string{"a\r\nb\r\n"}, []string{"a", "b"}},
		{"a long line", []string{long + "\n"}, []string{strings.Repeat("é", (stderrLineBytes-len("…"))/2) + "…"}},
		{"megabytes", []string{strings.Repeat("x", 3<<20), "\nend\n"}, []string{"…" + strings.Repeat("x", stderrLineBytes-2*len("…")) + "…", "end"}},
		{"a terminal's escapes", []string{"\x1b[2J\x1b[31mred\x1b[0m\n"}, []string{`\x1b[2J\x1b[31mred\x1b[0m`}},
		{"a carriage return", []string{"ok\r2026-01-01 [ERROR] forged\n"}, []string{`ok\r2026-01-01 [ERROR] forged`}},
		{"a bidi override", []string{"a\u202eb\n"}, []string{`a\u202eb`}},
		{"invalid UTF-8", []string{"a\xffb\n"}, []string{`a\xffb`}},
		{"a backslash", []string{`C:\x1b` + "\n"}, []string{`C:\\x1b`}},
		{"a tab and NUL", []string{"a\tb\x00c\n"}, []string{`a\tb\x00c`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Stderr
			for _, w := range tc.writes {
				if n, err := s.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			got := s.Lines()
			if !slices.Equal(got, tc.want) {
				t.Errorf("Lines() =\n%q\nwant\n%q", got, tc.want)
			}
			total := 0
			for _, l := range got {
				total += len(l)
				if len(l) > stderrLineBytes {
					t.Errorf("a line of %d bytes", len(l))
				}
			}
			if len(got) > stderrLines || total > stderrLines*stderrLineBytes {
				t.Errorf("%d lines, %d bytes", len(got), total)
			}
		})
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31m", "a\r\nb", "\xff", "\u202e", `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		for _, r := range e {
			if !unicode.IsPrint(r) {
				t.Fatalf("Escape(%q) = %q holds %U", s, e, r)
			}
		}
	})
}

// TestLogLines: each line reaches the log once complete, escaped and
// bounded, however the writes cut it; a line that never ends holds no
// more than its bound.
func TestLogLines(t *testing.T) {
	var got []string
	w := NewLogLines(func(line string) { got = append(got, line) })
	for _, p := range []string{"one\ntw", "o\n\n", "x\n2026-01-01 [ERROR] host: forged\r\n", "\x1b[31mred\n", "half"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	want := []string{"one", "two", "x", "2026-01-01 [ERROR] host: forged", `\x1b[31mred`}
	if !slices.Equal(got, want) {
		t.Fatalf("logged %q, want %q", got, want)
	}
	got = nil
	for range 1 << 10 { // 4 MiB without a newline
		w.Write([]byte(strings.Repeat("y", 4<<10)))
	}
	if len(w.line) > stderrLineBytes {
		t.Fatalf("holds %d bytes of an unended line", len(w.line))
	}
	w.Write([]byte("\n"))
	if len(got) != 1 || got[0] != "half"+strings.Repeat("y", stderrLineBytes-len("half"))+"…" {
		t.Fatalf("the long line logged as %q", got)
	}
}

// TestStderrFrames: a run of stack frames is one line, its first frame
// and their count, so that node's error line stays among the last lines.
func TestStderrFrames(t *testing.T) {
	var s Stderr
	s.Write([]byte("node:internal/modules/esm/resolve:873\n  throw new ERR_MODULE_NOT_FOUND(packageName);\n        ^\n\n" +
		"Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'x' imported from /srv/node_modules/.bin/srv\n" +
		"    at packageResolve (node:internal/modules/esm/resolve:873:9)\n    at moduleResolve (node:internal/modules/esm/resolve:946:18)\n" +
		"    at defaultResolve (node:internal/modules/esm/resolve:1188:11) {\n  code: 'ERR_MODULE_NOT_FOUND'\n}\n\nNode.js v20.20.2\n    at lone (x.js:1:1)\n"))
	want := []string{"  throw new ERR_MODULE_NOT_FOUND(packageName);", "        ^",
		"Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'x' imported from /srv/node_modules/.bin/srv",
		"    at packageResolve (node:internal/modules/esm/resolve:873:9) … and 2 more frames",
		"  code: 'ERR_MODULE_NOT_FOUND'", "}", "Node.js v20.20.2", "    at lone (x.js:1:1)"}
	if got := s.Lines(); !slices.Equal(got, want) {
		t.Errorf("Lines() =\n%q\nwant\n%q", got, want)
	}
}
