package jsondepth

import (
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
