package host

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolhost/toolhost"
)

// Limits on a call's arguments. They bound argument validation in depth,
// size and time whatever the tool's schema, so that no argument a caller
// sends costs the host more than a known amount: scanArgs holds the first three in one pass over the bytes, before
// anything decodes them, and schemaGraph.cost the last, before the schema
// library walks the value.
const (
	// maxArgDepth is the deepest nesting of arrays and objects, the
	// arguments object being level 1.
	maxArgDepth = 64
	// maxArgBytes is the largest call body the HTTP API takes ("calls may
	// carry file contents"): no call it accepts is refused for its size
	// alone, and the other ways in (the runtime, an approver's modification)
	// are held to the same bound.
	maxArgBytes = 16 << 20
	// maxArgValues bounds the JSON values decoded, whether or not the schema
	// looks at them: 16 MiB of [0,0,…] would be 8M values, seconds and
	// hundreds of MB to decode.
	maxArgValues = 1 << 20
	// maxValidationCost bounds schemaGraph.cost, in bytes the schema
	// library allocates: about 2M calls of its validator, or 1 GiB of error
	// text it formats and copies, either about a second of one core. A 16
	// MiB file's content costs 100-800 MiB, as deep as the schema nests it.
	maxValidationCost = 1 << 30
)

// argCheck validates one tool's arguments against its input schema.
type argCheck struct {
	schema     *jsonschema.Resolved
	graph      *schemaGraph
	emptyValid bool // {} passes, so an empty call skips the work
}

// compileChecks resolves the input schema of each tool of a spec that has
// passed protocol.ValidateGroup. A schema the library would validate without
// end (a $ref cycle that never descends into the value), or at a cost past
// the limit whatever the arguments, is refused with invalid_group_def.
func compileChecks(spec *toolhost.GroupSpec) (map[string]*argCheck, error) {
	checks := make(map[string]*argCheck, len(spec.Tools))
	for _, t := range spec.Tools {
		var s jsonschema.Schema
		if err := json.Unmarshal(t.InputSchema, &s); err != nil {
			return nil, err
		}
		r, err := s.Resolve(nil)
		var g *schemaGraph
		if err == nil {
			g, err = newSchemaGraph(r.Schema())
		}
		if err == nil && g.cost(map[string]any{}) > maxValidationCost {
			err = fmt.Errorf("validating even {} would cost more than the limit of %d MiB", maxValidationCost>>20)
		}
		if err != nil {
			return nil, toolhost.Errorf(toolhost.CodeInvalidGroupDef, "tool %s: input schema: %v", t.Name, err)
		}
		checks[t.Name] = &argCheck{schema: r, graph: g, emptyValid: r.Validate(map[string]any{}) == nil}
	}
	return checks, nil
}

// check validates raw arguments; the error has code validation and names
// the field and the rule it breaks, or the limit the arguments pass.
func (c *argCheck) check(raw json.RawMessage) error {
	_, err := c.decode(raw)
	return err
}

// decode is check, returning the arguments as it decoded them (an empty
// map for none), for the role's rules to read without decoding them again.
func (c *argCheck) decode(raw json.RawMessage) (map[string]any, error) {
	if c.emptyValid && isEmptyObject(raw) {
		return map[string]any{}, nil
	}
	shape, err := scanArgs(raw)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "arguments are not JSON: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "arguments must be a JSON object, not %s", clip(bytes.TrimSpace(raw)))
	}
	if c.graph.mayExceed(shape, len(raw)) && c.graph.cost(v) > maxValidationCost {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "arguments: validating them against the tool's schema would cost more than the limit of %d MiB ($ref cycles and anyOf, oneOf or allOf branches multiply the work)", maxValidationCost>>20)
	}
	if err := c.schema.Validate(v); err != nil {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "arguments: %s", describeSchemaError(err.Error()))
	}
	return m, nil
}

// isEmptyObject reports whether raw is {}, null or nothing, without
// allocating.
func isEmptyObject(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return string(s) == "{}" || len(s) == 0 || string(s) == "null"
}

// maxQuoted bounds what an error message quotes of the caller's arguments.
const maxQuoted = 256

// clip shortens s to maxQuoted bytes, marking the cut.
func clip[T ~string | ~[]byte](s T) string {
	if len(s) <= maxQuoted {
		return string(s)
	}
	return strings.ToValidUTF8(string(s[:maxQuoted]), "") + "…"
}

