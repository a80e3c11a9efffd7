package toolsearch

import (
	"slices"
	"strings"
)

// maxWhy is how many query words a hit's Why names at most.
const maxWhy = 4

// why says which query words matched doc, each by its best match there
// (itself, or one of its synonyms at the lower weight), strongest first,
// in one short line: "picture → image (synonym): description; page: name;
// todo.txt → file: name".
func (ix *Index) why(doc int32, words []queryWord) string {
	type reason struct {
		word, text string
		score      float64
	}
	var reasons []reason
	for _, w := range words {
		best, bestScore, fields := "", 0.0, uint16(0)
		try := func(term string, factor float64) {
			ps := ix.postings[term]
			j, ok := slices.BinarySearchFunc(ps, doc, func(p posting, d int32) int { return int(p.doc - d) })
			if ok && factor*ps[j].weight > bestScore {
				best, bestScore, fields = term, factor*ps[j].weight, ps[j].fields
			}
		}
		try(w.term, 1)
		for _, syn := range ix.synonymsOf(w) {
			try(syn, ix.expand)
		}
		if bestScore == 0 {
			continue
		}
		var b strings.Builder
		b.WriteString(w.word)
		// A part of a file name, a path or a URL, or the term it stands
		// for ("todo.txt → file"), is named besides the query's word.
		if own, _ := term(w.word); best != own {
			b.WriteString(" → ")
			b.WriteString(ix.surface[best])
		}
		if best != w.term {
			b.WriteString(" (synonym)")
		}
		b.WriteString(": ")
		sep := ""
		for f := range numFields {
			if fields&(1<<f) != 0 {
				b.WriteString(sep)
				b.WriteString(fieldNames[f])
				sep = ", "
			}
		}
		reasons = append(reasons, reason{w.word, b.String(), bestScore})
	}
	slices.SortStableFunc(reasons, func(a, b reason) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	// A file name or a URL is several terms of one word: it is named once,
	// by its best.
	var out []string
	said := map[string]bool{}
	for _, r := range reasons {
		if len(out) == maxWhy {
			break
		}
		if !said[r.word] {
			said[r.word] = true
			out = append(out, r.text)
		}
	}
	return strings.Join(out, "; ")
}
