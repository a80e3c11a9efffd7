package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/toolhost/toolhost/internal/toolsearch"
)

// searchResult is find_tools' ranking (internal/toolsearch, as
// Host.SearchTools runs it) on the committed catalog: its recall on the
// phrasings it was tuned on and on the frozen blind set, and its time.
type searchResult struct {
	Tools  int                     // the catalog's
	Recall []searchRecall          // by set, the whole blind set last
	Search map[int][]time.Duration // tools → one search each, the phrasings in turn
	Build  map[int][]time.Duration // tools → an index's build (once per role view)
	Sizes  []int                   // the catalog's size, and 2000
}

// searchRecall is the recall of one set of phrasings.
type searchRecall struct {
	Name string
	toolsearch.Recall
}

// The search's targets, bounds on its p50: a small share of a call's time.
const (
	searchTarget67   = 2 * time.Millisecond
	searchTarget2000 = 20 * time.Millisecond
	blindRecallGoal  = 0.9
)

// measureSearch ranks the committed phrasings against the committed
// catalog, then times searches (five hits, find_tools' default) and index
// builds over the catalog and over 2000 tools (the catalog copied),
// rounds times over every phrasing.
func measureSearch(root string, rounds int) (*searchResult, error) {
	dir := filepath.Join(root, "internal", "toolsearch", "testdata")
	cat, err := toolsearch.LoadCatalog(filepath.Join(dir, "catalog.json"))
	if err != nil {
		return nil, err
	}
	docs := cat.Tools
	old, err := toolsearch.LoadQueries(filepath.Join(dir, "queries.json"), docs, "")
	if err != nil {
		return nil, err
	}
	ix := toolsearch.New(docs)
	res := &searchResult{Tools: len(docs), Search: map[int][]time.Duration{}, Build: map[int][]time.Duration{}, Sizes: []int{len(docs), 2000}}
	res.Recall = append(res.Recall, searchRecall{"tuned-on phrasings (queries.json)", toolsearch.Measure(ix, old)})
	queries := slices.Clone(old)
	var blind []toolsearch.Query
	for _, slot := range []string{"a", "b", "c"} {
		qs, err := toolsearch.LoadQueries(filepath.Join(dir, "queries_blind.json"), docs, slot)
		if err != nil {
			return nil, err
		}
		res.Recall = append(res.Recall, searchRecall{"blind set, slot " + slot, toolsearch.Measure(ix, qs)})
		blind = append(blind, qs...)
	}
	res.Recall = append(res.Recall, searchRecall{"blind set, all (queries_blind.json)", toolsearch.Measure(ix, blind)})
	queries = append(queries, blind...)
	for _, n := range res.Sizes {
		big := toolsearch.Replicate(docs, n)
		var ix *toolsearch.Index
		for range max(3, rounds) {
			start := time.Now()
			ix = toolsearch.New(big)
			res.Build[n] = append(res.Build[n], time.Since(start))
		}
		for range rounds {
			for _, q := range queries {
				start := time.Now()
				ix.Search(q.Query, 5)
				res.Search[n] = append(res.Search[n], time.Since(start))
			}
		}
	}
	return res, nil
}

// blindAll is the recall over the whole blind set.
func (s *searchResult) blindAll() toolsearch.Recall { return s.Recall[len(s.Recall)-1].Recall }

// target is the bound on a search's p50 over n tools.
func (s *searchResult) target(n int) time.Duration {
	if n > s.Tools {
		return searchTarget2000
	}
	return searchTarget67
}

// checks are the search's lines of the summary.
func (s *searchResult) checks(add func(name, fig, base string, v, maxV, minV float64)) {
	for _, n := range s.Sizes {
		p50 := median(s.Search[n])
		add(fmt.Sprintf("find_tools search p50, %d tools / target", n), fmtDur(p50), fmtDur(s.target(n)), durRatio(p50, s.target(n)), 1, 0)
	}
	r := s.blindAll()
	add(fmt.Sprintf("find_tools recall@3 on the blind set (%d phrasings) / %.1f goal", r.N, blindRecallGoal), fmt.Sprintf("%.3f", r.At3),
		fmt.Sprintf("%.1f", blindRecallGoal), r.At3/blindRecallGoal, 0, 1)
	add(fmt.Sprintf("find_tools recall@5 (its default count) on the blind set / %.1f", blindRecallGoal), fmt.Sprintf("%.3f", r.At5),
		fmt.Sprintf("%.1f", blindRecallGoal), r.At5/blindRecallGoal, 0, 0)
}

// write renders the search's section.
func (s *searchResult) write(p func(string, ...any)) {
	p("\n## 7b. Tool search (find_tools)\n")
	p("find_tools' ranking (`internal/toolsearch`, as `Host.SearchTools` runs it on an index built once per role view) on the committed "+
		"catalog of %d tools (`internal/toolsearch/testdata/catalog.json`). Recall@k: the share of phrasings whose tool, or one that does the "+
		"job as well, is among the first k hits. The tuned-on phrasings are those the ranking was developed on; the blind set's 201 were written "+
		"without seeing the ranking, three per tool, none reusing a word of its name, and frozen (slot a served development, b and c "+
		"never did). Its goal of recall@3 ≥ 0.9 is not reached by any lexical ranking tried (testdata/README.md). find_tools returns five candidates by default, each with why it matched, for the model to choose among.\n", s.Tools)
	p("| phrasings | n | recall@1 | recall@3 | recall@5 (find_tools' default) |\n|---|---:|---:|---:|---:|")
	for _, r := range s.Recall {
		p("| %s | %d | %.3f | %.3f | %.3f |", r.Name, r.N, r.At1, r.At3, r.At5)
	}
	p("\nTime of one search (five hits with their why lines, every phrasing in turn) and of an index's build, on the catalog and on 2000 tools " +
		"(the catalog copied, names suffixed, so that every posting list is as long as it gets). Targets: a search's p50 ≤ 2 ms on the catalog, " +
		"≤ 20 ms on 2000 tools.\n")
	p("| tools | search p50 | target | search p99 | searches | index build, once per role view (median) |\n|---:|---:|---:|---:|---:|---:|")
	for _, n := range s.Sizes {
		p("| %d | %s | %s | %s | %d | %s |", n, fmtDur(median(s.Search[n])), fmtDur(s.target(n)),
			fmtDur(percentile(slices.Sorted(slices.Values(s.Search[n])), .99)), len(s.Search[n]), fmtDur(median(s.Build[n])))
	}
}