// describeSchemaError turns jsonschema's nested "validating /properties/a:
// validating /properties/a/items: rule" into "field a[]: rule".
func describeSchemaError(msg string) string {
	msg = strings.TrimPrefix(msg, "validating root: ")
	i := strings.LastIndex(msg, "validating /")
	if i < 0 {
		return clip(msg)
	}
	path, rule, ok := strings.Cut(msg[i+len("validating "):], ": ")
	if !ok {
		return clip(msg)
	}
	field := strings.TrimPrefix(path, "/properties/")
	field = strings.ReplaceAll(field, "/properties/", ".")
	field = strings.ReplaceAll(field, "/items", "[]")
	return fmt.Sprintf("field %s: %s", field, clip(rule))
}

// argShape is what scanArgs learns of arguments: their deepest nesting
// and an upper bound on their JSON values (exact but for one more per array
// or object).
type argShape struct {
	depth, values int
}

// level is an array or object open while scanning: for an object, where
// the key of its current member is; for an array, the index of its current
// item.
type level struct {
	object, wantKey bool // wantKey: the next string is a key
	key             [2]int32
	index           int32
}

// scanArgs holds raw arguments to maxArgBytes, maxArgDepth and maxArgValues
// in one pass over the bytes that allocates nothing unless it refuses; a
// refusal past the depth names the member where it happens. It trusts the
// JSON to be well formed: on malformed input its counts are wrong but
// bounded, and decoding then reports the syntax error.
func scanArgs(raw []byte) (argShape, error) {
	if len(raw) > maxArgBytes {
		return argShape{}, toolhost.Errorf(toolhost.CodeValidation, "arguments are %d bytes, more than the limit of %d", len(raw), maxArgBytes)
	}
	shape, deep := scanBytes(raw, nil)
	switch {
	case deep >= 0:
		var open [maxArgDepth]level
		scanBytes(raw[:deep], &open)
		return shape, toolhost.Errorf(toolhost.CodeValidation, "arguments nest deeper than %d levels, the limit, at %s", maxArgDepth, argPath(raw, open[:]))
	case shape.values > maxArgValues:
		return shape, toolhost.Errorf(toolhost.CodeValidation, "arguments hold more than %d values, the limit", maxArgValues)
	}
	return shape, nil
}

// scanBytes measures raw up to the first array or object nested past
// maxArgDepth, whose offset it returns (else -1), or up to the value past
// maxArgValues. With open, it notes the member of each open level.
func scanBytes(raw []byte, open *[maxArgDepth]level) (shape argShape, deep int) {
	shape.values = 1 // each value is the first, follows a comma or opens an array or object
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			end := stringEnd(raw, i+1)
			if open != nil && depth > 0 && open[depth-1].wantKey {
				open[depth-1].key, open[depth-1].wantKey = [2]int32{int32(i), int32(end + 1)}, false
			}
			i = end
		case '{', '[':
			if depth == maxArgDepth {
				return shape, i
			}
			if open != nil {
				open[depth] = level{object: raw[i] == '{', wantKey: raw[i] == '{'}
			}
			depth++
			shape.depth = max(shape.depth, depth)
			if shape.values++; shape.values > maxArgValues {
				return shape, -1
			}
		case '}', ']':
			if depth == 0 {
				return shape, -1 // malformed: decoding says where
			}
			depth--
		case ',':
			if shape.values++; shape.values > maxArgValues {
				return shape, -1
			}
			if open != nil && depth > 0 {
				l := &open[depth-1]
				l.wantKey = l.object
				l.index++
			}
		}
	}
	return shape, -1
}

// stringEnd returns the index of the quote that ends the JSON string whose
// text starts at raw[i], or len(raw) when none does.
func stringEnd(raw []byte, i int) int {
	for {
		k := bytes.IndexByte(raw[i:], '"')
		if k < 0 {
			return len(raw)
		}
		q := i + k
		escapes := 0
		for q-escapes-1 >= i && raw[q-escapes-1] == '\\' {
			escapes++
		}
		if escapes%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// maxPathKey bounds each key argPath shows.
const maxPathKey = 32

// argPath names the member at each open level, as describeSchemaError
// names fields: keys joined by dots, array items by index.
func argPath(raw []byte, open []level) string {
	var b strings.Builder
	for _, l := range open {
		if !l.object {
			fmt.Fprintf(&b, "[%d]", l.index)
			continue
		}
		var key string
		if json.Unmarshal(raw[l.key[0]:l.key[1]], &key) != nil {
			key = "?"
		}
		if len(key) > maxPathKey {
			key = strings.ToValidUTF8(key[:maxPathKey], "") + "…"
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(key)
	}
	return b.String()
}
