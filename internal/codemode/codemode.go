// Package codemode holds what the host and the code group
// (plugins/codemode) must agree on: the Starlark function name of each
// tool a script may call, and the catalogue of those functions that
// run_script's description carries.
package codemode

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.starlark.net/starlark"
)

// Group and Tool are the code group's id and its one tool's name.
const (
	Group = "code"
	Tool  = "run_script"
)

// predeclared are the names a script has besides its tools' functions and
// Starlark's builtins; no tool's function may take one.
var predeclared = []string{"call", "parallel", "failed", "result"}

// keywords are Starlark's keywords and reserved words: no function may be
// named so.
var keywords = []string{"and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
	"except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "load", "nonlocal", "not", "or",
	"pass", "raise", "return", "try", "while", "with", "yield"}

// mangle is a tool name as a Starlark identifier: every character but an
// ASCII letter, digit or underscore becomes "_", and a leading digit gets
// a "_" before it.
func mangle(tool string) string {
	b := []byte(tool)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	s := string(b)
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	return s
}

// Functions maps the Starlark function names of tools to the tools. A
// tool whose mangled name is a keyword, a builtin (len, print …), one of
// the script's own names (call, parallel, failed, result) or another
// tool's mangled name gets no function: a script calls it through
// call("its name", …).
func Functions(tools []string) map[string]string {
	count := map[string]int{}
	for _, t := range tools {
		count[mangle(t)]++
	}
	out := make(map[string]string, len(tools))
	for _, t := range tools {
		n := mangle(t)
		if count[n] == 1 && !slices.Contains(keywords, n) && !slices.Contains(predeclared, n) && !starlark.Universe.Has(n) {
			out[n] = t
		}
	}
	return out
}

// Def is a tool a script may call, as the catalogue shows it.
type Def struct {
	Name       string
	Parameters json.RawMessage
}

// Describe returns run_script's description: base, then one line per
// tool a script may call, its function's signature (from its input
// schema: required parameters first, optional ones "= None"). What each
// tool does is its own definition's, which the caller is offered beside
// run_script: the signatures say only how a script calls them.
func Describe(base string, defs []Def) string {
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.Name
	}
	fns := Functions(names)
	byTool := make(map[string]string, len(fns))
	for fn, t := range fns {
		byTool[t] = fn
	}
	var b strings.Builder
	b.WriteString(base)
	if len(defs) == 0 {
		b.WriteString("\nNo tool is yours to call at the moment.")
		return b.String()
	}
	b.WriteString("\nFunctions:")
	for _, d := range defs {
		b.WriteString("\n")
		if fn, ok := byTool[d.Name]; ok {
			b.WriteString(fn)
			b.WriteString("(")
		} else {
			fmt.Fprintf(&b, "call(%q", d.Name)
			if params(d.Parameters) != "" {
				b.WriteString(", ")
			}
		}
		b.WriteString(params(d.Parameters))
		b.WriteString(")")
	}
	return b.String()
}

// params renders an input schema's properties as a signature's
// parameters: "path: str, offset: int = None".
func params(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	var req, opt []string
	for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
		p := name
		if t := pyType(s.Properties[name].Type); t != "" {
			p += ": " + t
		}
		if slices.Contains(s.Required, name) {
			req = append(req, p)
		} else {
			opt = append(opt, p+" = None")
		}
	}
	// Required ones in the schema's order of required, which authors write
	// in the order that reads best.
	slices.SortStableFunc(req, func(a, b string) int {
		return slices.Index(s.Required, paramName(a)) - slices.Index(s.Required, paramName(b))
	})
	return strings.Join(append(req, opt...), ", ")
}

func paramName(p string) string {
	n, _, _ := strings.Cut(p, ":")
	return n
}

// pyType names a JSON-schema type as Starlark's: "string" is str, and so
// on; a union is its types joined by "|".
func pyType(t any) string {
	names := map[string]string{"string": "str", "integer": "int", "number": "float", "boolean": "bool", "array": "list", "object": "dict", "null": "None"}
	switch t := t.(type) {
	case string:
		return names[t]
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok && names[s] != "" {
				out = append(out, names[s])
			}
		}
		return strings.Join(out, "|")
	}
	return ""
}
