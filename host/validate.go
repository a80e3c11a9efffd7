package host

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/bits"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolhost/toolhost"
)

// Limits on a call's arguments. They bound argument validation in depth,
// size and time whatever the tool's schema (DESIGN, "Bounded under any
// input"): scanArgs holds the first three in one pass over the bytes, before
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
// passed GroupSpec.Validate. A schema the library would validate without
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
	if c.emptyValid && isEmptyObject(raw) {
		return nil
	}
	shape, err := scanArgs(raw)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return toolhost.Errorf(toolhost.CodeValidation, "arguments are not JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return toolhost.Errorf(toolhost.CodeValidation, "arguments must be a JSON object, not %s", clip(bytes.TrimSpace(raw)))
	}
	if c.graph.mayExceed(shape, len(raw)) && c.graph.cost(v) > maxValidationCost {
		return toolhost.Errorf(toolhost.CodeValidation, "arguments: validating them against the tool's schema would cost more than the limit of %d MiB ($ref cycles and anyOf, oneOf or allOf branches multiply the work)", maxValidationCost>>20)
	}
	if err := c.schema.Validate(v); err != nil {
		return toolhost.Errorf(toolhost.CodeValidation, "arguments: %s", describeSchemaError(err.Error()))
	}
	return nil
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

// schemaGraph is an input schema as the library walks it when it
// validates: each subschema, the subschemas it applies to the same value
// ($ref, $dynamicRef, allOf, anyOf, oneOf, not, if, then, else, dependent
// schemas: edges "in place") and those it applies to a member of the value
// (properties, items…). It is acyclic in place, so the library's walk ends;
// cost bounds the walk's work on a value before the library starts it.
type schemaGraph struct {
	nodes []schemaNode
	walks sync.Pool // *costWalk
	// cost(v) ≤ perValue·values + perByte·bytes for arguments of that many
	// values and bytes (see bound).
	perValue, perByte uint64
}

// schemaNode is one subschema and, but for inPlace, the subschemas it
// applies to the members of a value (-1: none).
type schemaNode struct {
	s       *jsonschema.Schema
	inPlace []int32 // subschemas validated against the same value
	order   int32   // topological: before every node in its inPlace
	text    uint64  // bytes of error text a failing call takes from the schema
	quotes  bool    // a failing call may quote the value

	properties    map[string]int32
	patterns      []patternEdge
	additional    int32 // additionalProperties, unless absent or false: -1
	propertyNames int32
	unevaluated   int32 // unevaluatedProperties
	prefix        []int32
	rest          int32 // the items past prefix
	contains      int32
	unevalItems   int32
}

// patternEdge is a pattern of patternProperties and its schema.
type patternEdge struct {
	re *regexp.Regexp
	to int32
}

// graphBuilder holds what newSchemaGraph needs only while it builds.
type graphBuilder struct {
	g       *schemaGraph
	index   map[*jsonschema.Schema]int32
	parent  []int32  // the node that contains each, -1 for the root
	segment []string // and the JSON pointer segments from it
	pathLen []int
	bases   []*jsonschema.Schema // the root and every schema with an $id
	anchors map[string][]int32
	dynamic map[string][]int32 // $dynamicAnchor
	refWork int
	draft7  bool
}

// The escaping of JSON pointer segments, as the library does it.
var (
	pointerEscaper   = strings.NewReplacer("~", "~0", "/", "~1")
	pointerUnescaper = strings.NewReplacer("~0", "~", "~1", "/")
)

// maxRefWork bounds the pointer lookups of $ref resolution (references ×
// $id bases), so that even a schema of many bases resolves in bounded time.
const maxRefWork = 1 << 20

