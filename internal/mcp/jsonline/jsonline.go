// Package jsonline is newline-delimited JSON-RPC for both stdio ends, the
// MCP front's and an mcp_server module's: a connection ([Conn]) that reads
// lines of a bounded length, decodes each once, and, for a line too long
// to keep, reads through it and learns what it was (its id, whether it had
// a method) from its bytes as they go by, keeping none of them.
package jsonline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
)

// skip reads to the end of the line in is in (its newline included),
// handing each piece to seen when it is not nil.
func skip(in *bufio.Reader, seen func([]byte)) error {
	for {
		chunk, err := in.ReadSlice('\n')
		if seen != nil {
			seen(chunk)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// lineID returns the "id" member of the JSON object line is, as sent, when a
// bounded decoder (encoding/json's) reads one; nil otherwise.
func lineID(line []byte) json.RawMessage {
	var r struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &r) != nil {
		return nil
	}
	return r.ID
}

// IsRequestID reports whether id, as a message holds it, is a request's: a
// string or a number.
func IsRequestID(id json.RawMessage) bool {
	return len(id) > 0 && bytes.ContainsRune([]byte(`"-0123456789`), rune(id[0]))
}

// maxID bounds the id members keeps; a longer one is none.
const maxID = 256

// members follows a JSON object's bytes, written to it piece by piece, and
// notes its top-level "id" (its value as sent, when at most maxID bytes)
// and whether it has a "method". It keeps nothing else, so a line of any
// length costs it nothing; it does not check that the JSON is valid (the
// id it returns is). A member name written with escapes is not matched.
type members struct {
	depth   int  // of nesting: 1 inside the object
	inStr   bool // inside a string
	esc     bool // after a backslash in a string
	isKey   bool // the string at depth 1 is a member's name
	wantKey bool // at depth 1, the next string is a member's name
	key     []byte
	inID    bool // reading the value of "id"
	id      []byte
	hasID   bool
	method  bool
	done    bool
}

// Write notes what the piece of the object holds; it never fails.
func (m *members) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0 && !m.done; rest = rest[1:] {
		if m.inStr && !m.esc && !m.isKey && !m.inID {
			// The rest of a string's text, which is all alike to m.
			i := bytes.IndexAny(rest, `"\`)
			if i < 0 {
				break
			}
			rest = rest[i:]
		}
		m.step(rest[0])
	}
	return len(p), nil
}

func (m *members) step(c byte) {
	if m.inID && !(m.depth == 1 && !m.inStr && (c == ',' || c == '}')) {
		if len(m.id) <= maxID {
			m.id = append(m.id, c)
		}
	}
	if m.inStr {
		switch {
		case m.esc:
			m.esc = false
		case c == '\\':
			m.esc = true
		case c == '"':
			m.inStr = false
			if m.isKey {
				m.isKey = false
				m.method = m.method || string(m.key) == "method"
			}
		case m.isKey && len(m.key) <= len("method"):
			m.key = append(m.key, c)
		}
		return
	}
	switch c {
	case '"':
		m.inStr = true
		if m.depth == 1 && m.wantKey {
			m.isKey, m.wantKey, m.key = true, false, m.key[:0]
		}
	case '{', '[':
		m.depth++
		if m.depth == 1 {
			m.wantKey = true
		}
	case '}', ']':
		if m.depth == 1 {
			m.endValue()
			m.done = true
		}
		m.depth--
	case ',':
		if m.depth == 1 {
			m.endValue()
			m.wantKey = true
		}
	case ':':
		if m.depth == 1 && string(m.key) == "id" {
			m.inID, m.id = true, m.id[:0]
		}
	}
}

// endValue ends the value of a member at depth 1.
func (m *members) endValue() {
	if m.inID {
		m.inID, m.hasID = false, true
	}
	m.key = m.key[:0]
}

// ID returns the object's "id" as sent, when it is a string or a number
// of at most maxID bytes (the last one, if there were several); nil
// otherwise.
func (m *members) ID() json.RawMessage {
	id := bytes.TrimSpace(m.id)
	if !m.hasID || len(m.id) > maxID || !IsRequestID(id) || !json.Valid(id) {
		return nil
	}
	return json.RawMessage(bytes.Clone(id))
}

// HasMethod reports whether the object has a "method": it is a request or
// a notification, not a response.
func (m *members) HasMethod() bool { return m.method }

// reader reads newline-delimited messages, each bounded in length.
type reader struct {
	rd   *bufio.Reader
	max  int    // < 0: no bound
	long []byte // a line longer than rd's buffer, gathered
}

// newReader returns a reader of rd's lines of at most max bytes before
// their newline (max < 0: no bound).
func newReader(rd *bufio.Reader, max int) *reader { return &reader{rd: rd, max: max} }

// Next returns the next line, its newline included (but at the end of the
// input), valid until the next call, and the error that ended it. A line
// over the bound is read through without being kept, each of its pieces
// handed to seen when it is not nil: Next then returns no line and its
// size (before its newline), which is above zero.
func (r *reader) Next(seen func([]byte)) (line []byte, tooLong int, err error) {
	if cap(r.long) > 1<<20 {
		r.long = nil // a long line's room is not kept
	}
	r.long = r.long[:0]
	for {
		chunk, err := r.rd.ReadSlice('\n')
		n := len(r.long) + len(chunk)
		if err == nil {
			n-- // the newline
		}
		if r.max >= 0 && n > r.max {
			size, err := r.through(chunk, err, seen)
			return nil, size, err
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			r.long = append(r.long, chunk...)
			continue
		}
		if len(r.long) > 0 {
			return append(r.long, chunk...), 0, err
		}
		return chunk, 0, err
	}
}

// through reads the rest of a line over the bound, of which r.long and
// chunk (read with err) are the start, handing the pieces to seen, and
// returns its size before its newline and what ended it.
func (r *reader) through(chunk []byte, err error, seen func([]byte)) (int, error) {
	size := len(r.long) + len(chunk)
	if seen != nil {
		seen(r.long)
		seen(chunk)
	}
	r.long = nil
	if errors.Is(err, bufio.ErrBufferFull) {
		err = skip(r.rd, func(b []byte) {
			size += len(b)
			if seen != nil {
				seen(b)
			}
		})
	}
	if err == nil {
		size-- // the newline
	}
	return size, err
}
