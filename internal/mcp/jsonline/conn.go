package jsonline

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
	"github.com/toolhost/toolhost/internal/mcp/jsondepth"
)

// Conn is a connection of newline-delimited JSON-RPC, an mcp.Connection
// for both ends of stdio: the MCP front's (`toolhost mcp`) and an
// mcp_server module's. It reads each line once and decodes it once with
// segmentio's decoder (the SDK's transport makes a decoder with a fresh
// 32 KiB buffer for each message, twice), on the goroutine that asks for
// the next message where it can. A line that is not a message does not
// end the connection, as the SDK's transport would: it is refused
// (Options.Refused) and skipped.
//
// A batch (a line that is a JSON array) is refused: MCP removed JSON-RPC
// batching in 2025-06-18, the SDK refuses batches from then on (by ending
// the connection), and the Go and TypeScript SDKs send none.
type Conn struct {
	in      io.Reader
	lines   *reader
	maxLine int   // < 0: no bound
	err     error // the error that ended reading
	refused func(*Conn, Refusal) (jsonrpc.Message, error)
	long    members      // what a line over the bound was
	seen    func([]byte) // notes a piece of such a line in long

	// incoming carries the messages read ahead by readAhead (nil: Read
	// reads itself).
	incoming chan readResult

	mu  sync.Mutex // held to write to out
	out io.Writer
	buf []byte // a message and its newline, written at once

	close     func() error
	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// Options are how a Conn reads and closes.
type Options struct {
	// MaxLine bounds a line before its newline (0: mcp.DefaultMaxLineLength;
	// < 0: no bound).
	MaxLine int
	// Close closes what the Conn reads and writes, once, when the Conn is
	// closed (nil: nothing).
	Close func() error
	// ReadAhead reads on a goroutine of the Conn's own, for an input whose
	// Close may not end a Read under way (a blocking stdin): Read then
	// returns at Close whatever the input does.
	ReadAhead bool
	// Refused is told of each line that is no message, and returns the
	// message that stands for it (nil: none), or an error that ends
	// reading. Nil answers the line (Conn.reply), as a JSON-RPC server
	// does, and reads on.
	Refused func(*Conn, Refusal) (jsonrpc.Message, error)
}

// Refusal is a line that is no message, and the JSON-RPC error that
// answers it: -32700 for a line that is not one JSON value, -32600 for JSON
// that is not a JSON-RPC 2.0 message or a line over the bound.
type Refusal struct {
	// ID is the line's "id" as sent, when it is a request's (a string or a
	// number); nil otherwise.
	ID json.RawMessage
	// Method reports whether the line has a "method": it is a request or a
	// notification (known only for a line over the bound).
	Method bool
	// Size is the size of a line over the bound, before its newline; 0
	// for another.
	Size int
	// Line is the line, valid only while Refused runs; nil for a line over
	// the bound.
	Line []byte
	// Error is the JSON-RPC error that answers the line.
	Error *jsonrpc.Error
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

// NewConn returns a Conn reading in and writing out.
func NewConn(in io.Reader, out io.Writer, opts Options) *Conn {
	if opts.MaxLine == 0 {
		opts.MaxLine = mcp.DefaultMaxLineLength
	}
	c := &Conn{
		in:      in,
		lines:   newReader(bufio.NewReaderSize(in, 64<<10), opts.MaxLine),
		maxLine: opts.MaxLine,
		refused: opts.Refused,
		out:     out,
		close:   opts.Close,
		closed:  make(chan struct{}),
	}
	c.seen = func(b []byte) { _, _ = c.long.Write(b) }
	if c.refused == nil {
		c.refused = func(c *Conn, r Refusal) (jsonrpc.Message, error) { c.reply(r); return nil, nil }
	}
	if opts.ReadAhead {
		c.incoming = make(chan readResult)
		go c.readAhead()
	}
	return c
}

// SessionID is "": a stream has no session id.
func (c *Conn) SessionID() string { return "" }

// Read returns the next message, refusing the lines before it that are
// not one. Once the connection is closed it returns io.EOF.
func (c *Conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.incoming == nil {
		if c.isClosed() {
			return nil, io.EOF
		}
		msg, err := c.next()
		if err != nil && c.isClosed() {
			err = io.EOF
		}
		return msg, err
	}
	select {
	case r, ok := <-c.incoming:
		if !ok {
			return nil, io.EOF
		}
		return r.msg, r.err
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readAhead reads the messages for Read until reading fails or the
// connection is closed.
func (c *Conn) readAhead() {
	defer close(c.incoming)
	for {
		msg, err := c.next()
		select {
		case c.incoming <- readResult{msg, err}:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
	}
}

// next reads lines until one is a message, or stands for one, and returns
// it.
func (c *Conn) next() (jsonrpc.Message, error) {
	for c.err == nil {
		c.long = members{}
		line, size, err := c.lines.Next(c.seen)
		c.err = err
		var msg jsonrpc.Message
		var bad error
		if size > 0 {
			msg, bad = c.refused(c, Refusal{ID: c.long.ID(), Method: c.long.HasMethod(), Size: size,
				Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("a message longer than %d bytes is refused", c.maxLine)}})
		} else if line = bytes.TrimSpace(line); len(line) > 0 {
			msg, bad = c.decode(line)
		}
		if bad != nil {
			c.err = bad
		}
		if msg != nil {
			return msg, nil // c.err, if any, on the next call
		}
	}
	return nil, c.err
}

// decode returns the message line is, or what stands for it when it is
// none (parseLine says why).
func (c *Conn) decode(line []byte) (jsonrpc.Message, error) {
	if line[0] == '[' {
		r := refusal(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported (MCP has none since 2025-06-18)")
		if !json.Valid(line) {
			r = refusal(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON")
		}
		r.Line = line
		return c.refused(c, r)
	}
	msg, bad := parseLine(line)
	if bad != nil {
		bad.Line = line
		return c.refused(c, *bad)
	}
	return msg, nil
}

// lineMembers are the members of a JSON-RPC message as a line holds them,
// each as it was sent (nil when the line has none), for parseLine to judge.
type lineMembers struct {
	Version json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// exactNames makes a member's name match its key exactly: JSON-RPC's names
// are lower case, and a "Method" is no method.
const exactNames = segjson.DontMatchCaseInsensitiveStructFields

// parseLine returns the message a line holds, or the refusal of a line
// that holds none, saying why: -32700 for a line that is not one JSON
// value, -32600 for JSON that is not a JSON-RPC 2.0 message as MCP sends
// them. A message is an object whose "jsonrpc" is "2.0" and whose "id", if
// any, is a string or an integer that a JSON number holds exactly (|id| <=
// 2^53; a null id is none); with a "method" (a string, not empty) it is a
// request, or a notification without an id; else it is a response to the
// request with its id, holding an "error" (a JSON-RPC error object) or a
// "result". The line is decoded once, keeping params and result raw for
// the SDK, which decodes them and answers what it cannot read in them. The
// decoder (segmentio's, for its speed) recurses as the JSON nests, through
// what it keeps raw too, so nesting is bounded first: jsondepth.Max, as
// deep as MCP peers read.
func parseLine(line []byte) (jsonrpc.Message, *Refusal) {
	if d := jsondepth.Of(line); d > jsondepth.Max {
		return nil, invalid(lineID(line), fmt.Sprintf("the message nests %d levels deep, more than %d", d, jsondepth.Max))
	}
	var m lineMembers
	rest, err := segjson.Parse(line, &m, exactNames)
	switch {
	case err != nil && !json.Valid(line), err == nil && len(bytes.TrimSpace(rest)) > 0:
		r := refusal(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON")
		return nil, &r
	case err != nil:
		return nil, invalid(nil, "a message is a JSON object")
	}
	id, ok := RequestID(m.ID)
	switch {
	case !ok:
		return nil, invalid(nil, `its "id" is neither a string nor an integer of at most 2^53`)
	case string(m.Version) != `"2.0"`:
		return nil, invalid(m.ID, `its "jsonrpc" is not "2.0"`)
	case m.Method != nil:
		var method string
		if m.Method[0] != '"' || segjson.Unmarshal(m.Method, &method) != nil || method == "" {
			return nil, invalid(m.ID, `its "method" is not a name (a string, not empty)`)
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: m.Params}, nil
	case !id.IsValid():
		return nil, invalid(nil, "neither a request, a notification nor a response: it has no method and no id")
	case m.Error != nil && string(m.Error) != "null":
		var e jsonrpc.Error
		if m.Error[0] != '{' || segjson.Unmarshal(m.Error, &e) != nil {
			return nil, invalid(m.ID, `its "error" is not an error object (code, message, data)`)
		}
		return &jsonrpc.Response{ID: id, Error: &e}, nil
	case m.Result != nil:
		return &jsonrpc.Response{ID: id, Result: m.Result}, nil
	}
	return nil, invalid(m.ID, "neither a request, a notification nor a response: it has no method, no result and no error")
}

// refusal is the refusal of a line with the id, for the code and message.
func refusal(id json.RawMessage, code int64, message string) Refusal {
	return Refusal{ID: id, Error: &jsonrpc.Error{Code: code, Message: message}}
}

// invalid is the refusal of a line whose JSON is no message, for the
// reason why: -32600, to the request with the id when it is one.
func invalid(id json.RawMessage, why string) *Refusal {
	if !IsRequestID(id) {
		id = nil
	}
	r := refusal(id, jsonrpc.CodeInvalidRequest, "invalid request: "+why)
	return &r
}

// RequestID returns the id that raw, a message's "id" as sent, is, and
// whether it is one: a string, an integer of at most 2^53 (beyond, a
// number is no longer held exactly), or none (absent, or null).
func RequestID(raw json.RawMessage) (jsonrpc.ID, bool) {
	if raw == nil || string(raw) == "null" {
		return jsonrpc.ID{}, true
	}
	var v any
	if raw[0] == '"' {
		var s string
		if segjson.Unmarshal(raw, &s) != nil {
			return jsonrpc.ID{}, false
		}
		v = s
	} else {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > 1<<53 || n < -1<<53 {
			return jsonrpc.ID{}, false
		}
		v = float64(n) // as jsonrpc.MakeID takes a JSON number
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil
}

// reply writes the JSON-RPC error response of r: to the request with its
// id, or with a null id when it has none (JSON-RPC's answer to a line
// whose id cannot be known).
func (c *Conn) reply(r Refusal) {
	id := r.ID
	if r.Size > 0 && !r.Method {
		id = nil // a response or a notification over the bound
	}
	_ = c.write(ErrorReply(id, r.Error.Code, r.Error.Message))
}

// ErrorReply is the JSON-RPC error response of the code and message to the
// request with the id, null when it is none (no string or number). It is
// no jsonrpc.Response for that null: jsonrpc.EncodeMessage leaves out an
// id that is none, where JSON-RPC asks for "id": null.
func ErrorReply(id json.RawMessage, code int64, message string) []byte {
	if !IsRequestID(id) {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, &jsonrpc.Error{Code: code, Message: message}})
	return b
}

// Write writes msg as one line.
func (c *Conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %v", err)
	}
	return c.write(data)
}

// write writes data and a newline in one Write, the only one under way.
func (c *Conn) write(data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isClosed() {
		return mcp.ErrConnectionClosed
	}
	c.buf = append(append(c.buf[:0], data...), '\n')
	_, err := c.out.Write(c.buf)
	if cap(c.buf) > 1<<20 {
		c.buf = nil // a long message's room is not kept
	}
	return err
}

// Close closes the connection (Options.Close); a Read under way returns
// io.EOF.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.close != nil {
			c.closeErr = c.close()
		}
	})
	return c.closeErr
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}
