package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"unicode/utf8"
)

// loader reads a script, reporting errors at their position in the file.
type loader struct {
	file string
	data []byte
}

// node is a JSON value of a script with its position.
type node struct {
	off    int    // where the value starts
	key    string // in an object, the value's key
	keyOff int    // in an object, where the key starts
	// kind is '{' (object), '[' (array), '"' (string), '0' (number), 't'
	// (boolean) or 'n' (null).
	kind     byte
	value    any     // a string (a *scriptTemplate in arguments), json.Number or bool
	children []*node // an object's members or an array's items
}

// kindNames name the kinds of nodes in errors.
var kindNames = map[byte]string{'{': "an object", '[': "an array", '"': "a string", '0': "a number", 't': "a boolean", 'n': "null"}

// member is an object's member with the key, or nil.
func (n *node) member(key string) *node {
	for _, c := range n.children {
		if c.key == key {
			return c
		}
	}
	return nil
}

// errorf is an error at the offset.
func (l *loader) errorf(off int, format string, args ...any) error {
	return fmt.Errorf("model: scripted: %s: %s", l.pos(off), fmt.Sprintf(format, args...))
}

// pos is "file:line,col" of the offset (columns count characters).
func (l *loader) pos(off int) string {
	off = min(off, len(l.data))
	lineStart := bytes.LastIndexByte(l.data[:off], '\n') + 1
	line := 1 + bytes.Count(l.data[:off], []byte("\n"))
	return fmt.Sprintf("%s:%d,%d", l.file, line, 1+utf8.RuneCount(l.data[lineStart:off]))
}

