package toolsearch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// blindSlot returns the phrasings of slot a, b or c of the frozen blind set
// (testdata/queries_blind.json) as queries, failing on a tool that is not
// in the catalog.
func blindSlot(t testing.TB, docs []Doc, slot string) []query {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "queries_blind.json"))
	if err != nil {
		t.Fatal(err)
	}
	var qf blindQueryFile
	if err := json.Unmarshal(raw, &qf); err != nil {
		t.Fatalf("queries_blind.json: %v", err)
	}
	names := map[string]bool{}
	for _, d := range docs {
		names[d.Name] = true
	}
	var out []query
	for _, q := range qf.Queries {
		if q.Slot != slot {
			continue
		}
		for _, tool := range append([]string{q.Tool}, q.Also...) {
			if !names[tool] {
				t.Fatalf("blind query %d of slot %s: tool %s is not in the catalog", len(out), slot, tool)
			}
		}
		out = append(out, query{Query: q.Query, Tool: q.Tool, Also: q.Also, Set: "blind-" + slot})
	}
	return out
}

// TestBlindRecall ranks the frozen blind phrasings (issue 34) against the
// real catalog. Slot a is the development slot: its figures and misses are
// logged. Slots b and c are held out: only their figures are logged, never
// a phrasing or a miss, so that a run of this test does not show what the
// ranking could be tuned to. During development run only
// -run 'TestBlindRecall/slot_a'.
func TestBlindRecall(t *testing.T) {
	docs := loadCatalog(t).Tools
	ix := New(docs)
	t.Run("slot_a", func(t *testing.T) {
		r := measure(ix, blindSlot(t, docs, "a"))
		t.Logf("slot a (development): %d phrasings, recall@1 %.3f, recall@3 %.3f", r.n, r.at1, r.at3)
		for _, m := range r.misses {
			t.Logf("miss: %s", m)
		}
	})
}
