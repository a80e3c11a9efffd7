package toolsearch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// queries_blind.json is a frozen evaluation set written blind to the
// ranking (testdata/README.md). This file checks only its shape; it never
// ranks.

type blindCatalogFile struct {
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// blindWords lower-cases s and splits it on every rune that is not a letter
// or a digit.
func blindWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// blindForms returns w and its simple plural/verb forms: w+s, w+es, w+ed,
// w+ing, and for a w ending in e, w minus the e plus ing or ed.
func blindForms(w string) []string {
	f := []string{w, w + "s", w + "es", w + "ed", w + "ing"}
	if strings.HasSuffix(w, "e") {
		f = append(f, w[:len(w)-1]+"ing", w[:len(w)-1]+"ed")
	}
	return f
}

// blindReuses reports whether query word q is a form of name word n, or
// (for a q of three letters or more, so "a" is not caught by "as") n a form
// of q: "annotate" counts against "annotated" too.
func blindReuses(q, n string) bool {
	for _, f := range blindForms(n) {
		if q == f {
			return true
		}
	}
	if len(q) < 3 {
		return false
	}
	for _, f := range blindForms(q) {
		if n == f {
			return true
		}
	}
	return false
}

func TestBlindQueriesWellFormed(t *testing.T) {
	var qf QueryFile
	blindReadJSON(t, filepath.Join("testdata", "queries_blind.json"), &qf)
	var cf blindCatalogFile
	blindReadJSON(t, filepath.Join("testdata", "catalog.json"), &cf)

	if strings.TrimSpace(qf.About) == "" {
		t.Error("queries_blind.json: about is empty")
	}
	order := map[string]int{}
	for i, tool := range cf.Tools {
		order[tool.Name] = i
	}
	if len(order) == 0 {
		t.Fatal("catalog.json has no tools")
	}

	slots := map[string]map[string]int{}
	prev := -1
	for i, q := range qf.Queries {
		pos, ok := order[q.Tool]
		if !ok {
			t.Errorf("query %d %q: tool %q is not in the catalog", i, q.Query, q.Tool)
			continue
		}
		if strings.TrimSpace(q.Query) == "" {
			t.Errorf("query %d (%s): empty", i, q.Tool)
		}
		if q.Slot != "a" && q.Slot != "b" && q.Slot != "c" {
			t.Errorf("query %d %q: slot %q, want a, b or c", i, q.Query, q.Slot)
		}
		if len(q.Slot) == 1 {
			key := pos*3 + int(q.Slot[0]-'a')
			if key <= prev {
				t.Errorf("query %d %q: not in catalog order then slot order", i, q.Query)
			}
			prev = key
		}
		if slots[q.Tool] == nil {
			slots[q.Tool] = map[string]int{}
		}
		slots[q.Tool][q.Slot]++

		seen := map[string]bool{}
		for _, a := range q.Also {
			if _, ok := order[a]; !ok {
				t.Errorf("query %d %q: also %q is not in the catalog", i, q.Query, a)
			}
			if a == q.Tool {
				t.Errorf("query %d %q: also names the tool itself", i, q.Query)
			}
			if seen[a] {
				t.Errorf("query %d %q: also names %q twice", i, q.Query, a)
			}
			seen[a] = true
		}

		nameWords := strings.Split(strings.ToLower(q.Tool), "_")
		for _, w := range blindWords(q.Query) {
			for _, n := range nameWords {
				if blindReuses(w, n) {
					t.Errorf("query %d %q: reuses %q of tool name %s", i, q.Query, w, q.Tool)
				}
			}
		}
	}

	for _, tool := range cf.Tools {
		got := slots[tool.Name]
		total := 0
		for _, n := range got {
			total += n
		}
		if total != 3 || got["a"] != 1 || got["b"] != 1 || got["c"] != 1 {
			t.Errorf("tool %s: slots %v, want exactly one each of a, b, c", tool.Name, got)
		}
	}
	if want := 3 * len(cf.Tools); len(qf.Queries) != want {
		t.Errorf("%d queries, want %d", len(qf.Queries), want)
	}
}

func blindReadJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
