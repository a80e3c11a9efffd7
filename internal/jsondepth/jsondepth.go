// Package jsondepth measures how deeply JSON nests, without decoding it.
package jsondepth

// Of returns how deeply raw nests objects and arrays: the most that are
// open at once, brackets inside strings aside. It reads raw as it comes and
// never fails: a closing bracket with nothing open is passed over, as the
// go-sdk's own bound on a message's nesting passes it over, so that the
// two agree on any bytes.
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
