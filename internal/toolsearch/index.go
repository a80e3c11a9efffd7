package toolsearch

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// Doc is one tool definition to index.
type Doc struct {
	// Name is the tool's name as the model calls it ("fs_read_text_file").
	// Its words count most: it is split at '_', '-', '.' and camelCase.
	Name string `json:"name"`
	// Title is the tool's human-readable title (MCP's title), if any.
	Title string `json:"title,omitempty"`
	// Group is the id of the tool group that provides the tool.
	Group string `json:"group"`
	// GroupDescription is the description of the tool's group.
	GroupDescription string `json:"group_description,omitempty"`
	// Description is the tool's description, all of it.
	Description string `json:"description"`
	// InputSchema is the tool's JSON-schema input; the names of its
	// properties (nested ones too) and their descriptions are indexed. Nil or
	// malformed is an empty schema.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Annotations are MCP's hints about the tool (readOnlyHint,
	// destructiveHint, …, a JSON object): each hint that is true stands
	// for the words annotationWords gives it.
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// Hit is one tool found by Search.
type Hit struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Group is the id of the tool's group.
	Group string `json:"group"`
	// Description is the first sentence of the tool's description, for a
	// one-line listing.
	Description string `json:"description"`
	// Why says which words of the query, or their synonyms, matched which
	// fields of the tool, best match first: "picture → image (synonym):
	// description; page: name, description"; "its name" when the query was
	// the tool's name.
	Why string `json:"why"`
	// Score is the tool's BM25F score for the query: higher is better,
	// comparable only within one Search.
	Score float64 `json:"score"`
}

// field is one part of a tool definition with its own weight and length
// normalisation.
type field int

const (
	fieldName        field = iota // the tool name's words
	fieldTitle                    // the tool's title
	fieldGroup                    // the group id's words
	fieldGroupDesc                // the group's description
	fieldDesc                     // the description
	fieldProps                    // the input schema's property names
	fieldPropDesc                 // the input schema's property descriptions
	fieldAnnotations              // the words of the tool's true hints
	numFields
)

// fieldNames name the fields in a hit's Why.
var fieldNames = [numFields]string{"name", "title", "group", "group description", "description",
	"parameter names", "parameter descriptions", "annotations"}

// annotationWords are the words each MCP hint stands for when true.
var annotationWords = map[string]string{
	"readOnlyHint":    "read only: looks, changes nothing",
	"destructiveHint": "destructive: deletes or overwrites",
	"openWorldHint":   "reaches the outside world",
}

// params are the ranking's knobs; defaultParams holds the values chosen on
// testdata (testdata/README.md has the measurements; TestAblation repeats the main ones).
// The group's description and the annotations weigh 0: each lowered
// recall on the development data.
type params struct {
	// k1 is BM25's term-frequency saturation.
	k1 float64
	// weight multiplies a field's term frequencies (BM25F); 0 leaves the
	// field out.
	weight [numFields]float64
	// b is each field's length normalisation: 0 none, 1 full.
	b [numFields]float64
	// nested indexes the properties of nested objects and array items too,
	// not only the top-level ones.
	nested bool
	// expand is the weight of a query word's synonyms (synonymGroups)
	// against the word's own 1; 0 searches the query's words alone.
	expand float64
	// sumSynonyms adds up the matches of a word's synonyms instead of
	// taking the best one.
	sumSynonyms bool
	// hints reads file names, paths and URLs in a query as such
	// (queryWords).
	hints bool
}

var defaultParams = params{
	k1:     1.2,
	weight: [numFields]float64{fieldName: 3, fieldGroup: 1, fieldDesc: 1, fieldProps: 1.5, fieldPropDesc: 0.5, fieldTitle: 1},
	b:      [numFields]float64{0.75, 0.75, 0.75, 0.75, 0.75, 0.75, 0.75, 0.75},
	nested: true,
	expand: 0.4,
	hints:  true,
}

// posting is one tool's precomputed share of a term's score: idf times the
// saturated BM25F term frequency, and the fields the term occurs in.
type posting struct {
	doc    int32
	fields uint16 // bit f: the term occurs in field f
	weight float64
}

// Index ranks tool definitions against free-text queries with BM25F
// (Okapi BM25 over weighted fields). It is immutable after [New] and safe for
// concurrent [Index.Search].
type Index struct {
	docs        []entry              // the indexed tools, by position
	postings    map[string][]posting // term → the docs holding it, by doc
	byName      map[string][]int32   // lower-case name → docs, for exact-name queries
	surface     map[string]string    // term → a word of the tools it stems from, for Why
	expand      float64              // params.expand
	sumSynonyms bool                 // params.sumSynonyms
	hints       bool                 // params.hints
}

