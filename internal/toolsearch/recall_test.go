package toolsearch

import (
	"testing"
)

// loadQueries reads testdata/queries.json, failing on a tool that is not in
// the catalog.
func loadQueries(t testing.TB, docs []Doc) []Query {
	t.Helper()
	qs, err := LoadQueries("testdata/queries.json", docs, "")
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// TestRecall ranks the tool each task phrasing needs against the real
// catalog: it must be in the top 3 for at least 90 % of them, the share
// that lets a model find most tools in a short list.
func TestRecall(t *testing.T) {
	docs := loadCatalog(t).Tools
	qs := loadQueries(t, docs)
	if len(qs) < 40 {
		t.Fatalf("%d queries, want at least 40", len(qs))
	}
	ix := New(docs)
	r := Measure(ix, qs)
	t.Logf("%d queries over %d tools: recall@1 %.3f, recall@3 %.3f (counting only each query's own tool, not its alternatives: %.3f, %.3f)",
		r.N, len(docs), r.At1, r.At3, r.StrictAt1, r.StrictAt3)
	for _, set := range []string{"dev", "holdout", "holdout2", "holdout3"} {
		var sub []Query
		for _, q := range qs {
			if q.Set == set {
				sub = append(sub, q)
			}
		}
		s := Measure(ix, sub)
		t.Logf("  %s: %d queries, recall@1 %.3f, recall@3 %.3f", set, s.N, s.At1, s.At3)
	}
	for _, m := range r.Misses {
		t.Logf("miss: %s", m)
	}
	if r.At3 < 0.90 {
		t.Errorf("recall@3 %.3f, want at least 0.90", r.At3)
	}
}
