package toolsearch

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// The evaluation data committed in testdata — the catalog, the phrasings
// the ranking was tuned on and the frozen blind set — and recall on them:
// for this package's tests, and for the bench's report (docs/BENCHMARKS.md).

// Catalog is testdata/catalog.json: the tools a caller without a role sees
// with the first-party modules, the runtime's groups (but tool_search) and
// the npm MCP servers filesystem (tool_prefix "fs_"), memory and
// everything loaded.
type Catalog struct {
	About  string         `json:"about"`
	Groups []CatalogGroup `json:"groups"`
	Tools  []Doc          `json:"tools"`
}

// CatalogGroup is one group of the catalog.
type CatalogGroup struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Source      string `json:"source"`
}

// LoadCatalog reads a catalog, each tool with its group's description.
func LoadCatalog(path string) (Catalog, error) {
	var c Catalog
	if err := readJSON(path, &c); err != nil {
		return c, err
	}
	desc := map[string]string{}
	for _, g := range c.Groups {
		desc[g.ID] = g.Description
	}
	for i := range c.Tools {
		c.Tools[i].GroupDescription = desc[c.Tools[i].Group]
	}
	return c, nil
}

// Query is one task phrasing: of testdata/queries.json (the phrasings the
// ranking was tuned on, Set dev or holdout) or of
// testdata/queries_blind.json (the blind set, Slot a, b or c).
type Query struct {
	Query string   `json:"query"`
	Tool  string   `json:"tool"`           // the tool the task needs
	Also  []string `json:"also,omitempty"` // other tools of the catalog that do the job as well
	Set   string   `json:"set,omitempty"`
	Slot  string   `json:"slot,omitempty"`
}

// QueryFile is a file of phrasings.
type QueryFile struct {
	About   string  `json:"about,omitempty"`
	Queries []Query `json:"queries"`
}

// LoadQueries reads a file of phrasings, those of slot when it is not
// empty, failing on a tool that is not among docs.
func LoadQueries(path string, docs []Doc, slot string) ([]Query, error) {
	var f QueryFile
	if err := readJSON(path, &f); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, d := range docs {
		names[d.Name] = true
	}
	var out []Query
	for i, q := range f.Queries {
		if slot != "" && q.Slot != slot {
			continue
		}
		for _, tool := range append([]string{q.Tool}, q.Also...) {
			if !names[tool] {
				return nil, fmt.Errorf("%s: query %d: tool %s is not in the catalog", path, i, tool)
			}
		}
		out = append(out, q)
	}
	return out, nil
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Recall is the share of phrasings whose tool (or one of its alternatives)
// is among the top 1, 3 and 5 hits (5: find_tools' default), and the
// phrasings that missed the top 3.
type Recall struct {
	At1, At3, At5        float64
	StrictAt1, StrictAt3 float64 // counting only the phrasing's own tool
	N                    int
	Misses               []string
}

// Measure runs every phrasing against ix.
func Measure(ix *Index, qs []Query) Recall {
	var r Recall
	var hit1, hit3, hit5, strict1, strict3 int
	for _, q := range qs {
		hits := ix.Search(q.Query, 5)
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
			hit5++
		}
		if rank >= 1 && rank <= 3 {
			hit3++
		} else {
			var got []string
			for _, h := range hits[:min(3, len(hits))] {
				got = append(got, h.Name)
			}
			r.Misses = append(r.Misses, q.Query+" → want "+q.Tool+", got ["+strings.Join(got, " ")+"]")
		}
		if strict == 1 {
			strict1++
		}
		if strict >= 1 && strict <= 3 {
			strict3++
		}
	}
	r.N = len(qs)
	n := float64(len(qs))
	r.At1, r.At3, r.At5 = float64(hit1)/n, float64(hit3)/n, float64(hit5)/n
	r.StrictAt1, r.StrictAt3 = float64(strict1)/n, float64(strict3)/n
	return r
}

// Replicate is the catalog copied until it holds n tools, each copy's
// names and groups suffixed (read_file_2 of workspace_2): a deployment of
// many modules whose tools share the real ones' vocabulary, so that every
// posting list is as long as it gets.
func Replicate(docs []Doc, n int) []Doc {
	if len(docs) == 0 {
		return nil
	}
	out := make([]Doc, 0, n)
	for i := 0; len(out) < n; i++ {
		for _, d := range docs {
			if len(out) == n {
				break
			}
			if i > 0 {
				d.Name, d.Group = fmt.Sprintf("%s_%d", d.Name, i), fmt.Sprintf("%s_%d", d.Group, i)
			}
			out = append(out, d)
		}
	}
	return out
}