// Keywords whose values are schemas, by JSON name: one schema, a list, or a
// map of them. "items" is a schema or, in draft 7, a list; "dependencies"
// is draft 7's dependent schemas.
var (
	oneSchema = []struct {
		name string
		get  func(*jsonschema.Schema) *jsonschema.Schema
	}{
		{"additionalItems", func(s *jsonschema.Schema) *jsonschema.Schema { return s.AdditionalItems }},
		{"additionalProperties", func(s *jsonschema.Schema) *jsonschema.Schema { return s.AdditionalProperties }},
		{"contains", func(s *jsonschema.Schema) *jsonschema.Schema { return s.Contains }},
		{"contentSchema", func(s *jsonschema.Schema) *jsonschema.Schema { return s.ContentSchema }},
		{"else", func(s *jsonschema.Schema) *jsonschema.Schema { return s.Else }},
		{"if", func(s *jsonschema.Schema) *jsonschema.Schema { return s.If }},
		{"items", func(s *jsonschema.Schema) *jsonschema.Schema { return s.Items }},
		{"not", func(s *jsonschema.Schema) *jsonschema.Schema { return s.Not }},
		{"propertyNames", func(s *jsonschema.Schema) *jsonschema.Schema { return s.PropertyNames }},
		{"then", func(s *jsonschema.Schema) *jsonschema.Schema { return s.Then }},
		{"unevaluatedItems", func(s *jsonschema.Schema) *jsonschema.Schema { return s.UnevaluatedItems }},
		{"unevaluatedProperties", func(s *jsonschema.Schema) *jsonschema.Schema { return s.UnevaluatedProperties }},
	}
	listSchemas = []struct {
		name string
		get  func(*jsonschema.Schema) []*jsonschema.Schema
	}{
		{"allOf", func(s *jsonschema.Schema) []*jsonschema.Schema { return s.AllOf }},
		{"anyOf", func(s *jsonschema.Schema) []*jsonschema.Schema { return s.AnyOf }},
		{"items", func(s *jsonschema.Schema) []*jsonschema.Schema { return s.ItemsArray }},
		{"oneOf", func(s *jsonschema.Schema) []*jsonschema.Schema { return s.OneOf }},
		{"prefixItems", func(s *jsonschema.Schema) []*jsonschema.Schema { return s.PrefixItems }},
	}
	mapSchemas = []struct {
		name string
		get  func(*jsonschema.Schema) map[string]*jsonschema.Schema
	}{
		{"$defs", func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.Defs }},
		{"definitions", func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.Definitions }},
		{"dependencies", func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.DependencySchemas }},
		{"dependentSchemas", func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.DependentSchemas }},
		{"patternProperties", func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.PatternProperties }},
		{"properties", func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.Properties }},
	}
)

// eachChild calls f with each subschema of s and the JSON pointer segments
// that name it from s (key empty for a keyword of one schema).
func eachChild(s *jsonschema.Schema, f func(name, key string, c *jsonschema.Schema)) {
	for _, k := range oneSchema {
		if c := k.get(s); c != nil {
			f(k.name, "", c)
		}
	}
	for _, k := range listSchemas {
		for i, c := range k.get(s) {
			f(k.name, strconv.Itoa(i), c)
		}
	}
	for _, k := range mapSchemas {
		m := k.get(s)
		for _, key := range slices.Sorted(maps.Keys(m)) {
			f(k.name, key, m[key])
		}
	}
}

// newSchemaGraph builds the graph of a resolved schema. It fails when a
// $ref cycle never descends into the value (the library would recurse until
// the stack overflows and the process dies), and when it cannot follow a
// reference the library resolved.
func newSchemaGraph(root *jsonschema.Schema) (*schemaGraph, error) {
	b := &graphBuilder{
		g:       &schemaGraph{},
		index:   map[*jsonschema.Schema]int32{},
		anchors: map[string][]int32{},
		dynamic: map[string][]int32{},
		draft7:  root.Schema == "http://json-schema.org/draft-07/schema#" || root.Schema == "https://json-schema.org/draft-07/schema#",
	}
	b.add(root, -1, "", 0)
	for i := range b.g.nodes {
		if err := b.link(int32(i)); err != nil {
			return nil, err
		}
	}
	topo, err := b.order()
	if err != nil {
		return nil, err
	}
	b.bound(topo)
	n := len(b.g.nodes)
	b.g.walks.New = func() any {
		return &costWalk{stamp: make([]uint32, n), count: make([]uint64, n), frame: make([]uint32, n)}
	}
	return b.g, nil
}

