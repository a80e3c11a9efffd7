package store

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The event writer encodes events itself, into buffers it reuses: the
// payloads' JSON, and PostgreSQL's batches as a binary COPY stream. Writing
// events then allocates little, so it adds little to the garbage
// collector's work, which every call pays for in its latency.

// batchBuf is the writer goroutine's scratch space, kept from batch to batch.
type batchBuf struct {
	data    []byte   // PostgreSQL's batch
	args    []any    // an INSERT's arguments (SQLite)
	payload []byte   // one event's payload (SQLite)
	keys    []string // a payload's keys, sorted
}

// appendRow appends an event's columns to args, in eventCopyColumns' order,
// as SQLite's INSERT takes them.
func (b *batchBuf) appendRow(args []any, e Event) []any {
	args = append(args, stamp(e.Time))
	for _, s := range eventText(e) {
		args = append(args, s)
	}
	b.payload = b.appendPayload(b.payload[:0], e.Payload)
	return append(args, string(b.payload))
}

// eventText is an event's text columns between its time and its payload,
// in eventCopyColumns' order, each cleaned by cleanText. Two are read from
// the payload, so that their events are found through an index: the
// credential it names, and the decision of its approval (a call's terminal
// event's, when the call asked an approver).
func eventText(e Event) [9]string {
	cred, _ := e.Payload["credential"].(string)
	var decision string
	if a, ok := e.Payload["approval"].(map[string]any); ok {
		decision, _ = a["decision"].(string)
	}
	t := [...]string{e.Type, e.CallID, e.AgentID, e.Role, e.Tool, e.Group, e.ParentID, cred, decision}
	for i, s := range t {
		t[i] = cleanText(s)
	}
	return t
}

// copyHeader starts a binary COPY stream: the signature, no flags, no
// header extension.
const copyHeader = "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// appendCopyMessages appends what copyEvents sends for events, framed as
// protocol messages: the query copySQL of table, the batch as one CopyData
// message (appendCopyBatch), and CopyDone.
func (b *batchBuf) appendCopyMessages(dst []byte, events []Event, table string) []byte {
	dst = appendMessage(dst, 'Q', func(dst []byte) []byte { return append(append(dst, copySQL(table)...), 0) })
	dst = appendMessage(dst, 'd', func(dst []byte) []byte { return b.appendCopyBatch(dst, events) })
	return append(dst, 'c', 0, 0, 0, 4)
}

// appendMessage appends a protocol message of type typ whose body body
// appends, with its length.
func appendMessage(dst []byte, typ byte, body func([]byte) []byte) []byte {
	dst = append(dst, typ, 0, 0, 0, 0)
	at := len(dst) - 4
	dst = body(dst)
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at))
	return dst
}

// appendCopyBatch appends events as PostgreSQL's binary COPY stream of
// eventCopyColumns, all text.
func (b *batchBuf) appendCopyBatch(dst []byte, events []Event) []byte {
	dst = append(dst, copyHeader...)
	for _, e := range events {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(eventCopyColumns)))
		at := len(dst)
		dst = appendStamp(append(dst, 0, 0, 0, 0), e.Time)
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
		for _, s := range eventText(e) {
			dst = append(binary.BigEndian.AppendUint32(dst, uint32(len(s))), s...)
		}
		at = len(dst)
		dst = b.appendPayload(append(dst, 0, 0, 0, 0), e.Payload)
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	}
	return append(dst, 0xff, 0xff) // the trailer: a tuple of -1 fields
}

// appendStamp appends t as stamp formats it.
func appendStamp(dst []byte, t time.Time) []byte { return t.UTC().AppendFormat(dst, tsLayout) }

// cleanText returns s with each byte that is not valid UTF-8, and each NUL,
// replaced by U+FFFD: PostgreSQL's text holds neither, and one such field
// (a call id or tool name chosen by a caller) would otherwise fail the
// whole batch it is in, losing other calls' events. Both engines store the
// same text. A clean s is returned as it is.
func cleanText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// appendPayload appends p encoded as json.Marshal encodes it ({} for nil):
// itself for a flat object of strings, numbers, booleans and nulls (what
// the host's events hold), through json.Marshal otherwise. One that cannot
// be encoded becomes {"encode_error": "..."}, so that the event is kept.
func (b *batchBuf) appendPayload(dst []byte, p map[string]any) []byte {
	if p == nil {
		return append(dst, "{}"...)
	}
	b.keys = b.keys[:0]
	for k := range p {
		b.keys = append(b.keys, k)
	}
	slices.Sort(b.keys)
	start := len(dst)
	dst = append(dst, '{')
	for i, k := range b.keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(dst, k), ':')
		var ok bool
		if dst, ok = appendScalar(dst, p[k]); !ok {
			return append(dst[:start], marshalPayload(p)...)
		}
	}
	return append(dst, '}')
}

// marshalPayload encodes p with json.Marshal, or when it cannot be encoded
// says why in {"encode_error": "..."}.
func marshalPayload(p map[string]any) []byte {
	out, err := json.Marshal(p)
	if err != nil {
		out, _ = json.Marshal(map[string]string{"encode_error": err.Error()})
	}
	return out
}

// appendScalar appends v as json.Marshal encodes it when v is a string, a
// bool, nil, a finite float or an integer; ok is false for anything else.
func appendScalar(dst []byte, v any) (_ []byte, ok bool) {
	switch v := v.(type) {
	case string:
		return appendJSONString(dst, v), true
	case bool:
		return strconv.AppendBool(dst, v), true
	case nil:
		return append(dst, "null"...), true
	case float64:
		return appendFloat(dst, v, 64)
	case float32:
		return appendFloat(dst, float64(v), 32)
	case int:
		return strconv.AppendInt(dst, int64(v), 10), true
	case int64:
		return strconv.AppendInt(dst, v, 10), true
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), true
	case uint64:
		return strconv.AppendUint(dst, v, 10), true
	case uint32:
		return strconv.AppendUint(dst, uint64(v), 10), true
	case uint:
		return strconv.AppendUint(dst, uint64(v), 10), true
	}
	return dst, false
}

// appendFloat appends f as encoding/json writes a float of bits bits: the
// shortest decimal that reads back as f, in exponent form below 1e-6 and
// from 1e21 on, with a one-digit negative exponent unpadded. NaN and the
// infinities are not JSON (ok is false).
func appendFloat(dst []byte, f float64, bits int) (_ []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 {
		if bits == 64 && (a < 1e-6 || a >= 1e21) || bits == 32 && (float32(a) < 1e-6 || float32(a) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if n := len(dst); format == 'e' && n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1] // e-07 → e-7
		dst = dst[:n-1]
	}
	return dst, true
}

// appendJSONString appends s as a JSON string escaped as json.Marshal
// escapes it: quotes, backslashes and control characters; <, > and & (as
// \u003c…); U+2028 and U+2029; each invalid UTF-8 byte becomes \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, `\b`...)
			case '\f':
				dst = append(dst, `\f`...)
			case '\n':
				dst = append(dst, `\n`...)
			case '\r':
				dst = append(dst, `\r`...)
			case '\t':
				dst = append(dst, `\t`...)
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(dst, s[start:]...), '"')
}
