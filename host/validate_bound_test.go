package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolhost/toolhost"
	"pgregory.net/rapid"
)

// cycleSchema is a $ref cycle under a property, x → node →
// properties.y → node, which once made validation work without bound.
const cycleSchema = `{"type": "object", "properties": {"x": {"$ref": "#/$defs/node"}},
  "$defs": {"node": {"type": "object", "properties": {"y": {"$ref": "#/$defs/node"}}}}}`

// branchSchema is a $ref cycle entered twice at each level, through the
// keyword %s: the library's walk doubles with each level of the value.
const branchSchema = `{"type": "object", "properties": {"x": {"$ref": "#/$defs/node"}},
  "$defs": {"node": {"type": "object", "properties": {"y": {"%s": [{"$ref": "#/$defs/node"}, {"$ref": "#/$defs/node", "minProperties": 0}]}}}}}`

// quoteSchema quotes the value at each level that fails, in an error that
// each level above copies.
const quoteSchema = `{"type": "object", "properties": {"x": {"$ref": "#/$defs/node"}},
  "$defs": {"node": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {"y": {"$ref": "#/$defs/node"}}}]}}}`

// chain nests leaf in levels objects {"y": …}.
func chain(levels int, leaf string) string {
	return strings.Repeat(`{"y":`, levels) + leaf + strings.Repeat("}", levels)
}

// compileOne compiles the check of one tool with the schema.
func compileOne(t testing.TB, schema string) *argCheck {
	t.Helper()
	checks, err := compileChecks(&toolhost.GroupSpec{ID: "g", Tools: []toolhost.ToolSpec{{Name: "t", InputSchema: json.RawMessage(schema)}}})
	if err != nil {
		t.Fatal(err)
	}
	return checks["t"]
}