// add numbers s and its subschemas, noting bases and anchors.
func (b *graphBuilder) add(s *jsonschema.Schema, parent int32, segment string, pathLen int) {
	i := int32(len(b.g.nodes))
	b.index[s] = i
	b.g.nodes = append(b.g.nodes, schemaNode{s: s})
	b.parent = append(b.parent, parent)
	b.segment = append(b.segment, segment)
	b.pathLen = append(b.pathLen, pathLen)
	if parent < 0 || s.ID != "" {
		b.bases = append(b.bases, s)
	}
	anchors := []string{s.Anchor, s.DynamicAnchor}
	if b.draft7 && strings.HasPrefix(s.ID, "#") {
		anchors = append(anchors, s.ID[1:]) // draft 7's anchor
	}
	for _, a := range anchors {
		if a != "" {
			b.anchors[a] = append(b.anchors[a], i)
		}
	}
	if s.DynamicAnchor != "" {
		b.dynamic[s.DynamicAnchor] = append(b.dynamic[s.DynamicAnchor], i)
	}
	eachChild(s, func(name, key string, c *jsonschema.Schema) {
		seg := "/" + name
		if key != "" {
			seg += "/" + pointerEscaper.Replace(key)
		}
		b.add(c, i, seg, pathLen+len(seg))
	})
}

// link sets the edges of node i and what a call with it costs.
func (b *graphBuilder) link(i int32) error {
	n := &b.g.nodes[i]
	s := n.s
	for _, ref := range []string{s.Ref, s.DynamicRef} {
		if ref == "" {
			continue
		}
		to, err := b.targets(ref, ref == s.DynamicRef)
		if err != nil {
			return err
		}
		n.inPlace = append(n.inPlace, to...)
	}
	n.text = uint64(b.pathLen[i]) + messageText(s)
	n.quotes = s.Type != "" || s.Types != nil || s.Enum != nil || s.Const != nil || s.Contains != nil ||
		s.Pattern != "" || s.MinLength != nil || s.MaxLength != nil || s.AdditionalProperties != nil
	n.additional, n.propertyNames, n.unevaluated, n.rest, n.contains, n.unevalItems = -1, -1, -1, -1, -1, -1
	if b.draft7 && s.Ref != "" {
		return nil // draft 7 ignores the keywords beside $ref
	}
	id := func(c *jsonschema.Schema) int32 {
		if c == nil {
			return -1
		}
		return b.index[c]
	}
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, {s.Not, s.If, s.Then, s.Else}} {
		for _, c := range list {
			if c != nil {
				n.inPlace = append(n.inPlace, b.index[c])
			}
		}
	}
	dependent := s.DependentSchemas
	if b.draft7 {
		dependent = s.DependencySchemas
	}
	for _, c := range dependent {
		n.inPlace = append(n.inPlace, b.index[c])
	}
	if len(s.Properties) > 0 {
		n.properties = make(map[string]int32, len(s.Properties))
		for k, c := range s.Properties {
			n.properties[k] = b.index[c]
		}
	}
	for p, c := range s.PatternProperties {
		re, err := regexp.Compile(p)
		if err != nil {
			return err
		}
		n.patterns = append(n.patterns, patternEdge{re, b.index[c]})
	}
	if a := s.AdditionalProperties; a != nil && (a.Not == nil || !reflect.ValueOf(*a.Not).IsZero()) {
		n.additional = b.index[a]
	}
	n.propertyNames, n.unevaluated = id(s.PropertyNames), id(s.UnevaluatedProperties)
	n.contains, n.unevalItems = id(s.Contains), id(s.UnevaluatedItems)
	prefix, rest := s.PrefixItems, s.Items
	if b.draft7 {
		prefix = s.ItemsArray
		if prefix != nil {
			rest = s.AdditionalItems
		}
	}
	for _, c := range prefix {
		n.prefix = append(n.prefix, b.index[c])
	}
	n.rest = id(rest)
	return nil
}

