package jsondepth

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestOf: the depth is the most objects and arrays open at once; brackets
// in strings, escaped quotes included, do not count, and a closing bracket
// with nothing open is passed over.
func TestOf(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		want int
	}{
		{``, 0},
		{`1`, 0},
		{`"[{"`, 0},
		{`{}`, 1},
		{`[[],[[]]]`, 3},
		{`{"a":{"b":[1,{"c":"]]]"}]}}`, 4},
		{`["\"[[[", "\\", []]`, 2},
		{`]]}[`, 1},
		{`{"a":[` + strings.Repeat("[", Max) + strings.Repeat("]", Max) + `]}`, Max + 2},
		{strings.Repeat("[", 10), 10}, // not JSON: measured all the same
	} {
		if got := Of([]byte(tt.raw)); got != tt.want {
			t.Errorf("Of(%.40q) = %d, want %d", tt.raw, got, tt.want)
		}
	}
}

// TestIndent: down to its levels Indent writes what json.Indent does;
// deeper, compact; and deep JSON grows linearly.
func TestIndent(t *testing.T) {
	for _, src := range []string{`{}`, `[]`, `1`, `"a{,:}"`, `{"a":[1,{"b":"c\"]"}],"d":{},"e":[],"f":[[[]]]}`, `[{"x":null},true,"\\"]`} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(src), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := Indent(nil, []byte(src), IndentLevels); string(got) != want.String() {
			t.Errorf("%s:\n%s\nwant\n%s", src, got, want.String())
		}
	}
	if got, want := string(Indent(nil, []byte(`{"a":{"b":[1,2]},"c":3}`), 1)), "{\n  \"a\": {\"b\":[1,2]},\n  \"c\": 3\n}"; got != want {
		t.Errorf("one level:\n%s\nwant\n%s", got, want)
	}
	deep := []byte(strings.Repeat("[", 5000) + strings.Repeat("]", 5000))
	if got := Indent(nil, deep, IndentLevels); len(got) > 2*len(deep)+IndentLevels*IndentLevels*4 {
		t.Errorf("%d levels indented: %d bytes", 5000, len(got))
	}
}
