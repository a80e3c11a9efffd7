package host

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchSchema is a typical tool's: a few typed, bounded properties, none
// required, so that {} takes the fast path.
const benchSchema = `{"type": "object", "properties": {
  "path": {"type": "string", "minLength": 1},
  "limit": {"type": "integer", "minimum": 1, "maximum": 100},
  "modes": {"type": "array", "items": {"enum": ["r", "w"]}}
}}`

// BenchmarkArgumentCheck validates a typical small argument object, the
// empty one that takes the fast path, and a small value of a recursive
// schema, whose cost the check walks before validating.
func BenchmarkArgumentCheck(b *testing.B) {
	for _, bc := range []struct{ name, schema, args string }{
		{"small", benchSchema, `{"path": "src/main.go", "limit": 20, "modes": ["r", "w"]}`},
		{"empty", benchSchema, `{}`},
		{"recursive", `{"type": "object", "properties": {"x": {"$ref": "#/$defs/node"}},
		  "$defs": {"node": {"type": "object", "properties": {"y": {"$ref": "#/$defs/node"}, "n": {"type": "integer"}}}}}`,
			`{"x": {"n": 1, "y": {"n": 2, "y": {"n": 3}}}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, raw := compileOne(b, bc.schema), json.RawMessage(bc.args)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.check(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScanArgs measures the pass over the bytes that bounds depth,
// size and values before decoding: a small argument object, and one
// carrying a 1 MiB file.
func BenchmarkScanArgs(b *testing.B) {
	for _, bc := range []struct{ name, args string }{
		{"small", `{"path": "src/main.go", "limit": 20, "modes": ["r", "w"]}`},
		{"file", `{"path": "a", "content": "` + strings.Repeat(`line \"quoted\" \\ {[`, 1<<16) + `"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			raw := []byte(bc.args)
			if !json.Valid(raw) {
				b.Fatal("not JSON")
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := scanArgs(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