// targets returns the subschemas a $ref (or $dynamicRef) may resolve to:
// exactly the one the library finds when the root is the schema's only
// base (no nested $id), else every candidate, which may cost more but
// never less than the library's walk.
func (b *graphBuilder) targets(ref string, dynamic bool) ([]int32, error) {
	u, err := url.Parse(ref)
	if err != nil {
		return nil, err
	}
	var to []int32
	if frag := u.Fragment; frag == "" || frag[0] == '/' {
		for _, base := range b.bases {
			if b.refWork++; b.refWork > maxRefWork {
				return nil, fmt.Errorf("too many $id and $ref to resolve within the limit of %d lookups", maxRefWork)
			}
			if c := derefPointer(base, frag); c != nil {
				to = append(to, b.index[c])
			}
		}
	} else {
		to = append(to, b.anchors[frag]...)
		if dynamic {
			to = append(to, b.dynamic[frag]...)
		}
	}
	if len(to) == 0 {
		return nil, fmt.Errorf("cannot follow $ref %q", ref)
	}
	slices.Sort(to)
	return slices.Compact(to), nil
}

// derefPointer returns the subschema of s at the JSON pointer ptr, as the
// library reads one, or nil.
func derefPointer(s *jsonschema.Schema, ptr string) *jsonschema.Schema {
	if ptr == "" {
		return s
	}
	segs := strings.Split(ptr[1:], "/")
	for i := range segs {
		segs[i] = pointerUnescaper.Replace(segs[i])
	}
	for len(segs) > 0 && s != nil {
		name, next := segs[0], (*jsonschema.Schema)(nil)
		used := 1
		for _, k := range oneSchema {
			if k.name == name {
				next = k.get(s)
			}
		}
		for _, k := range listSchemas {
			if list := k.get(s); k.name == name && next == nil && len(segs) > 1 {
				if i, err := strconv.Atoi(segs[1]); err == nil && i >= 0 && i < len(list) && (segs[1] == "0" || segs[1][0] != '0') {
					next, used = list[i], 2
				}
			}
		}
		for _, k := range mapSchemas {
			if k.name == name && len(segs) > 1 {
				next, used = k.get(s)[segs[1]], 2
			}
		}
		s, segs = next, segs[used:]
	}
	return s
}

// order numbers the nodes reachable from the root topologically along the
// in-place edges, failing on a cycle of them, and returns them in that
// order.
func (b *graphBuilder) order() ([]int32, error) {
	nodes := b.g.nodes
	reached := make([]bool, len(nodes))
	stack := []int32{0}
	reached[0] = true
	for len(stack) > 0 {
		n := &nodes[stack[len(stack)-1]]
		stack = stack[:len(stack)-1]
		for _, c := range slices.Concat(n.inPlace, n.descending()) {
			if !reached[c] {
				reached[c] = true
				stack = append(stack, c)
			}
		}
	}
	const (
		unseen = iota
		open
		done
	)
	state := make([]uint8, len(nodes))
	next := int32(len(nodes))
	topo := make([]int32, len(nodes))
	var visit func(i int32) error
	visit = func(i int32) error {
		state[i] = open
		for _, c := range nodes[i].inPlace {
			switch state[c] {
			case open:
				return fmt.Errorf("the $ref cycle through %s never descends into the value, so validation would never end", b.path(c))
			case unseen:
				if err := visit(c); err != nil {
					return err
				}
			}
		}
		state[i] = done
		next--
		nodes[i].order, topo[next] = next, i
		return nil
	}
	for i := range nodes {
		if reached[i] && state[i] == unseen {
			if err := visit(int32(i)); err != nil {
				return nil, err
			}
		}
	}
	return topo[next:], nil
}

