package config

import (
	"fmt"
	"strings"
	"unicode"
)

// Quote is s as an HCL quoted string, whose value is s itself: no template
// sequence in s is interpreted.
func Quote(s string) string { return `"` + quoted(s) + `"` }

// quoted escapes s for the inside of an HCL quoted string, as hclwrite
// does: \n \r \t \" \\, ${ and %{ doubled to $${ and %%{, other
// unprintable characters as \uNNNN or \UNNNNNNNN.
func quoted(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch r {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '$', '%':
			b.WriteRune(r)
			if strings.HasPrefix(s[i+1:], "{") {
				b.WriteRune(r)
			}
		default:
			switch {
			case unicode.IsPrint(r):
				b.WriteRune(r)
			case r < 0x10000:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		}
	}
	return b.String()
}
