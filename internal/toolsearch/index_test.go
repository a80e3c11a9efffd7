package toolsearch

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"readTextFile", []string{"read", "text", "fil"}},
		{"fs_read_text_file", []string{"fs", "read", "text", "fil"}},
		{"HTTPRequest", []string{"http", "request"}},
		{"outerHTML of getHTTPResponseCode", []string{"outer", "html", "get", "http", "respons", "cod"}},
		{"list-directory.with_sizes", []string{"list", "directory", "siz"}},
		{"The files of the project", []string{"fil", "project"}},
		{"What's in it?", nil},
		{"sha256 o200k v2Api", []string{"sha256", "o200k", "v2", "api"}},
		{"résumé Überblick", []string{"résumé", "überblick"}},
		{"Take a SCREENSHOT, then wait", []string{"tak", "screenshot", "wait"}},
	} {
		if got := tokenize(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("tokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"getHTTPResponseCode", []string{"get", "HTTP", "Response", "Code"}},
		{"snake_case-and.dots", []string{"snake", "case", "and", "dots"}},
		{"v2Api", []string{"v2", "Api"}},
		{"ÜberFile", []string{"Über", "File"}},
		{"ALLCAPS", []string{"ALLCAPS"}},
		{"  --  ", nil},
	} {
		if got := splitWords(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStem(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// plurals
		{"files", "fil"}, {"file", "fil"},
		{"entities", "entity"}, {"directories", "directory"},
		{"matches", "match"}, {"processes", "process"}, {"boxes", "box"},
		{"status", "status"}, {"analysis", "analysis"}, {"ids", "id"},
		// -ing, -ed, final e: one stem for every form
		{"write", "writ"}, {"writes", "writ"}, {"writing", "writ"},
		{"type", "typ"}, {"types", "typ"}, {"typed", "typ"}, {"typing", "typ"},
		{"running", "run"}, {"stopped", "stop"}, {"gzipped", "gzip"}, {"embedded", "embed"},
		{"added", "add"}, {"add", "add"}, {"calling", "call"}, {"passed", "pass"},
		{"copied", "copy"}, {"copies", "copy"},
		// -ly
		{"currently", "current"}, {"recursively", "recursiv"}, {"only", "only"},
		// left alone
		{"string", "string"}, {"need", "need"}, {"use", "use"}, {"uses", "use"},
		{"go", "go"}, {"42", "42"}, {"o200k", "o200k"}, {"résumés", "résumés"},
	} {
		if got := stem(tc.in); got != tc.want {
			t.Errorf("stem(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSynonyms(t *testing.T) {
	// Groups link words both ways, by stem, and never a word to itself.
	for _, tc := range []struct{ a, b string }{
		{"folder", "directory"},
		{"picture", "screenshot"},
		{"remember", "memory"},
		{"pictures", "photo"},
	} {
		a, b := tokenize(tc.a)[0], tokenize(tc.b)[0]
		if !slices.Contains(synonyms[a], b) || !slices.Contains(synonyms[b], a) {
			t.Errorf("%s and %s are not synonyms: %v / %v", tc.a, tc.b, synonyms[a], synonyms[b])
		}
	}
	for term, syns := range synonyms {
		if slices.Contains(syns, term) {
			t.Errorf("%s is its own synonym", term)
		}
		if !slices.IsSorted(syns) {
			t.Errorf("the synonyms of %s are not sorted: %v", term, syns)
		}
	}
}

func TestQueryWords(t *testing.T) {
	lit := func(term string) queryWord { return queryWord{term: term, literal: true} }
	word := func(term string) queryWord { return queryWord{term: term} }
	terms := func(ws []queryWord) []queryWord {
		for i := range ws {
			ws[i].word = ""
		}
		return ws
	}
	for _, tc := range []struct {
		in   string
		want []queryWord
	}{
		{"open main.go", []queryWord{word("fil"), lit("go"), lit("main"), word("open")}},
		{"view logo.PNG!", []queryWord{word("fil"), word("imag"), lit("logo"), lit("png"), word("view")}},
		{"fetch https://api.example.com/users", []queryWord{lit("api"), lit("com"), lit("exampl"), word("fetch"), lit("http"), word("url"), lit("user")}},
		{"make build/output", []queryWord{lit("build"), word("mak"), lit("output"), word("path")}},
		{"run go test ./...", []queryWord{word("go"), word("run"), word("test")}},
		{"document.title", []queryWord{word("document"), word("titl")}},
		{"the file main.go", []queryWord{word("fil"), lit("go"), lit("main")}},
		{".go", []queryWord{word("go")}},
		{"", nil},
	} {
		if got := terms(queryWords(tc.in, true)); !slices.Equal(got, tc.want) {
			t.Errorf("queryWords(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got, want := terms(queryWords("open main.go", false)), []queryWord{word("go"), word("main"), word("open")}; !slices.Equal(got, want) {
		t.Errorf("without hints: %v, want %v", got, want)
	}
}

func TestSchemaTexts(t *testing.T) {
	schema := json.RawMessage(`{
		"type": "object",
		"properties": {
			"path": {"type": "string", "description": "the file to read"},
			"entities": {"type": "array", "items": {"type": "object", "properties": {
				"entityType": {"type": "string", "description": "what it is"},
				"observations": {"type": "array", "items": {"type": "string"}}
			}}},
			"target": {"anyOf": [{"type": "object", "properties": {"selector": {"type": "string"}}}]}
		}
	}`)
	names, descs := schemaTexts(schema, true)
	if want := []string{"entities", "entityType", "observations", "path", "target", "selector"}; !slices.Equal(names, want) {
		t.Errorf("nested names %q, want %q", names, want)
	}
	if want := []string{"what it is", "the file to read"}; !slices.Equal(descs, want) {
		t.Errorf("nested descriptions %q, want %q", descs, want)
	}
	names, descs = schemaTexts(schema, false)
	if want := []string{"entities", "path", "target"}; !slices.Equal(names, want) {
		t.Errorf("top-level names %q, want %q", names, want)
	}
	if want := []string{"the file to read"}; !slices.Equal(descs, want) {
		t.Errorf("top-level descriptions %q, want %q", descs, want)
	}
	for _, bad := range []string{"", "null", "[1,2]", `{"properties": 3}`, "{not json"} {
		if names, descs := schemaTexts(json.RawMessage(bad), true); names != nil || descs != nil {
			t.Errorf("schemaTexts(%q) = %q, %q, want nothing", bad, names, descs)
		}
	}
}

func TestFirstSentence(t *testing.T) {
	long := strings.Repeat("word ", 60)
	for _, tc := range []struct{ in, want string }{
		{"Read a file. Then more.", "Read a file."},
		{"  Line one\nline two", "Line one"},
		{"Returns the sum of two numbers", "Returns the sum of two numbers"},
		{"Version 1.2 is here. Next.", "Version 1.2 is here."},
		{"", ""},
		{long, strings.TrimSpace(long[:199]) + "…"},
	} {
		if got := firstSentence(tc.in); got != tc.want {
			t.Errorf("firstSentence(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// toy is a small catalog whose scores the tests can reason about.
var toy = []Doc{
	{Name: "read_file", Group: "workspace", Description: "Read a text file. Pages by offset.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
	{Name: "write_file", Group: "workspace", Description: "Write a text file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)},
	{Name: "b_twin", Group: "g", Description: "Identical twins."},
	{Name: "a_twin", Group: "g", Description: "Identical twins."},
	{Name: "screenshot", Group: "chrome", Description: "Capture the page as a PNG."},
}

func TestSearch(t *testing.T) {
	ix := New(toy)
	names := func(hits []Hit) []string {
		var out []string
		for _, h := range hits {
			out = append(out, h.Name)
		}
		return out
	}
	t.Run("ranking", func(t *testing.T) {
		hits := ix.Search("read the file", 0)
		if got := names(hits); len(got) != 2 || got[0] != "read_file" || got[1] != "write_file" {
			t.Errorf("hits %v, want read_file then write_file", got)
		}
		if hits[0].Group != "workspace" || hits[0].Description != "Read a text file." || hits[0].Score <= hits[1].Score {
			t.Errorf("first hit %+v, second %+v", hits[0], hits[1])
		}
	})
	t.Run("ties by name", func(t *testing.T) {
		hits := ix.Search("twins", 0)
		if got := names(hits); !slices.Equal(got, []string{"a_twin", "b_twin"}) || hits[0].Score != hits[1].Score {
			t.Errorf("hits %+v, want a_twin and b_twin with equal scores", hits)
		}
	})
	t.Run("limit", func(t *testing.T) {
		all := ix.Search("file twins", 0)
		if len(all) != 4 {
			t.Fatalf("%d hits, want 4: %v", len(all), names(all))
		}
		for _, limit := range []int{-1, 0, 1, 2, 4, 10} {
			want := all
			if limit > 0 && limit < len(all) {
				want = all[:limit]
			}
			if got := ix.Search("file twins", limit); !slices.Equal(got, want) {
				t.Errorf("limit %d: %v, want %v", limit, names(got), names(want))
			}
		}
	})
	t.Run("no hits", func(t *testing.T) {
		for _, q := range []string{"", "   ", "the of and to", "zzzz qqqq", "?!"} {
			if hits := ix.Search(q, 5); hits != nil {
				t.Errorf("Search(%q) = %v, want no hits", q, hits)
			}
		}
	})
	t.Run("synonyms", func(t *testing.T) {
		if got := names(ix.Search("take a picture", 1)); !slices.Equal(got, []string{"screenshot"}) {
			t.Errorf("take a picture: %v, want screenshot", got)
		}
	})
	t.Run("why", func(t *testing.T) {
		for _, tc := range []struct{ query, tool, why string }{
			{"take a picture", "screenshot", "picture → screenshot (synonym): name"},
			{"save it in notes.txt", "write_file", "notes.txt → file: name, description; save → write (synonym): name, description"},
			{"readTextFile", "read_file", "read: name, description; file: name, description; text: description"},
			{"identical twins", "a_twin", "twins: name, description; identical: description"},
			{"write_file", "write_file", "its name"},
		} {
			hits := ix.Search(tc.query, 1)
			if len(hits) != 1 || hits[0].Name != tc.tool || hits[0].Why != tc.why {
				t.Errorf("Search(%q) = %+v, want %s because %q", tc.query, hits, tc.tool, tc.why)
			}
		}
	})
	t.Run("exact name first", func(t *testing.T) {
		// write_file matches "file" as much as read_file; the exact name wins.
		for _, q := range []string{"write_file", " WRITE_FILE ", "read_file"} {
			if got := ix.Search(q, 0); len(got) == 0 || got[0].Name != strings.ToLower(strings.TrimSpace(q)) {
				t.Errorf("Search(%q) = %v", q, names(got))
			}
		}
	})
	t.Run("empty index", func(t *testing.T) {
		var nilIndex *Index
		for _, ix := range []*Index{New(nil), nilIndex} {
			if hits := ix.Search("file", 3); hits != nil || ix.Len() != 0 {
				t.Errorf("an empty index found %v", hits)
			}
		}
	})
}

// TestCatalogNames: on the real catalog, every tool's name as a query
// ranks that tool first.
func TestCatalogNames(t *testing.T) {
	docs := loadCatalog(t).Tools
	ix := New(docs)
	if ix.Len() != len(docs) {
		t.Fatalf("Len %d, want %d", ix.Len(), len(docs))
	}
	for _, d := range docs {
		if hits := ix.Search(d.Name, 3); len(hits) == 0 || hits[0].Name != d.Name || hits[0].Group != d.Group {
			t.Errorf("Search(%q) = %v", d.Name, hits)
		}
	}
}

// TestConcurrentSearch runs the task phrasings from several goroutines at
// once (under -race in CI) and expects what one goroutine gets alone.
func TestConcurrentSearch(t *testing.T) {
	docs := loadCatalog(t).Tools
	qs := loadQueries(t, docs)
	ix := New(docs)
	want := make([][]Hit, len(qs))
	for i, q := range qs {
		want[i] = ix.Search(q.Query, 5)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range qs {
				i := (i + g*7) % len(qs)
				if got := ix.Search(qs[i].Query, 5); !slices.Equal(got, want[i]) {
					t.Errorf("goroutine %d, %q: %v, want %v", g, qs[i].Query, got, want[i])
				}
			}
		})
	}
	wg.Wait()
}

// TestSearchProperties: for random catalogs and queries, every hit is a
// tool of the catalog (its name with its group), once; hits come by score,
// highest first, ties by name; scores are positive and finite; there are
// at most limit of them, and a smaller limit returns a prefix of the full
// list; the same search gives the same hits; and a query that is exactly a
// tool's name (in any case, with spaces around) ranks that tool first.
func TestSearchProperties(t *testing.T) {
	vocabulary := []string{"read", "write", "file", "files", "directory", "folder", "page", "browser",
		"http", "request", "memory", "entity", "agent", "role", "search", "list", "the", "a", "of",
		"picture", "screenshot", "json", "run", "command", "main.go", "https://example.com/x", "src/lib"}
	word := rapid.OneOf(rapid.SampledFrom(vocabulary), rapid.StringMatching(`[a-zA-Z0-9_.\-/ ]{1,12}`))
	text := func(t *rapid.T, label string, max int) string {
		return strings.Join(rapid.SliceOfN(word, 0, max).Draw(t, label), " ")
	}
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z][a-z0-9_]{0,20}`), 1, 25, rapid.ID[string]).Draw(t, "names")
		docs := make([]Doc, len(names))
		groupOf := map[string]string{}
		for i, name := range names {
			props := map[string]any{}
			for _, p := range rapid.SliceOfN(rapid.StringMatching(`[a-z][a-zA-Z_]{0,10}`), 0, 4).Draw(t, "props") {
				props[p] = map[string]any{"type": "string", "description": text(t, "propdesc", 5)}
			}
			schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
			docs[i] = Doc{Name: name, Group: rapid.SampledFrom([]string{"fs", "memory", "chrome", "org_management"}).Draw(t, "group"),
				Description: text(t, "description", 12), InputSchema: schema}
			groupOf[name] = docs[i].Group
		}
		ix := New(docs)
		query := rapid.OneOf(
			rapid.Just(text(t, "query", 6)),
			rapid.Map(rapid.SampledFrom(names), func(n string) string { return "  " + strings.ToUpper(n) + " " }),
		).Draw(t, "query")
		limit := rapid.IntRange(-2, 30).Draw(t, "limit")

		hits := ix.Search(query, limit)
		if limit > 0 && len(hits) > limit {
			t.Fatalf("%d hits, limit %d", len(hits), limit)
		}
		seen := map[string]bool{}
		for i, h := range hits {
			if g, ok := groupOf[h.Name]; !ok || g != h.Group {
				t.Fatalf("hit %+v is not a tool of the catalog", h)
			}
			if seen[h.Name] {
				t.Fatalf("%s twice", h.Name)
			}
			seen[h.Name] = true
			if !(h.Score > 0) || math.IsInf(h.Score, 0) {
				t.Fatalf("hit %+v: score not positive and finite", h)
			}
			if h.Why == "" || strings.Count(h.Why, ";") >= maxWhy {
				t.Fatalf("hit %+v: Why empty or naming more than %d words", h, maxWhy)
			}
			if i > 0 {
				prev := hits[i-1]
				if prev.Score < h.Score || prev.Score == h.Score && prev.Name >= h.Name {
					t.Fatalf("hit %d %+v after %+v", i, h, prev)
				}
			}
		}
		all := ix.Search(query, 0)
		if !slices.Equal(hits, all[:len(hits)]) {
			t.Fatalf("limit %d: %v is not a prefix of %v", limit, hits, all)
		}
		if again := ix.Search(query, 0); !slices.Equal(all, again) {
			t.Fatalf("the same search gave %v, then %v", all, again)
		}
		if name := strings.ToLower(strings.TrimSpace(query)); groupOf[name] != "" {
			if len(hits) == 0 && limit != 0 || len(all) == 0 || all[0].Name != name {
				t.Fatalf("query %q: hits %v, want %s first", query, all, name)
			}
		}
	})
}

// BenchmarkSearch is one find_tools search (its index built once per role
// view, as the host keeps it) over the real catalog of 67 tools and over
// 2000, the development phrasings (the old set and blind slot a) taken in
// turn, five hits asked for (find_tools' default), each hit with its Why.
// The targets, a small share of a call's time: p50 ≤ 2 ms on the catalog,
// ≤ 20 ms on 2000 tools.
func BenchmarkSearch(b *testing.B) {
	docs := loadCatalog(b).Tools
	qs := append(loadQueries(b, docs), blindSlot(b, docs, "a")...)
	for _, n := range []int{len(docs), 2000} {
		ix := New(Replicate(docs, n))
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ix.Search(qs[i%len(qs)].Query, 5)
				i++
			}
		})
	}
}

// BenchmarkNew indexes the real catalog and 2000 tools: what the first
// find_tools of a role view costs besides its search.
func BenchmarkNew(b *testing.B) {
	docs := loadCatalog(b).Tools
	for _, n := range []int{len(docs), 2000} {
		big := Replicate(docs, n)
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				New(big)
			}
		})
	}
}

// ExampleIndex_Search finds the tool for a task among a few definitions.
func ExampleIndex_Search() {
	ix := New([]Doc{
		{Name: "navigate", Group: "chrome", Description: "Load a page in the browser's tab."},
		{Name: "screenshot", Group: "chrome", Description: "Take a PNG screenshot of the viewport. It is saved under the workspace."},
		{Name: "read_file", Group: "workspace", Description: "Read lines of a text file."},
	})
	for _, h := range ix.Search("take a picture of the page", 2) {
		fmt.Printf("%s (%s): %s\n", h.Name, h.Group, h.Description)
	}
	// Output:
	// screenshot (chrome): Take a PNG screenshot of the viewport.
	// navigate (chrome): Load a page in the browser's tab.
}

// FuzzSearch: any query, valid UTF-8 or not, returns hits of the toy
// catalog, highest score first, and tokenizes to non-empty lower-case
// terms.
func FuzzSearch(f *testing.F) {
	for _, seed := range []string{"", "read the file", "readTextFile", "ÜberFILE main.go", "https://x.y/z",
		"a/b/c.png", "\xff\xfeHTTP", "ǅungla", "ΣΑΣ", "x.go.go", "//", "."} {
		f.Add(seed)
	}
	ix := New(toy)
	f.Fuzz(func(t *testing.T, query string) {
		for _, term := range tokenize(query) {
			if term == "" || term != strings.ToLower(term) {
				t.Fatalf("tokenize(%q): term %q", query, term)
			}
		}
		hits := ix.Search(query, 3)
		if len(hits) > 3 {
			t.Fatalf("%d hits", len(hits))
		}
		for i := 1; i < len(hits); i++ {
			if hits[i-1].Score < hits[i].Score {
				t.Fatalf("hits out of order: %v", hits)
			}
		}
	})
}
