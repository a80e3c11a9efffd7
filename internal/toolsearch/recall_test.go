package toolsearch

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// query is one task phrasing of testdata/queries.json.
type query struct {
	Query string   `json:"query"`
	Tool  string   `json:"tool"`           // the tool the task needs
	Also  []string `json:"also,omitempty"` // other tools of the catalog that do the job as well
	Set   string   `json:"set"`            // dev (the ranking was tuned on it) or holdout (measured once)
}

// loadQueries reads testdata/queries.json, failing on a tool that is not in
// the catalog.
func loadQueries(t testing.TB, docs []Doc) []query {
	t.Helper()
	raw, err := os.ReadFile("testdata/queries.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Queries []query `json:"queries"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("testdata/queries.json: %v", err)
	}
	names := map[string]bool{}
	for _, d := range docs {
		names[d.Name] = true
	}
	for _, q := range f.Queries {
		for _, tool := range append([]string{q.Tool}, q.Also...) {
			if !names[tool] {
				t.Fatalf("query %q: tool %s is not in the catalog", q.Query, tool)
			}
		}
	}
	return f.Queries
}

// recall is the share of queries whose tool (or one of its alternatives)
// is among the top 1 and top 3 hits, and the queries that missed the top 3.
type recall struct {
	at1, at3             float64
	strictAt1, strictAt3 float64 // counting only the query's own tool
	n                    int
	misses               []string
}

// measure runs every query against ix.
func measure(ix *Index, qs []query) recall {
	var r recall
	var hit1, hit3, strict1, strict3 int
	for _, q := range qs {
		hits := ix.Search(q.Query, 3)
		rank, strict := 0, 0
		for i, h := range hits {
			if strict == 0 && h.Name == q.Tool {
				strict = i + 1
			}
			if rank == 0 && (h.Name == q.Tool || slices.Contains(q.Also, h.Name)) {
				rank = i + 1
			}
		}
		if rank == 1 {
			hit1++
		}
		if rank >= 1 {
			hit3++
		} else {
			var got []string
			for _, h := range hits {
				got = append(got, h.Name)
			}
			r.misses = append(r.misses, q.Query+" → want "+q.Tool+", got ["+strings.Join(got, " ")+"]")
		}
		if strict == 1 {
			strict1++
		}
		if strict >= 1 {
			strict3++
		}
	}
	r.n = len(qs)
	n := float64(len(qs))
	r.at1, r.at3, r.strictAt1, r.strictAt3 = float64(hit1)/n, float64(hit3)/n, float64(strict1)/n, float64(strict3)/n
	return r
}

// TestRecall ranks the tool each task phrasing needs against the real
// catalog: it must be in the top 3 for at least 90 % of them (issue 16).
func TestRecall(t *testing.T) {
	docs := loadCatalog(t).Tools
	qs := loadQueries(t, docs)
	if len(qs) < 40 {
		t.Fatalf("%d queries, want at least 40", len(qs))
	}
	ix := New(docs)
	r := measure(ix, qs)
	t.Logf("%d queries over %d tools: recall@1 %.3f, recall@3 %.3f (counting only each query's own tool, not its alternatives: %.3f, %.3f)",
		r.n, len(docs), r.at1, r.at3, r.strictAt1, r.strictAt3)
	for _, set := range []string{"dev", "holdout", "holdout2", "holdout3"} {
		var sub []query
		for _, q := range qs {
			if q.Set == set {
				sub = append(sub, q)
			}
		}
		s := measure(ix, sub)
		t.Logf("  %s: %d queries, recall@1 %.3f, recall@3 %.3f", set, s.n, s.at1, s.at3)
	}
	for _, m := range r.misses {
		t.Logf("miss: %s", m)
	}
	if r.at3 < 0.90 {
		t.Errorf("recall@3 %.3f, want at least 0.90", r.at3)
	}
}
