package mcpoffer

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestInputSchema(t *testing.T) {
	nested := func(depth int) string {
		return `{"type":"object","x":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
	}
	for _, c := range []struct {
		name, in string
		want     string // "" with err: refused
		err      string
	}{
		{"object", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"nullable", `{"type":["object","null"],"properties":{"a":{"type":"string","description":"<a> & b"}},"required":["a"]}`,
			`{"properties":{"a":{"type":"string","description":"<a> & b"}},"required":["a"],"type":"object"}`, ""},
		{"list of one", `{"type":["object"]}`, `{"type":"object"}`, ""},
		{"defs kept", `{"type":["null","object"],"$defs":{"d":{"type":"integer"}},"properties":{"n":{"$ref":"#/$defs/d"}}}`,
			`{"$defs":{"d":{"type":"integer"}},"properties":{"n":{"$ref":"#/$defs/d"}},"type":"object"}`, ""},
		{"no type", `{}`, `{"type":"object"}`, ""},
		{"no type, properties", `{"properties":{"a":{}}}`, `{"properties":{"a":{}},"type":"object"}`, ""},
		{"empty", ``, `{"type":"object"}`, ""},
		{"null", `null`, `{"type":"object"}`, ""},
		{"deep enough", nested(maxSchemaDepth), nested(maxSchemaDepth), ""},
		{"too deep", nested(maxSchemaDepth + 1), "", "nests 997 levels deep"},
		{"brackets in strings", `{"type":"object","description":"` + strings.Repeat("[{", 2000) + `\"["}`, "", ""},
		{"not an object", `[]`, "", "not a JSON object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := InputSchema(json.RawMessage(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("= %s, %v; want an error with %q", got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "" {
				c.want = c.in
			}
			if string(got) != c.want {
				t.Errorf("= %s\nwant %s", got, c.want)
			}
		})
	}
}
