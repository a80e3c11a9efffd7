package toolsearch

import "testing"

// TestAblation measures the ranking with each of its features turned off,
// one at a time, over the catalog and the queries: the synonym table and
// the reading of file names, paths and URLs must each earn their place
// (recall@3 falls without them); the others are logged, to re-check the
// choices in testdata/README.md when the catalog or the queries change.
func TestAblation(t *testing.T) {
	c := loadCatalog(t)
	qs := loadQueries(t, c.Tools)
	base := Measure(newIndex(c.Tools, defaultParams), qs)
	t.Logf("%-34s recall@1 %.3f recall@3 %.3f", "defaults", base.At1, base.At3)
	for _, v := range []struct {
		name   string
		change func(*params)
		worse  bool // recall@3 must fall without it
	}{
		{"no synonyms", func(p *params) { p.expand = 0 }, true},
		{"no file/path/URL hints", func(p *params) { p.hints = false }, true},
		{"synonyms summed, not the best one", func(p *params) { p.sumSynonyms = true }, false},
		{"top-level properties only", func(p *params) { p.nested = false }, false},
		{"no title", func(p *params) { p.weight[fieldTitle] = 0 }, false},
		{"group description added (×0.6)", func(p *params) { p.weight[fieldGroupDesc] = 0.6 }, false},
		{"annotations added (×0.3)", func(p *params) { p.weight[fieldAnnotations] = 0.3 }, false},
		{"every field used weighs 1", func(p *params) {
			for f := range p.weight {
				if p.weight[f] > 0 {
					p.weight[f] = 1
				}
			}
		}, false},
	} {
		p := defaultParams
		v.change(&p)
		r := Measure(newIndex(c.Tools, p), qs)
		t.Logf("%-34s recall@1 %.3f recall@3 %.3f", v.name, r.At1, r.At3)
		if v.worse && r.At3 >= base.At3 {
			t.Errorf("%s: recall@3 %.3f, not below the defaults' %.3f: the feature does not earn its place", v.name, r.At3, base.At3)
		}
	}
}