// entry is what a hit shows of an indexed tool.
type entry struct {
	name, group, line string // line: the description's first sentence
}

// New indexes docs. Neither the slice nor the input schemas are kept.
func New(docs []Doc) *Index {
	return newIndex(docs, defaultParams)
}

// newIndex is New with explicit knobs, for measuring them.
func newIndex(docs []Doc, p params) *Index {
	ix := &Index{
		docs:        make([]entry, len(docs)),
		postings:    map[string][]posting{},
		byName:      map[string][]int32{},
		surface:     map[string]string{},
		expand:      p.expand,
		sumSynonyms: p.sumSynonyms,
		hints:       p.hints,
	}
	// counts[i][term][field]: how often term occurs in that field of doc i.
	counts := make([]map[string]*[numFields]int, len(docs))
	lengths := make([][numFields]int, len(docs))
	var total [numFields]float64
	df := map[string]int{}
	for i, d := range docs {
		ix.docs[i] = entry{name: d.Name, group: d.Group, line: firstSentence(d.Description)}
		ix.byName[strings.ToLower(d.Name)] = append(ix.byName[strings.ToLower(d.Name)], int32(i))
		var texts [numFields][]string
		texts[fieldName] = []string{d.Name}
		texts[fieldGroup] = []string{d.Group}
		texts[fieldDesc] = []string{d.Description}
		texts[fieldProps], texts[fieldPropDesc] = schemaTexts(d.InputSchema, p.nested)
		texts[fieldTitle] = []string{d.Title}
		texts[fieldGroupDesc] = []string{d.GroupDescription}
		if p.weight[fieldAnnotations] > 0 {
			texts[fieldAnnotations] = annotationTexts(d.Annotations)
		}
		counts[i] = map[string]*[numFields]int{}
		for f := range numFields {
			if p.weight[f] == 0 {
				continue
			}
			for _, text := range texts[f] {
				for _, w := range splitWords(text) {
					t, ok := term(w)
					if !ok {
						continue
					}
					c := counts[i][t]
					if c == nil {
						c = new([numFields]int)
						counts[i][t] = c
						df[t]++
					}
					if _, ok := ix.surface[t]; !ok {
						ix.surface[t] = strings.ToLower(w)
					}
					c[f]++
					lengths[i][f]++
				}
			}
			total[f] += float64(lengths[i][f])
		}
	}
	// BM25F: a term's frequency in a doc is the sum over fields of its
	// count, weighted and normalised by the field's length against the
	// field's average; then saturated by k1 and multiplied by the term's
	// idf. Docs are visited in order, so each posting list is by doc.
	n := float64(len(docs))
	for i := range docs {
		var norm [numFields]float64
		for f := range numFields {
			norm[f] = 1
			if avg := total[f] / n; avg > 0 {
				norm[f] = 1 - p.b[f] + p.b[f]*float64(lengths[i][f])/avg
			}
		}
		for t, c := range counts[i] {
			tf := 0.0
			var fields uint16
			for f := range numFields {
				tf += p.weight[f] * float64(c[f]) / norm[f]
				if c[f] > 0 {
					fields |= 1 << f
				}
			}
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			ix.postings[t] = append(ix.postings[t], posting{doc: int32(i), fields: fields, weight: idf * tf * (p.k1 + 1) / (p.k1 + tf)})
		}
	}
	return ix
}