// tree parses the file into nodes.
func (l *loader) tree() (*node, error) {
	// Unmarshal reports only syntax errors here, at an offset just past the
	// bad character or at the end of the input.
	var syntax *json.SyntaxError
	if err := json.Unmarshal(l.data, new(any)); errors.As(err, &syntax) {
		off := int(syntax.Offset)
		if off < len(l.data) {
			off--
		}
		return nil, l.errorf(max(off, 0), "%v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(l.data))
	dec.UseNumber()
	return l.value(dec)
}

// value reads the next value of a valid document.
func (l *loader) value(dec *json.Decoder) (*node, error) {
	n := &node{off: l.skip(dec.InputOffset())}
	tok, err := dec.Token()
	if err != nil {
		return nil, l.errorf(n.off, "%v", err)
	}
	switch tok := tok.(type) {
	case json.Delim:
		n.kind = byte(tok)
		for dec.More() {
			keyOff := l.skip(dec.InputOffset())
			var key string
			if n.kind == '{' {
				tok, _ := dec.Token() // a string key: the document is valid
				if key, _ = tok.(string); n.member(key) != nil {
					return nil, l.errorf(keyOff, "duplicate key %q", key)
				}
			}
			c, err := l.value(dec)
			if err != nil {
				return nil, err
			}
			c.key, c.keyOff = key, keyOff
			n.children = append(n.children, c)
		}
		_, err = dec.Token() // the closing delimiter
	case string:
		n.kind, n.value = '"', tok
	case json.Number:
		n.kind, n.value = '0', tok
	case bool:
		n.kind, n.value = 't', tok
	default:
		n.kind = 'n'
	}
	return n, err
}

// skip is the offset of the next token at or after off: past space and the
// separators the decoder has not consumed.
func (l *loader) skip(off int64) int {
	i := int(off)
	for i < len(l.data) && strings.IndexByte(" \t\r\n,:", l.data[i]) >= 0 {
		i++
	}
	return i
}

// expect refuses a node not of the kind.
func (l *loader) expect(n *node, kind byte, what string) error {
	if n.kind != kind {
		return l.errorf(n.off, "%s must be %s, not %s", what, kindNames[kind], kindNames[n.kind])
	}
	return nil
}

// fields refuses a node that is not an object of the known fields.
func (l *loader) fields(n *node, what string, known ...string) error {
	if err := l.expect(n, '{', what); err != nil {
		return err
	}
	for _, c := range n.children {
		if !slices.Contains(known, c.key) {
			return l.errorf(c.keyOff, "unknown field %q in %s (known: %s)", c.key, what, strings.Join(known, ", "))
		}
	}
	return nil
}

// integer reads a whole number.
func (l *loader) integer(n *node, what string) (int, error) {
	if err := l.expect(n, '0', what); err != nil {
		return 0, err
	}
	i, err := strconv.Atoi(string(n.value.(json.Number)))
	if err != nil {
		return 0, l.errorf(n.off, "%s must be a whole number, not %s", what, n.value)
	}
	return i, nil
}

// template parses a string node as a template and tries it on sample data.
func (l *loader) template(n *node, what string, sample map[string]any) (*scriptTemplate, error) {
	if err := l.expect(n, '"', what); err != nil {
		return nil, err
	}
	t, err := template.New("script").Option("missingkey=error").Parse(n.value.(string))
	if err == nil {
		err = t.Execute(io.Discard, sample)
	}
	if err != nil {
		return nil, l.errorf(n.off, "bad template in %s: %v", what, err)
	}
	return &scriptTemplate{t: t, pos: l.pos(n.off)}, nil
}

// turn reads a TURN object.
func (l *loader) turn(n *node, what string) (*scriptTurn, error) {
	if err := l.fields(n, what, "tool_calls", "final_answer", "content", "usage", "repeat", "if"); err != nil {
		return nil, err
	}
	t := &scriptTurn{repeat: 1, when: playIfOK}
	var err error
	for _, c := range n.children {
		field := fmt.Sprintf("%q of %s", c.key, what)
		switch c.key {
		case "tool_calls":
			t.calls, err = l.calls(c, field)
		case "final_answer", "content":
			if t.text != nil {
				return nil, l.errorf(c.keyOff, `%s has both "final_answer" and "content"`, what)
			}
			t.text, err = l.template(c, field, sampleTurnData)
		case "usage":
			t.usage, err = l.usage(c, field)
		case "repeat":
			if t.repeat, err = l.integer(c, field); err == nil && (t.repeat == 0 || t.repeat < -1) {
				err = l.errorf(c.off, "%s is %d: want -1 (forever) or at least 1", field, t.repeat)
			}
		case "if":
			if err = l.expect(c, '"', field); err == nil {
				t.when = c.value.(string)
				if !slices.Contains([]string{playIfOK, playIfFailed, playAlways}, t.when) {
					err = l.errorf(c.off, "%s is %q: want %q, %q or %q", field, t.when, playIfOK, playIfFailed, playAlways)
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// calls reads a turn's tool_calls.
func (l *loader) calls(n *node, what string) ([]scriptCall, error) {
	if err := l.expect(n, '[', what); err != nil {
		return nil, err
	}
	calls := make([]scriptCall, 0, len(n.children))
	for i, c := range n.children {
		call := fmt.Sprintf("tool call %d of %s", i+1, what)
		if err := l.fields(c, call, "name", "arguments"); err != nil {
			return nil, err
		}
		name := c.member("name")
		if name == nil {
			return nil, l.errorf(c.off, "%s has no name", call)
		}
		if err := l.expect(name, '"', "the name of "+call); err != nil {
			return nil, err
		}
		sc := scriptCall{name: name.value.(string)}
		if args := c.member("arguments"); args != nil && args.kind != 'n' {
			if err := l.compile(args, "the arguments of "+call); err != nil {
				return nil, err
			}
			sc.args = args
		}
		calls = append(calls, sc)
	}
	return calls, nil
}

// compile parses every string inside a JSON value as a template, in place.
func (l *loader) compile(n *node, what string) error {
	if n.kind == '"' {
		t, err := l.template(n, what, sampleTurnData)
		n.value = t
		return err
	}
	for _, c := range n.children {
		if err := l.compile(c, what); err != nil {
			return err
		}
	}
	return nil
}

// render is the JSON value of a compiled node, its templates executed.
func (n *node) render(data map[string]any) (any, error) {
	switch n.kind {
	case '"':
		return n.value.(*scriptTemplate).render(data)
	case '{', '[':
		items, obj := make([]any, len(n.children)), make(map[string]any, len(n.children))
		for i, c := range n.children {
			v, err := c.render(data)
			if err != nil {
				return nil, err
			}
			items[i], obj[c.key] = v, v
		}
		if n.kind == '[' {
			return items, nil
		}
		return obj, nil
	}
	return n.value, nil
}

// usage reads a turn's usage.
func (l *loader) usage(n *node, what string) (*Usage, error) {
	if err := l.fields(n, what, "prompt_tokens", "completion_tokens"); err != nil {
		return nil, err
	}
	u := &Usage{}
	counts := map[string]*int{"prompt_tokens": &u.PromptTokens, "completion_tokens": &u.CompletionTokens}
	for _, c := range n.children {
		v, err := l.integer(c, fmt.Sprintf("%q of %s", c.key, what))
		if err == nil && v < 0 {
			err = l.errorf(c.off, "%q of %s is %d: want at least 0", c.key, what, v)
		}
		if err != nil {
			return nil, err
		}
		*counts[c.key] = v
	}
	return u, nil
}
