package codemode

import (
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcp/jsondepth"
	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// maxDepth is how deeply a script's values may nest lists, tuples, dicts
// and sets where they leave the script or are written out (its result,
// json.encode, str, repr, print) and how deeply JSON it decodes may nest:
// the bound the host puts on a tool's arguments. Starlark writes and
// reads such values recursively, a stack frame or more a level, so a deep
// one would take the host's stack, and its JSON, pretty-printed, grows
// with the square of its depth.
const maxDepth = 64

// depth is how deeply v nests lists, tuples, dicts and sets: 0 for a
// scalar, 1 for a list of scalars. It walks v without recursing and
// visits a value shared by several others once; a value that holds
// itself counts as its depth so far.
func depth(v starlark.Value) int {
	type frame struct {
		key  any
		kids []starlark.Value
		next int
		deep int // the deepest of its kids walked so far
	}
	done := map[any]int{} // the depth of each value walked, -1 while walking it
	var stack []frame
	// enter pushes v if it is a container not seen yet; else it returns
	// its depth (0 for a scalar, or one met again while walking it).
	enter := func(v starlark.Value) (int, bool) {
		key, kids := children(v)
		if key == nil {
			return 0, false
		}
		if d, seen := done[key]; seen {
			return max(d, 0), false
		}
		done[key] = -1
		stack = append(stack, frame{key: key, kids: kids})
		return 0, true
	}
	if d, pushed := enter(v); !pushed {
		return d
	}
	for {
		top := len(stack) - 1
		if f := &stack[top]; f.next < len(f.kids) {
			kid := f.kids[f.next]
			f.next++
			if d, pushed := enter(kid); !pushed {
				stack[top].deep = max(stack[top].deep, d)
			}
			continue
		}
		d := stack[top].deep + 1
		done[stack[top].key] = d
		stack = stack[:top]
		if top == 0 {
			return d
		}
		stack[top-1].deep = max(stack[top-1].deep, d)
	}
}

// children are a container's identity and the values it holds, or a nil
// identity for any other value.
func children(v starlark.Value) (any, []starlark.Value) {
	switch v := v.(type) {
	case *starlark.List:
		kids := make([]starlark.Value, v.Len())
		for i := range kids {
			kids[i] = v.Index(i)
		}
		return v, kids
	case starlark.Tuple:
		if len(v) == 0 {
			return tupleKey{}, nil
		}
		// Its first element's address and its length: a slice of a
		// tuple shares the tuple's elements.
		return tupleKey{&v[0], len(v)}, v
	case *starlark.Dict:
		var kids []starlark.Value
		for _, kv := range v.Items() {
			kids = append(kids, kv[0], kv[1])
		}
		return v, kids
	case *starlark.Set:
		var kids []starlark.Value
		it := v.Iterate()
		defer it.Done()
		var x starlark.Value
		for it.Next(&x) {
			kids = append(kids, x)
		}
		return v, kids
	}
	return nil, nil
}

// tupleKey is a tuple's identity.
type tupleKey struct {
	first *starlark.Value
	n     int
}

// tooDeep is the error of a value, what names it, nested deeper than
// maxDepth, or nil.
func tooDeep(bound string, what string, v starlark.Value) error {
	if d := depth(v); d > maxDepth {
		return nestError(bound, what, d)
	}
	return nil
}

func nestError(name, what string, d int) error {
	return toolhost.Errorf(toolhost.CodePolicy, "code: %s: %s nests %d levels, more than %d", name, what, d, maxDepth)
}

// shallow wraps the builtin fn so that it fails on an argument nested
// deeper than maxDepth before it writes it out.
func shallow(fn *starlark.Builtin) *starlark.Builtin {
	return starlark.NewBuiltin(fn.Name(), func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		for _, a := range args {
			if err := tooDeep("depth", b.Name()+"'s argument", a); err != nil {
				return nil, err
			}
		}
		return starlark.Call(thread, fn, args, kwargs)
	})
}

// shallowBuiltins are str, repr, print and the json module, each failing
// on a value (or, for json.decode, JSON) nested deeper than maxDepth
// rather than recursing through it.
func shallowBuiltins() starlark.StringDict {
	members := starlark.StringDict{}
	for name, v := range starjson.Module.Members {
		members[name] = v
	}
	members["encode"] = shallow(members["encode"].(*starlark.Builtin))
	decode := members["decode"].(*starlark.Builtin)
	members["decode"] = starlark.NewBuiltin(decode.Name(), func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) > 0 {
			if s, ok := args[0].(starlark.String); ok {
				if d := jsondepth.Of([]byte(s)); d > maxDepth {
					return nil, nestError("depth", "json.decode's input", d)
				}
			}
		}
		return starlark.Call(thread, decode, args, kwargs)
	})
	d := starlark.StringDict{"json": &starlarkstruct.Module{Name: starjson.Module.Name, Members: members}}
	for _, name := range []string{"str", "repr", "print"} {
		d[name] = shallow(starlark.Universe[name].(*starlark.Builtin))
	}
	return d
}