// allocated returns the bytes the heap allocated while f ran: the least of
// three runs, as goroutines of other tests that are still winding down
// allocate meanwhile too.
func allocated(f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// TestArgumentValidationIsBounded: arguments that took the host's memory
// or time without bound (18 KB took 1 GB, 54 KB killed the host; a
// branching cycle doubles the work at each level) fail at once
// with validation naming the limit, allocating little; the same check then
// still passes a good call.
func TestArgumentValidationIsBounded(t *testing.T) {
	const maxAlloc = 16 << 20
	for _, tc := range []struct {
		name, schema, args, want, good string
	}{
		{"a $ref cycle under a property, 3000 levels (18 KB)", cycleSchema,
			`{"x":` + chain(3000, "1") + `}`, "nest deeper than 64 levels, the limit, at x.y.y.y", `{"x":{"y":{}}}`},
		{"the same, 9000 levels (54 KB)", cycleSchema,
			`{"x":` + chain(9000, "1") + `}`, "nest deeper than 64 levels, the limit, at x.y.y.y", `{"x":{"y":{}}}`},
		{"3000 levels of arrays", `{"type": "object"}`,
			`{"a":` + strings.Repeat("[", 3000) + strings.Repeat("]", 3000) + `}`, "nest deeper than 64 levels, the limit, at a[0][0]", `{"a":[]}`},
		{"anyOf over a $ref cycle, 30 levels (2^30 walks)", fmt.Sprintf(branchSchema, "anyOf"),
			`{"x":` + chain(30, "{}") + `}`, "would cost more than the limit of 1024 MiB", `{"x":{"y":{}}}`},
		{"oneOf over a $ref cycle, 30 levels", fmt.Sprintf(branchSchema, "oneOf"),
			`{"x":` + chain(30, "1") + `}`, "would cost more than the limit", `{"x":{}}`},
		{"allOf over a $ref cycle, 30 levels", fmt.Sprintf(branchSchema, "allOf"),
			`{"x":` + chain(30, "{}") + `}`, "would cost more than the limit", `{"x":{"y":{}}}`},
		{"a 64 KiB value quoted at each of 62 levels", quoteSchema,
			`{"x":` + chain(60, `{"y":1,"pad":"`+strings.Repeat("a", 64<<10)+`"}`) + `}`, "would cost more than the limit", `{"x":"a"}`},
		{"17 MiB of arguments", `{"type": "object"}`,
			`{"a":"` + strings.Repeat("a", 17<<20) + `"}`, "more than the limit of 16777216", `{"a":"b"}`},
		{"2M values", `{"type": "object"}`,
			`{"a":[` + strings.Repeat("0,", 2<<20) + `0]}`, "hold more than 1048576 values, the limit", `{"a":[0]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, args := compileOne(t, tc.schema), json.RawMessage(tc.args)
			var err error
			n := allocated(func() { err = c.check(args) })
			if n > maxAlloc {
				t.Errorf("check allocated %d MiB, more than %d", n>>20, maxAlloc>>20)
			}
			t.Logf("%d KiB allocated", n>>10)
			if toolhost.CodeOf(err) != toolhost.CodeValidation || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %.300v (code %s), want validation with %q", err, toolhost.CodeOf(err), tc.want)
			}
			if len(err.Error()) > 1024 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
			if err := c.check(json.RawMessage(tc.good)); err != nil {
				t.Fatalf("afterwards, %s: %v", tc.good, err)
			}
		})
	}
}

// TestArgumentLimitsKeepGoodCalls: the limits refuse no call within them:
// 64 levels through a $ref cycle, a 16 MiB file's content, even nested
// in a list of files through $ref, and a 20-level tree.
func TestArgumentLimitsKeepGoodCalls(t *testing.T) {
	content := strings.Repeat("a", maxArgBytes-200)
	files := `{"type": "object", "properties": {"files": {"type": "array", "items": {"$ref": "#/$defs/File"}}},
	  "$defs": {"File": {"type": "object", "required": ["path", "content"], "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}`
	tree := `{"type": "object", "properties": {"t": {"$ref": "#/$defs/n"}},
	  "$defs": {"n": {"type": "object", "properties": {"l": {"$ref": "#/$defs/n"}, "r": {"$ref": "#/$defs/n"}}}}}`
	var grow func(int) string
	grow = func(d int) string {
		if d == 0 {
			return "{}"
		}
		s := grow(d - 1)
		return `{"l":` + s + `,"r":` + s + `}`
	}
	for _, tc := range []struct{ name, schema, args string }{
		{"64 levels through a $ref cycle", cycleSchema, `{"x":` + chain(62, "{}") + `}`},
		{"64 levels of arrays", `{"type": "object"}`, `{"a":` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}`},
		{"a 16 MiB file's content", `{"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}`,
			`{"path": "a", "content": "` + content + `"}`},
		{"16 MiB in a list of files through $ref", files, `{"files": [{"path": "a", "content": "` + content + `"}]}`},
		{"a tree 13 levels deep (16K nodes)", tree, `{"t":` + grow(13) + `}`},
		{"a branching cycle 8 levels deep", fmt.Sprintf(branchSchema, "anyOf"), `{"x":` + chain(8, "{}") + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := compileOne(t, tc.schema).check(json.RawMessage(tc.args)); err != nil {
				t.Fatalf("%.300v", err)
			}
		})
	}
	if err := compileOne(t, cycleSchema).check(json.RawMessage(`{"x":` + chain(63, "{}") + `}`)); err == nil || !strings.Contains(err.Error(), "64 levels") {
		t.Fatalf("65 levels: %v", err)
	}
}

// TestEndlessSchemasAreRefused: a schema whose validation would never end
// (a $ref cycle that never descends into the value: the library recursed
// until the stack overflowed, which kills the process) or whose every
// validation costs more than the limit is refused when its group
// registers, with invalid_group_def, and the manager goes on.
func TestEndlessSchemasAreRefused(t *testing.T) {
	var diamonds strings.Builder // d(i) holds d(i-1) twice: 2^40 walks for {}
	diamonds.WriteString(`{"type": "object", "allOf": [{"$ref": "#/$defs/d40"}], "$defs": {"d0": {"minProperties": 0}`)
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&diamonds, `, "d%d": {"allOf": [{"$ref": "#/$defs/d%d"}, {"$ref": "#/$defs/d%d"}]}`, i, i-1, i-1)
	}
	diamonds.WriteString("}}")
	for _, tc := range []struct{ name, schema, want string }{
		{"the root refers to itself", `{"type": "object", "$ref": "#"}`, "$ref cycle through #"},
		{"through allOf", `{"type": "object", "allOf": [{"$ref": "#"}]}`, "$ref cycle through #"},
		{"under a property", `{"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}}`, "cycle through #/properties/a"},
		{"two definitions", `{"type": "object", "properties": {"p": {"$ref": "#/$defs/a"}},
		  "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/a"}]}}}`, "never descends into the value"},
		{"a dynamic reference", `{"type": "object", "$dynamicAnchor": "n", "allOf": [{"$dynamicRef": "#n"}]}`, "never descends"},
		{"2^40 walks for {}", diamonds.String(), "validating even {} would cost more than the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager()
			_, err := m.Register(&Group{Spec: toolhost.GroupSpec{ID: "g", Tools: []toolhost.ToolSpec{{Name: "t", InputSchema: json.RawMessage(tc.schema)}}}, Kind: SourcePlugin})
			if !errors.Is(err, toolhost.ErrInvalidGroupDef) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want invalid_group_def with %q", err, tc.want)
			}
			if len(m.IDs()) != 0 {
				t.Fatal("group registered")
			}
			if _, err := m.Register(&Group{Spec: toolhost.GroupSpec{ID: "g", Tools: []toolhost.ToolSpec{{Name: "t", InputSchema: json.RawMessage(cycleSchema)}}}, Kind: SourcePlugin}); err != nil {
				t.Fatalf("afterwards: %v", err)
			}
		})
	}
}

// TestCostBoundsTheLibrarysWork: over schemas of every kind of reference
// and applicator, and arguments that pass and fail, the library allocates
// no more validating than cost says (but for the pools a GC empties, the
// regexp matchers' for one, which it may refill), cost is within the bound
// that lets small arguments skip it, and the check validates as the
// library does (the error or its absence is the library's own).
func TestCostBoundsTheLibrarysWork(t *testing.T) {
	const refill = 64 << 10
	defs := `"$defs": {"n": {"type": "object", "properties": {"y": {"$ref": "#/$defs/n"}}},
	  "a~b/c": {"$anchor": "anc", "type": "integer", "minimum": 1}}`
	for _, tc := range []struct {
		name, schema string
		args         []string
	}{
		{"cycle", cycleSchema, []string{`{"x":` + chain(60, "{}") + `}`, `{"x":` + chain(60, "1") + `}`}},
		{"anyOf", fmt.Sprintf(branchSchema, "anyOf"), []string{`{"x":` + chain(12, "{}") + `}`, `{"x":` + chain(12, "1") + `}`}},
		{"oneOf", fmt.Sprintf(branchSchema, "oneOf"), []string{`{"x":` + chain(12, "{}") + `}`, `{"x":` + chain(12, "1") + `}`}},
		{"allOf", fmt.Sprintf(branchSchema, "allOf"), []string{`{"x":` + chain(12, "{}") + `}`, `{"x":` + chain(12, "1") + `}`}},
		{"quoted", quoteSchema, []string{`{"x":` + chain(40, `{"y":1,"pad":"`+strings.Repeat("a", 4<<10)+`"}`) + `}`}},
		{"escaped pointer, anchor, root", `{"type": "object", "properties": {"p": {"$ref": "#/$defs/a~0b~1c"}, "q": {"$ref": "#anc"},
		  "r": {"$ref": "#"}, "s": {"$ref": "#/$defs/n"}}, ` + defs + `}`,
			[]string{`{"p": 2, "q": 3, "r": {"p": 1}, "s": {"y": {"y": {}}}}`, `{"p": 0}`, `{"r": {"r": {"q": "x"}}}`}},
		{"nested $id", `{"type": "object", "$id": "https://x.example/root.json", "properties": {"p": {"$ref": "sub.json#/$defs/i"},
		  "q": {"$ref": "https://x.example/root.json#/properties/p"}}, "$defs": {"sub": {"$id": "sub.json", "$defs": {"i": {"type": "integer"}}}}}`,
			[]string{`{"p": 1, "q": 2}`, `{"q": "x"}`}},
		{"dynamic", `{"type": "object", "$dynamicAnchor": "node", "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}}`,
			[]string{`{"kids": [{"kids": []}, {"kids": [{}]}]}`, `{"kids": [1]}`}},
		{"draft 7", `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "definitions": {"n": {"$id": "#n", "type": "object",
		  "properties": {"y": {"$ref": "#n"}}, "dependencies": {"y": {"required": ["z"]}}}}, "properties": {"x": {"$ref": "#/definitions/n", "type": "string"}},
		  "additionalProperties": {"type": "array", "items": [{"type": "string"}], "additionalItems": {"$ref": "#/definitions/n"}}}`,
			[]string{`{"x": {"y": {"y": {}, "z": 1}, "z": 1}, "o": ["a", {"z": 1}]}`, `{"o": ["a", 1]}`, `{"x": {"y": 2}}`}},
		{"arrays and patterns", `{"type": "object", "patternProperties": {"^a": {"type": "array", "prefixItems": [{"type": "string"}],
		  "items": {"$ref": "#"}, "contains": {"type": "object"}, "uniqueItems": true}, "b$": {"enum": [1, 2, "three"]}},
		  "propertyNames": {"maxLength": 8}, "additionalProperties": false, "unevaluatedProperties": {"const": 1},
		  "if": {"required": ["ab"]}, "then": {"required": ["a"]}, "else": {"not": {"required": ["bb"]}}, "dependentSchemas": {"a": {"maxProperties": 9}}}`,
			[]string{`{"ab": ["s", {}, {"a": ["t", {}]}], "a": ["u", {}], "bb": 2}`, `{"ab": ["s", {}, {}]}`, `{"toolongname": 1}`, `{"c": 1}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compileOne(t, tc.schema)
			for _, args := range tc.args {
				var v any
				if err := json.Unmarshal([]byte(args), &v); err != nil {
					t.Fatal(err)
				}
				cost := c.graph.cost(v)
				shape, err := scanArgs([]byte(args))
				if err != nil {
					t.Fatal(err)
				}
				if !c.graph.mayExceed(shape, len(args)) && cost > satAdd(satMul(c.graph.perValue, uint64(shape.values)), satMul(c.graph.perByte, uint64(len(args)))) {
					t.Errorf("%.80s: cost %d, more than its static bound", args, cost)
				}
				var want error
				if n := allocated(func() { want = c.schema.Validate(v) }); n > cost+refill {
					t.Errorf("%.80s: the library allocated %d bytes, more than the cost %d", args, n, cost)
				}
				if got := c.check(json.RawMessage(args)); (got == nil) != (want == nil) {
					t.Errorf("%.80s: check says %v, the library %v", args, got, want)
				}
			}
		})
	}
}

// TestSchemaGraphKnowsEveryKeyword: every field of jsonschema.Schema that
// holds schemas is one eachChild visits, so no subschema escapes the
// graph (a new one in the library fails here until the graph knows it).
func TestSchemaGraphKnowsEveryKeyword(t *testing.T) {
	var s jsonschema.Schema
	want := map[*jsonschema.Schema]string{}
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		c := &jsonschema.Schema{Title: name}
		switch f.Type() {
		case reflect.TypeFor[*jsonschema.Schema]():
			f.Set(reflect.ValueOf(c))
		case reflect.TypeFor[[]*jsonschema.Schema]():
			f.Set(reflect.ValueOf([]*jsonschema.Schema{c}))
		case reflect.TypeFor[map[string]*jsonschema.Schema]():
			f.Set(reflect.ValueOf(map[string]*jsonschema.Schema{"k": c}))
		default:
			continue
		}
		want[c] = name
	}
	eachChild(&s, func(_, _ string, c *jsonschema.Schema) { delete(want, c) })
	for _, name := range want {
		t.Errorf("eachChild skips Schema.%s", name)
	}
}

// depthOf is the nesting of arrays and objects in a decoded value.
func depthOf(v any) (depth, values int) {
	var children []any
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			children = append(children, c)
		}
	case []any:
		children = v
	default:
		return 0, 1
	}
	values = 1
	for _, c := range children {
		d, n := depthOf(c)
		depth, values = max(depth, d), values+n
	}
	return depth + 1, values
}

// nestedGen draws a value nested about levels deep along one path, with
// siblings of any kind at each level.
func nestedGen(t *rapid.T, levels int) any {
	leaf := rapid.OneOf(
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.SampledFrom([]string{`"]}`, `\"{[`, `\\`, `\`, "\x00\xff"}), func(s string) any { return s }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Just[any](nil), rapid.Just[any](true),
		rapid.Just[any](map[string]any{}), rapid.Just[any]([]any{}),
		rapid.Just[any](map[string]any{"[": []any{map[string]any{"{": "}"}}}),
	)
	if levels == 0 {
		return leaf.Draw(t, "leaf")
	}
	inner := nestedGen(t, levels-1)
	siblings := rapid.SliceOfN(leaf, 0, 3).Draw(t, "siblings")
	if rapid.Bool().Draw(t, "object") {
		m := map[string]any{}
		for i, s := range siblings {
			m[fmt.Sprint(i)] = s
		}
		m[rapid.String().Draw(t, "key")] = inner
		return m
	}
	at := rapid.IntRange(0, len(siblings)).Draw(t, "at")
	return append(siblings[:at:at], append([]any{inner}, siblings[at:]...)...)
}

// TestScanArgsMeasuresDepth: for any JSON value, however nested and laid
// out, scanArgs finds the nesting its decoding has while within the
// limit, and refuses, naming it, past the limit; its count of values is
// at least the decoded one.
func TestScanArgsMeasuresDepth(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		levels := rapid.OneOf(rapid.IntRange(0, maxArgDepth+6), rapid.IntRange(maxArgDepth-3, maxArgDepth+3)).Draw(t, "levels")
		v := nestedGen(t, levels)
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if rapid.Bool().Draw(t, "indent") {
			var b bytes.Buffer
			if err := json.Indent(&b, raw, "\n", rapid.SampledFrom([]string{" ", "\t", "\r\n "}).Draw(t, "indent by")); err != nil {
				t.Fatal(err)
			}
			raw = b.Bytes()
		}
		var decoded any
		if err := json.Unmarshal(raw, &decoded); err != nil {
			t.Fatal(err)
		}
		depth, values := depthOf(decoded)
		shape, err := scanArgs(raw)
		switch {
		case depth > maxArgDepth:
			if toolhost.CodeOf(err) != toolhost.CodeValidation || !strings.Contains(err.Error(), "nest deeper than 64 levels") {
				t.Fatalf("depth %d: %v", depth, err)
			}
		case err != nil:
			t.Fatalf("depth %d: %v", depth, err)
		case shape.depth != depth || shape.values < values:
			t.Fatalf("scanned %+v, decoded depth %d and %d values", shape, depth, values)
		}
	})
}