// Search returns the tools that best match query, best first, at most limit
// of them (limit ≤ 0: every tool that matches). The query is tokenized as
// the tools were (lower case, stop words dropped, stemmed), each word also
// stands for its synonyms at a lower weight, and a file name, a path or a
// URL in it stands for "file", "path" or "url". A tool matches when it
// shares a term with that; a query that is exactly a tool's name ranks that
// tool first. Ties are broken by name, then group. Each hit says why it
// matched. An empty query, or one matching nothing, returns no hits. Safe
// for concurrent use.
func (ix *Index) Search(query string, limit int) []Hit {
	if ix == nil {
		return nil
	}
	scores := make([]float64, len(ix.docs))
	matched := make([]bool, len(ix.docs))
	var docs []int32
	// Each query word scores a tool once: by its own weight there, or by
	// the best of its synonyms' at the lower weight expand, whichever is
	// higher; a word with many synonyms does not add up their matches.
	word := make([]float64, len(ix.docs))
	var touched []int32
	add := func(term string, factor float64) {
		for _, p := range ix.postings[term] {
			if !matched[p.doc] {
				matched[p.doc] = true
				docs = append(docs, p.doc)
			}
			if word[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			if ix.sumSynonyms {
				word[p.doc] += factor * p.weight
			} else {
				word[p.doc] = max(word[p.doc], factor*p.weight)
			}
		}
	}
	words := queryWords(query, ix.hints)
	for _, w := range words {
		add(w.term, 1)
		for _, syn := range ix.synonymsOf(w) {
			add(syn, ix.expand)
		}
		for _, d := range touched {
			scores[d] += word[d]
			word[d] = 0
		}
		touched = touched[:0]
	}
	exact := ix.byName[strings.ToLower(strings.TrimSpace(query))]
	if len(exact) > 0 {
		top := 0.0
		for _, d := range docs {
			top = math.Max(top, scores[d])
		}
		for _, d := range exact {
			if !matched[d] {
				matched[d] = true
				docs = append(docs, d)
			}
			scores[d] = top + 1
		}
	}
	slices.SortFunc(docs, func(a, b int32) int {
		switch {
		case scores[a] > scores[b]:
			return -1
		case scores[a] < scores[b]:
			return 1
		}
		ea, eb := ix.docs[a], ix.docs[b]
		if c := strings.Compare(ea.name, eb.name); c != 0 {
			return c
		}
		return strings.Compare(ea.group, eb.group)
	})
	if limit > 0 && len(docs) > limit {
		docs = docs[:limit]
	}
	if len(docs) == 0 {
		return nil
	}
	hits := make([]Hit, len(docs))
	for i, d := range docs {
		e := ix.docs[d]
		why := "its name"
		if !slices.Contains(exact, d) {
			why = ix.why(d, words)
		}
		hits[i] = Hit{Name: e.name, Group: e.group, Description: e.line, Why: why, Score: scores[d]}
	}
	return hits
}

// synonymsOf returns the synonyms a query word is also searched as: none
// for a literal word or without expansion.
func (ix *Index) synonymsOf(w queryWord) []string {
	if ix.expand == 0 || w.literal {
		return nil
	}
	return synonyms[w.term]
}

// Len is the number of tools indexed.
func (ix *Index) Len() int {
	if ix == nil {
		return 0
	}
	return len(ix.docs)
}

// annotationTexts returns the words of the hints that are true in an MCP
// annotations object, by hint name.
func annotationTexts(raw json.RawMessage) []string {
	var hints map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &hints) != nil {
		return nil
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(annotationWords)) {
		if hints[k] == true {
			out = append(out, annotationWords[k])
		}
	}
	return out
}

// schemaTexts collects the property names of a JSON schema and their
// descriptions: the top-level properties, and with nested those of nested
// objects, array items and anyOf/oneOf/allOf branches.
func schemaTexts(raw json.RawMessage, nested bool) (names, descs []string) {
	if len(raw) == 0 {
		return nil, nil
	}
	var schema any
	if json.Unmarshal(raw, &schema) != nil {
		return nil, nil
	}
	var walk func(s any, depth int)
	walk = func(s any, depth int) {
		obj, ok := s.(map[string]any)
		if !ok || depth > 8 {
			return
		}
		if props, ok := obj["properties"].(map[string]any); ok && (depth == 0 || nested) {
			keys := make([]string, 0, len(props))
			for k := range props {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				names = append(names, k)
				if sub, ok := props[k].(map[string]any); ok {
					if d, ok := sub["description"].(string); ok {
						descs = append(descs, d)
					}
				}
				walk(props[k], depth+1)
			}
		}
		if !nested {
			return
		}
		walk(obj["items"], depth+1)
		for _, key := range []string{"anyOf", "oneOf", "allOf"} {
			if branches, ok := obj[key].([]any); ok {
				for _, b := range branches {
					walk(b, depth+1)
				}
			}
		}
	}
	walk(schema, 0)
	return names, descs
}

// firstSentence is the first line of a description, cut after its first
// sentence (". " or a line's end) and at 200 characters.
func firstSentence(desc string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(desc), "\n")
	line = strings.TrimSpace(line)
	if i := strings.Index(line, ". "); i >= 0 {
		line = line[:i+1]
	}
	const max = 200
	if utf8.RuneCountInString(line) > max {
		rs := []rune(line)
		line = strings.TrimSpace(string(rs[:max-1])) + "…"
	}
	return line
}