// bound sets perValue and perByte by counting the library's calls at each
// depth of a value, whatever its keys: the calls on a value d levels deep
// are at most the walks from the root that descend d times, none as deep
// as the deepest walk, none quoting more than the largest text. A value
// formats to at most 3 bytes a byte (invalid UTF-8 decodes to U+FFFD) and
// 32 more, and the values at one depth are apart. A branching cycle makes
// the counts grow past the limit, and leaves cost to walk each value.
func (b *graphBuilder) bound(topo []int32) {
	g := b.g
	descending := make([][]int32, len(g.nodes))
	var text, patterns uint64
	for _, i := range topo {
		descending[i] = g.nodes[i].descending()
		text, patterns = max(text, g.nodes[i].text), max(patterns, uint64(len(g.nodes[i].patterns)))
	}
	count, next := make([]uint64, len(g.nodes)), make([]uint64, len(g.nodes))
	frame, nextFrame := make([]uint64, len(g.nodes)), make([]uint64, len(g.nodes))
	count[0], frame[0] = 1, 1
	var most, sum, frames uint64 // calls on a value at one depth, summed over depths, deepest call
	for range maxArgDepth + 1 {
		var calls uint64
		for _, i := range topo {
			if count[i] == 0 {
				continue
			}
			calls, frames = satAdd(calls, count[i]), max(frames, frame[i])
			for _, c := range g.nodes[i].inPlace {
				count[c], frame[c] = satAdd(count[c], count[i]), max(frame[c], frame[i]+1)
			}
			for _, c := range descending[i] {
				next[c], nextFrame[c] = satAdd(next[c], count[i]), max(nextFrame[c], frame[i]+1)
			}
		}
		most, sum = max(most, calls), satAdd(sum, calls)
		count, next, frame, nextFrame = next, count, nextFrame, frame
		clear(next)
		clear(nextFrame)
	}
	copies := satMul(errorCopies, frames)
	perSize := satMul(sum, satAdd(1+patterns, copies)) // weight of the values' formatted sizes at one depth
	g.perValue = satAdd(satMul(most, satAdd(callCost, satMul(copies, text))), satMul(perSize, 32))
	g.perByte = satMul(perSize, 3)
}

// path is node i's JSON pointer from the root.
func (b *graphBuilder) path(i int32) string {
	var segs []string
	for ; b.parent[i] >= 0; i = b.parent[i] {
		segs = append(segs, b.segment[i])
	}
	slices.Reverse(segs)
	return "#" + strings.Join(segs, "")
}

// descending are the nodes n leads to into the value.
func (n *schemaNode) descending() []int32 {
	var c []int32
	for _, p := range n.properties {
		c = append(c, p)
	}
	for _, p := range n.patterns {
		c = append(c, p.to)
	}
	c = append(c, n.prefix...)
	for _, p := range []int32{n.additional, n.propertyNames, n.unevaluated, n.rest, n.contains, n.unevalItems} {
		if p >= 0 {
			c = append(c, p)
		}
	}
	return c
}

// The cost of a call of the library's validator, in bytes allocated.
const (
	// callCost is a call's own: the library allocates 100-400 bytes per
	// call, on top of the error text.
	callCost = 512
	// errorCopies is how many times each call formats the error text of a
	// call nested in it that fails: fmt writes it into a growing buffer,
	// copies that into a string, and wrapping formats it twice.
	errorCopies = 4
)

// messageText bounds the text an error of s quotes from s: its $id, its
// enum and const values, its pattern and the property names it requires,
// the names of the schemas of its anyOf and oneOf; plus the per-call work
// of its lists of properties.
func messageText(s *jsonschema.Schema) uint64 {
	n := len(s.ID) + len(s.Pattern) + 16*(len(s.Properties)+len(s.PatternProperties))
	if s.Enum != nil {
		n += len(fmt.Sprint(s.Enum))
	}
	if s.Const != nil {
		n += len(fmt.Sprint(*s.Const))
	}
	names := slices.Clone(s.Required)
	for _, m := range []map[string][]string{s.DependentRequired, s.DependencyStrings} {
		for k, v := range m {
			names = append(append(names, k), v...)
		}
	}
	for _, name := range names {
		n += len(name) + 4
	}
	for _, c := range slices.Concat(s.AnyOf, s.OneOf, s.AllOf) {
		n += len(c.String()) + 1
	}
	return uint64(n)
}

