package host

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
)

// fuzzSchema has a required string, a bounded integer and an array of enums.
const fuzzSchema = `{"type": "object", "required": ["path"], "additionalProperties": false, "properties": {
  "path": {"type": "string", "minLength": 1},
  "limit": {"type": "integer", "minimum": 1, "maximum": 100},
  "modes": {"type": "array", "items": {"enum": ["r", "w"]}}
}}`

// FuzzArgumentValidation: whatever a caller sends, the check never panics,
// against a flat schema or a $ref cycle; a refusal is a validation error;
// JSON nested deeper than the limit is refused; what passes really fits
// the schema.
func FuzzArgumentValidation(f *testing.F) {
	c, cycle := compileOne(f, fuzzSchema), compileOne(f, cycleSchema)
	for _, s := range []string{`{"path": "a"}`, `{"path": "a", "limit": 3, "modes": ["r"]}`, `{}`, `null`, `[]`, `{"path": 1}`,
		`{"path": "a", "limit": 1000}`, `{"path": "a", "modes": ["x"]}`, `{"path": "a", "extra": true}`, `{"path": "a", "limit": 2.5}`, `"`,
		`{"path": "a", "modes": ` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, `{"x": ` + chain(70, `"]\"}"`) + `}`,
		`{"path": "{[\\\"", "modes": [{"a": [{}]}]}`, `{"x": {"y": {"y": 1}}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var decoded any
		deep := false
		if json.Unmarshal([]byte(raw), &decoded) == nil {
			d, _ := depthOf(decoded)
			deep = d > maxArgDepth
		}
		if err := cycle.check(json.RawMessage(raw)); err != nil && toolhost.CodeOf(err) != toolhost.CodeValidation {
			t.Fatalf("refusal %v has code %s", err, toolhost.CodeOf(err))
		}
		err := c.check(json.RawMessage(raw))
		if deep && (err == nil || !strings.Contains(err.Error(), "nest deeper than 64 levels")) {
			t.Fatalf("%.100s nests deeper than the limit, but: %v", raw, err)
		}
		if err != nil {
			if toolhost.CodeOf(err) != toolhost.CodeValidation || err.Error() == "" {
				t.Fatalf("refusal %v has code %s", err, toolhost.CodeOf(err))
			}
			return
		}
		var v struct {
			Path  *string  `json:"path"`
			Limit *float64 `json:"limit"`
			Modes []string `json:"modes"`
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil || v.Path == nil || *v.Path == "" {
			t.Fatalf("%s passed but does not fit: %v", raw, err)
		}
		if v.Limit != nil && (*v.Limit < 1 || *v.Limit > 100 || *v.Limit != float64(int(*v.Limit))) {
			t.Fatalf("%s passed with limit %v", raw, *v.Limit)
		}
		for _, m := range v.Modes {
			if m != "r" && m != "w" {
				t.Fatalf("%s passed with mode %q", raw, m)
			}
		}
	})
}
