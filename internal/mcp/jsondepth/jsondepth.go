// Package jsondepth measures how deeply JSON nests, without decoding it,
// holds the one bound toolhost puts on that nesting for MCP, and lays out
// JSON for people indenting only its top levels.
package jsondepth

// Max is how deeply the MCP JSON toolhost reads and offers may nest objects
// and arrays: a line it decodes over stdio, and a tools/list it offers (a
// tool's input schema sits a few levels down in it). MCP peers built on the
// go-sdk decode a JSON-RPC message at most 1000 levels deep, so toolhost
// reads nothing deeper and offers nothing deeper.
const Max = 1000

// Of returns how deeply raw nests objects and arrays: the most that are
// open at once, brackets inside strings aside. It reads raw as it comes and
// never fails, whatever raw holds: a closing bracket with nothing open is
// passed over. It is meant as a check before a decoder that recurses
// (encoding/json's scanner bounds itself; others may not).
func Of(raw []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case (c == '}' || c == ']') && depth > 0:
			depth--
		}
	}
	return deepest
}