// cost bounds the work of the library's Validate(v), in bytes allocated:
// each call of its validator costs callCost, plus the error text it would
// fail with (its schema's text, and the value formatted if it may quote
// it) formatted errorCopies times by each call it is nested in, plus a read
// of the value per keyword and of each key per pattern. The calls of each
// subschema on each member of v are counted along the graph, as the
// library makes them, so a $ref cycle entered twice doubles the count at
// each level of v, as it does the library's work; but the walk visits each
// member once, with the subschemas that apply to it, and stops as soon as
// the cost passes maxValidationCost, which bounds its own work.
func (g *schemaGraph) cost(v any) uint64 {
	w := g.walks.Get().(*costWalk)
	w.g, w.cost = g, 0
	w.active = append(w.active[:0], entry{node: 0, frame: 1, count: 1})
	w.walk(v, 0, 1)
	cost := w.cost
	w.g = nil
	g.walks.Put(w)
	return cost
}

// mayExceed reports whether arguments of the shape and size may cost more
// than the limit, as far as perValue and perByte tell.
func (g *schemaGraph) mayExceed(shape argShape, size int) bool {
	return satAdd(satMul(g.perValue, uint64(shape.values)), satMul(g.perByte, uint64(size))) > maxValidationCost
}

// costWalk is the state of one cost.
type costWalk struct {
	g    *schemaGraph
	cost uint64
	// active is a stack of the entries of the values being walked.
	active []entry
	// Scratch of closeInPlace, by node: the generation that last saw it
	// (stamp), its calls and its deepest call.
	stamp        []uint32
	gen          uint32
	count        []uint64
	frame        []uint32
	reach, stack []int32
}

// entry is a subschema the library validates a value with: count times,
// the deepest nested in frame calls.
type entry struct {
	node  int32
	frame uint32
	count uint64
}

// over is a cost past the limit; counts saturate there.
const over = maxValidationCost + 1

// satAdd is a+b, saturating at over (a and b are at most over).
func satAdd(a, b uint64) uint64 { return min(a+b, over) }

// satMul is a·b, saturating at over.
func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return over
	}
	return min(lo, over)
}

// walk adds the cost of validating v with the entries active[from:to] and
// returns v's formatted size.
func (w *costWalk) walk(v any, from, to int) uint64 {
	start := len(w.active)
	w.closeInPlace(from, to)
	end := len(w.active)
	defer func() { w.active = w.active[:start] }()
	var perByte uint64 // weight of v's formatted size
	for _, e := range w.active[start:end] {
		n := &w.g.nodes[e.node]
		copies := uint64(errorCopies) * uint64(e.frame)
		w.cost = satAdd(w.cost, satMul(e.count, satAdd(callCost, satMul(copies, n.text))))
		scans := 1 + uint64(len(n.patterns)) // a keyword reads the value, each pattern each key
		if n.quotes {
			scans += copies
		}
		perByte = satAdd(perByte, satMul(e.count, scans))
	}
	if w.cost >= over {
		return 0
	}
	var size uint64
	switch v := v.(type) {
	case map[string]any:
		size = 2
		for k, x := range v {
			size += uint64(len(k)) + 4
			mark := len(w.active)
			for i := start; i < end; i++ {
				w.memberEntries(i, k)
			}
			size += w.member(x, mark)
			for i := start; i < end; i++ {
				e := w.active[i]
				if pn := w.g.nodes[e.node].propertyNames; pn >= 0 {
					w.active = append(w.active, entry{pn, e.frame + 1, e.count})
				}
			}
			if len(w.active) > mark {
				w.member(k, mark)
			}
			if w.cost >= over {
				return 0
			}
		}
	case []any:
		size = 2
		for i, x := range v {
			mark := len(w.active)
			for j := start; j < end; j++ {
				w.itemEntries(j, i)
			}
			size += w.member(x, mark) + 1
			if w.cost >= over {
				return 0
			}
		}
	default:
		size = formattedSize(v)
	}
	w.cost = satAdd(w.cost, satMul(perByte, size))
	return size
}

