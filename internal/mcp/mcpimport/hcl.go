package mcpimport

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sandbox"
)

// The output is written here rather than with hclwrite, which would add a
// module (go-cmp) to go.mod. Every string goes through quote, and the tests
// parse the output and evaluate each value back.

// write renders the servers as mcp_server blocks, then the variables the
// operator exports, as comments.
func (im *importer) write(servers []*mcpServer) []byte {
	var b strings.Builder
	for _, n := range im.notes {
		writeComment(&b, n)
	}
	for i, s := range servers {
		if i > 0 || len(im.notes) > 0 {
			b.WriteByte('\n')
		}
		for _, c := range s.comments {
			writeComment(&b, c)
		}
		var attrs [][2]string
		if s.description != "" {
			attrs = append(attrs, [2]string{"description", config.Quote(s.description)})
		}
		if s.entry.URL != "" {
			attrs = append(attrs, [2]string{"url", s.url.expr()})
			if len(s.headers) > 0 {
				attrs = append(attrs, [2]string{"headers", object(s.headers, "  ")})
			}
		} else {
			attrs = append(attrs, [2]string{"command", s.command.expr()})
			if len(s.args) > 0 {
				elems := make([]string, len(s.args))
				for i, a := range s.args {
					elems[i] = a.expr()
				}
				attrs = append(attrs, [2]string{"args", list(elems)})
			}
			if len(s.env) > 0 {
				attrs = append(attrs, [2]string{"env", object(s.env, "  ")})
			}
		}
		if s.toolPrefix != "" {
			attrs = append(attrs, [2]string{"tool_prefix", config.Quote(s.toolPrefix)})
		}
		fmt.Fprintf(&b, "mcp_server %s {\n", config.Quote(s.label))
		writeAttrs(&b, attrs, "  ")
		if s.sandbox != nil {
			b.WriteByte('\n')
			s.sandbox.write(&b, "  ")
		}
		b.WriteString("}\n")
	}
	if len(im.secrets) > 0 {
		b.WriteByte('\n')
		writeComment(&b, "# Secrets stay out of this file: set these in toolhost's environment (values not printed here).")
		for _, e := range im.secrets {
			writeComment(&b, "# export "+e.name+"=<"+e.from+">")
		}
	}
	if len(im.refs) > 0 {
		b.WriteByte('\n')
		writeComment(&b, "# These come from the client's environment (${…} in "+im.file+"): set them in toolhost's too.")
		for _, name := range im.refs {
			writeComment(&b, "# export "+name+"=<as the client has it>")
		}
	}
	return []byte(b.String())
}

// write writes the sandbox block at indent.
func (x *box) write(b *strings.Builder, indent string) {
	in := indent + "  "
	b.WriteString(indent + "sandbox {\n")
	for _, n := range x.notes {
		writeComment(b, in+"# "+n)
	}
	var attrs [][2]string
	if len(x.readWrite) > 0 || len(x.refused) > 0 {
		attrs = append(attrs, [2]string{"read_write", x.readWriteList(in)})
		if len(x.refused) > 0 { // on lines of its own, aligned with nothing
			writeAttrs(b, attrs, in)
			attrs = nil
		}
	}
	if len(x.readOnly) > 0 {
		attrs = append(attrs, [2]string{"read_only", stringList(x.readOnly)})
	}
	if x.network {
		attrs = append(attrs, [2]string{"network", config.Quote(string(sandbox.NetworkAllowed))})
	}
	writeAttrs(b, attrs, in)
	b.WriteString(indent + "}\n")
}

// readWriteList is the read_write list: on one line, or one path a line
// when a refused path is there too, commented out below its reason.
func (x *box) readWriteList(indent string) string {
	if len(x.refused) == 0 {
		return stringList(x.readWrite)
	}
	var b strings.Builder
	b.WriteString("[\n")
	for _, p := range x.readWrite {
		b.WriteString(indent + "  " + config.Quote(p) + ",\n")
	}
	for _, r := range x.refused {
		writeComment(&b, indent+"  # toolhost would refuse this one: "+r.why)
		writeComment(&b, indent+"  # "+config.Quote(r.path)+",")
	}
	b.WriteString(indent + "]")
	return b.String()
}

// list is a list expression of elems, on one line.
func list(elems []string) string { return "[" + strings.Join(elems, ", ") + "]" }

// stringList is a list expression of the strings ss, on one line.
func stringList(ss []string) string {
	elems := make([]string, len(ss))
	for i, s := range ss {
		elems[i] = config.Quote(s)
	}
	return list(elems)
}

// writeComment writes a line comment; text starts with "#", and a control
// character in it (a newline in a file name) becomes "?".
func writeComment(b *strings.Builder, text string) {
	b.WriteString(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, text))
	b.WriteByte('\n')
}

// writeAttrs writes name = expr lines at indent, the = signs aligned as
// hclfmt aligns them.
func writeAttrs(b *strings.Builder, attrs [][2]string, indent string) {
	width := 0
	for _, a := range attrs {
		width = max(width, len(a[0]))
	}
	for _, a := range attrs {
		fmt.Fprintf(b, "%s%-*s = %s\n", indent, width, a[0], a[1])
	}
}

// maxLine is the longest object written on one line.
const maxLine = 100

// object is an object expression, keys in the order given: on one line
// when short, else one key a line at indent's next level.
func object(kvs []keyValue, indent string) string {
	attrs := make([][2]string, len(kvs))
	oneLine := make([]string, len(kvs))
	for i, kv := range kvs {
		key := config.Quote(kv.key)
		// A keyword would start another expression: { for = … } is a for.
		if bareKeyRE.MatchString(kv.key) && !slices.Contains([]string{"for", "if", "in", "true", "false", "null"}, kv.key) {
			key = kv.key
		}
		attrs[i] = [2]string{key, kv.val.expr()}
		oneLine[i] = key + " = " + attrs[i][1]
	}
	if line := "{ " + strings.Join(oneLine, ", ") + " }"; len(indent)+len("headers = ")+len(line) <= maxLine {
		return line
	}
	var b strings.Builder
	b.WriteString("{\n")
	writeAttrs(&b, attrs, indent+"  ")
	b.WriteString(indent + "}")
	return b.String()
}

// bareKeyRE matches the object keys written without quotes.
var bareKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// expr writes v: a quoted string when it is all text, env("NAME") when it
// is one reference, else a template such as "Bearer ${env("NAME")}".
func (v value) expr() string {
	switch {
	case len(v) == 1 && v[0].env == "":
		return config.Quote(v[0].text)
	case len(v) == 1:
		return envCall(v[0].env)
	}
	var b strings.Builder
	b.WriteByte('"')
	for i, p := range v {
		if p.env != "" {
			b.WriteString("${" + envCall(p.env) + "}")
			continue
		}
		text := p.text
		// "$" or "%" just before an interpolation would escape it ($${):
		// write that one as an interpolation of itself.
		last := ""
		if i+1 < len(v) && (strings.HasSuffix(text, "$") || strings.HasSuffix(text, "%")) {
			text, last = text[:len(text)-1], text[len(text)-1:]
		}
		q := config.Quote(text)
		b.WriteString(q[1 : len(q)-1]) // inside the template's own quotes
		if last != "" {
			b.WriteString(`${"` + last + `"}`)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// envCall is the expression env("NAME").
func envCall(name string) string { return "env(" + config.Quote(name) + ")" }
