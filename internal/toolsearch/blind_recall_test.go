package toolsearch

import (
	"path/filepath"
	"testing"
)

// blindSlot returns the phrasings of slot a, b or c of the frozen blind set
// (testdata/queries_blind.json), failing on a tool that is not in the
// catalog.
func blindSlot(t testing.TB, docs []Doc, slot string) []Query {
	t.Helper()
	qs, err := LoadQueries(filepath.Join("testdata", "queries_blind.json"), docs, slot)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// blindFloor is the blind set's recall@3 over all 201 phrasings (154 of
// them, 0.766) as measured once, when the ranking was frozen: a
// regression floor, not the target. The target is 0.9, which this ranking
// does not reach (testdata/README.md).
const blindFloor = 154.0 / 201

// blindFloor5 is the blind set's recall@5, find_tools' default count of
// candidates, as measured with the same ranking (181 of 201, 0.900): a
// regression floor too.
const blindFloor5 = 181.0 / 201

// TestBlindRecall ranks the frozen blind phrasings against the
// real catalog. Slot a is the development slot: its figures and misses are
// logged. Slots b and c are held out: only their figures are logged, never
// a phrasing or a miss, so that a run of this test does not show what the
// ranking could be tuned to. During development run only
// -run 'TestBlindRecall/slot_a'. Over all 201 phrasings recall@3 and
// recall@5 must not fall below blindFloor and blindFloor5.
func TestBlindRecall(t *testing.T) {
	docs := loadCatalog(t).Tools
	ix := New(docs)
	t.Run("slot_a", func(t *testing.T) {
		r := Measure(ix, blindSlot(t, docs, "a"))
		t.Logf("slot a (development): %d phrasings, recall@1 %.3f, recall@3 %.3f", r.N, r.At1, r.At3)
		for _, m := range r.Misses {
			t.Logf("miss: %s", m)
		}
	})
	t.Run("all", func(t *testing.T) {
		var all []Query
		for _, slot := range []string{"a", "b", "c"} {
			qs := blindSlot(t, docs, slot)
			r := Measure(ix, qs)
			t.Logf("slot %s: %d phrasings, recall@1 %.3f, recall@3 %.3f, recall@5 %.3f", slot, r.N, r.At1, r.At3, r.At5)
			all = append(all, qs...)
		}
		r := Measure(ix, all)
		t.Logf("all: %d phrasings over %d tools, recall@1 %.3f, recall@3 %.3f (counting only each phrasing's own tool: %.3f, %.3f), recall@5 (find_tools' default) %.3f",
			r.N, len(docs), r.At1, r.At3, r.StrictAt1, r.StrictAt3, r.At5)
		if r.N != 201 {
			t.Errorf("%d blind phrasings, want 201", r.N)
		}
		if r.At3 < blindFloor {
			t.Errorf("recall@3 %.3f on the blind set, below its floor %.3f: the ranking got worse on phrasings it was never tuned on", r.At3, blindFloor)
		}
		if r.At5 < blindFloor5 {
			t.Errorf("recall@5 %.3f on the blind set, below its floor %.3f: find_tools' candidates got worse on phrasings it was never tuned on", r.At5, blindFloor5)
		}
	})
}