// member walks x with the entries pushed since mark, or only sizes it when
// there are none, and pops them.
func (w *costWalk) member(x any, mark int) uint64 {
	defer func() { w.active = w.active[:mark] }()
	if len(w.active) == mark {
		return formattedSize(x)
	}
	return w.walk(x, mark, len(w.active))
}

// memberEntries pushes the entries that active[i] gives the member k of an
// object.
func (w *costWalk) memberEntries(i int, k string) {
	e := w.active[i]
	n := &w.g.nodes[e.node]
	push := func(to int32) {
		if to >= 0 {
			w.active = append(w.active, entry{to, e.frame + 1, e.count})
		}
	}
	matched := false
	if p, ok := n.properties[k]; ok {
		push(p)
		matched = true
	}
	for _, p := range n.patterns {
		if p.re.MatchString(k) {
			push(p.to)
			matched = true
		}
	}
	if !matched {
		push(n.additional)
	}
	push(n.unevaluated)
}

// itemEntries pushes the entries that active[i] gives item j of an array.
func (w *costWalk) itemEntries(i, j int) {
	e := w.active[i]
	n := &w.g.nodes[e.node]
	push := func(to int32) {
		if to >= 0 {
			w.active = append(w.active, entry{to, e.frame + 1, e.count})
		}
	}
	if j < len(n.prefix) {
		push(n.prefix[j])
	} else {
		push(n.rest)
	}
	push(n.contains)
	push(n.unevalItems)
}

// closeInPlace pushes the subschemas the entries active[from:to] reach in
// place, each once with its count of calls summed over the paths to it and
// its deepest frame.
func (w *costWalk) closeInPlace(from, to int) {
	if w.gen++; w.gen == 0 {
		clear(w.stamp)
		w.gen = 1
	}
	w.reach, w.stack = w.reach[:0], w.stack[:0]
	see := func(n int32) {
		if w.stamp[n] != w.gen {
			w.stamp[n], w.count[n], w.frame[n] = w.gen, 0, 0
			w.reach = append(w.reach, n)
			w.stack = append(w.stack, n)
		}
	}
	for _, e := range w.active[from:to] {
		see(e.node)
		w.count[e.node] = satAdd(w.count[e.node], e.count)
		w.frame[e.node] = max(w.frame[e.node], e.frame)
	}
	for len(w.stack) > 0 {
		n := w.stack[len(w.stack)-1]
		w.stack = w.stack[:len(w.stack)-1]
		for _, c := range w.g.nodes[n].inPlace {
			see(c)
		}
	}
	nodes := w.g.nodes
	if len(w.reach) > 1 {
		slices.SortFunc(w.reach, func(a, b int32) int { return cmp.Compare(nodes[a].order, nodes[b].order) })
	}
	for _, n := range w.reach {
		for _, c := range nodes[n].inPlace {
			w.count[c] = satAdd(w.count[c], w.count[n])
			w.frame[c] = max(w.frame[c], w.frame[n]+1)
		}
		w.active = append(w.active, entry{n, w.frame[n], w.count[n]})
	}
}

// formattedSize bounds the bytes of v formatted with %v, as the library
// quotes a value in an error.
func formattedSize(v any) uint64 {
	switch v := v.(type) {
	case string:
		return uint64(len(v)) + 2
	case map[string]any:
		size := uint64(2)
		for k, x := range v {
			size += uint64(len(k)) + 4 + formattedSize(x)
		}
		return size
	case []any:
		size := uint64(2)
		for _, x := range v {
			size += formattedSize(x) + 1
		}
		return size
	default:
		return 24 // a float64, bool or nil
	}
}
