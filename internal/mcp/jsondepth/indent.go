package jsondepth

import "encoding/json"

// IndentLevels is how many levels of nesting [Indent] lays out, one
// member or element a line, in what toolhost shows people: enough for
// any of its own answers and the top of a tool's structured content.
const IndentLevels = 16

// Indent appends compact JSON src to dst as json.Indent would with no
// prefix and two spaces, but only down to levels of nesting: a value
// nested deeper stays compact. Every line is then indented at most
// 2×levels spaces, so the text grows with src, not with the square of its
// depth as fully indented JSON does. src must be valid compact JSON (as
// json.Marshal writes it).
func Indent(dst, src []byte, levels int) []byte {
	depth, inString, escaped := 0, false, false
	newline := func(d int) {
		dst = append(dst, '\n')
		for range min(d, levels) {
			dst = append(dst, ' ', ' ')
		}
	}
	for i, c := range src {
		if inString {
			dst = append(dst, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			dst = append(dst, c)
		case '{', '[':
			dst = append(dst, c)
			depth++
			if depth <= levels && i+1 < len(src) && src[i+1] != '}' && src[i+1] != ']' {
				newline(depth)
			}
		case '}', ']':
			if depth <= levels && i > 0 && src[i-1] != '{' && src[i-1] != '[' {
				newline(depth - 1)
			}
			depth--
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			if depth <= levels {
				newline(depth)
			}
		case ':':
			dst = append(dst, c)
			if depth <= levels {
				dst = append(dst, ' ')
			}
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// MarshalIndent is v as JSON (json.Marshal's) laid out by [Indent] down to
// IndentLevels: what toolhost shows people.
func MarshalIndent(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Indent(make([]byte, 0, 2*len(b)), b, IndentLevels), nil
}
