package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestMeasureSearch measures find_tools on the committed catalog, as a
// full bench run does with more rounds, and renders its summary lines and
// section: the blind set's recall is the test's own (TestBlindRecall in
// internal/toolsearch), and each size has its searches and builds.
func TestMeasureSearch(t *testing.T) {
	s, err := measureSearch("..", 1)
	if err != nil {
		t.Fatal(err)
	}
	if all := s.blindAll(); all.N != 201 || all.At3 <= 0 || all.At3 > 1 {
		t.Fatalf("blind set: %+v", all)
	}
	for _, n := range s.Sizes {
		if len(s.Search[n]) != 440 || len(s.Build[n]) != 3 {
			t.Errorf("%d tools: %d searches, %d builds", n, len(s.Search[n]), len(s.Build[n]))
		}
	}
	var lines []string
	s.checks(func(name, fig, base string, v, maxV, minV float64) {
		lines = append(lines, fmt.Sprintf("%s %s %s %.2f", name, fig, base, v))
	})
	var b strings.Builder
	s.write(func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) })
	if len(lines) != 4 || !strings.Contains(lines[2], "recall@3 on the blind set (201 phrasings)") || !strings.Contains(b.String(), "| blind set, slot c | 67 |") {
		t.Fatalf("summary %q; section:\n%s", lines, b.String())
	}
	t.Logf("%s\n%s", strings.Join(lines, "\n"), b.String())
}
