package host

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

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
