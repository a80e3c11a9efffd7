package host

import (
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

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
