package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
	"github.com/toolhost/toolhost/internal/mcp/jsondepth"
	"github.com/toolhost/toolhost/internal/mcp/jsonline"
)

// Over stdio the SDK's transport ends the connection at the first line it
// cannot decode: a stray line from a client ended `toolhost mcp`. Ours
// (lineConn) does not: each line that is not a JSON-RPC message is
// answered with the error JSON-RPC names for it, -32700 for a line that is
// not JSON and -32600 for JSON that is not a message or a line longer than
// the limit, and skipped; the connection goes on. It reads each line once
// and decodes it once, on the goroutine that asks for the next message
// where it can (the SDK's reads it on a goroutine of its own and hands
// each message over).
//
// A batch (a line that is a JSON array) is refused with -32600: MCP
// removed JSON-RPC batching in 2025-06-18, the SDK refuses batches from
// then on (by ending the connection), and the Go and TypeScript SDKs'
// clients send none. Answering one would mean holding its requests'
// responses until the last and writing them as one array.

// newLineTransport returns a transport of newline-delimited JSON-RPC over in
// and out; maxLine bounds a line (0: mcp.DefaultMaxLineLength; < 0: no
// bound). Closing its connection closes in, and out with closeOut unless
// it is nil.
func newLineTransport(in io.ReadCloser, out io.Writer, closeOut func() error, maxLine int) mcp.Transport {
	if maxLine == 0 {
		maxLine = mcp.DefaultMaxLineLength
	}
	return &lineTransport{in: in, out: out, closeOut: closeOut, maxLine: maxLine}
}

// lineTransport is a transport of newline-delimited JSON-RPC; its one
// connection is a lineConn.
type lineTransport struct {
	in       io.ReadCloser
	out      io.Writer
	closeOut func() error
	maxLine  int
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{
		in:       t.in,
		lines:    jsonline.NewReader(bufio.NewReaderSize(t.in, 64<<10), t.maxLine),
		maxLine:  t.maxLine,
		out:      t.out,
		closeOut: t.closeOut,
		closed:   make(chan struct{}),
	}
	if !closeEndsRead(t.in) {
		c.incoming = make(chan readResult)
		go c.readAhead()
	}
	return c, nil
}

// closeEndsRead reports whether closing r ends a Read of it under way: a
// pipe's, a network connection's, or a file's the runtime polls (stdin
// opened non-blocking: cmd/toolhost's). A read of another (os.Stdin as a
// process usually gets it, blocking) may outlast Close.
func closeEndsRead(r io.Reader) bool {
	switch r := r.(type) {
	case *io.PipeReader, net.Conn:
		return true
	case *os.File:
		return r.SetReadDeadline(time.Time{}) == nil // os.ErrNoDeadline where it is not polled
	}
	return false
}

// pollableStdin returns stdin opened anew (/proc/self/fd/0) in non-blocking
// mode, so that the Go runtime waits for it in its poller: a read(2) that
// blocks holds on to one of the runtime's Ps until sysmon takes it back, and
// the goroutines made runnable on it meanwhile (a call's gRPC writer) wait,
// which costs a call over stdio about a tenth of its latency on 2 cores. Its
// own open file description leaves the shared one's flags as they are (a
// terminal stays as the shell set it). It is os.Stdin where stdin cannot be
// opened so (a socket, no /proc).
func pollableStdin() *os.File {
	if f, err := os.OpenFile("/proc/self/fd/0", os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
		return f
	}
	return os.Stdin
}

// lineConn is a connection of newline-delimited JSON-RPC (see the top of
// the file).
type lineConn struct {
	in      io.ReadCloser
	lines   *jsonline.Reader
	maxLine int   // < 0: no bound
	err     error // the error that ended reading

	// incoming carries the messages read ahead by readAhead, when closing
	// in may not end a read (nil: Read reads itself).
	incoming chan readResult

	mu       sync.Mutex // held to write to out
	out      io.Writer
	buf      []byte // a message and its newline, written at once
	closeOut func() error

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

func (c *lineConn) SessionID() string { return "" }

// Read returns the next message, answering the lines before it that are
// not one. Once the connection is closed it returns io.EOF.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
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
func (c *lineConn) readAhead() {
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

// next reads lines until one is a message, and returns it decoded.
func (c *lineConn) next() (jsonrpc.Message, error) {
	for c.err == nil {
		line, err := c.readLine()
		c.err = err
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if msg := c.decode(line); msg != nil {
				return msg, nil // c.err, if any, on the next call
			}
		}
	}
	return nil, c.err
}

// readLine returns the next line of no more than maxLine bytes (before its
// newline), which is valid until the next read; a longer one is answered,
// skipped without being kept, and returned as nil.
func (c *lineConn) readLine() ([]byte, error) {
	line, size, err := c.lines.Next(nil)
	if size > 0 {
		c.replyError(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("a message longer than %d bytes is refused", c.maxLine))
		return nil, err
	}
	return line, err
}

// decode returns the message line is, or answers it and returns nil
// (parseLine says why it is none).
func (c *lineConn) decode(line []byte) jsonrpc.Message {
	if line[0] == '[' {
		if !json.Valid(line) {
			c.replyError(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON")
		} else {
			c.replyError(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported (MCP has none since 2025-06-18)")
		}
		return nil
	}
	msg, bad := parseLine(line)
	if bad != nil {
		c.reply(bad)
	}
	return msg
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

// parseLine returns the message a line holds, or the answer to a line that
// holds none, saying why: -32700 for a line that is not one JSON value,
// -32600 for JSON that is not a JSON-RPC 2.0 message as MCP sends them. A
// message is an object whose "jsonrpc" is "2.0" and whose "id", if any, is
// a string or an integer that a JSON number holds exactly (|id| <= 2^53; a
// null id is none); with a "method" (a string, not empty) it is a request,
// or a notification without an id; else it is a response to the request
// with its id, holding an "error" (a JSON-RPC error object) or a "result".
// The line is decoded once, keeping params and result raw for the SDK,
// which decodes them and answers what it cannot read in them. The decoder
// (segmentio's, for its speed) recurses as the JSON nests, through what it
// keeps raw too, so nesting is bounded first: jsondepth.Max, as deep as
// MCP peers read.
func parseLine(line []byte) (jsonrpc.Message, *rpcErrorReply) {
	if d := jsondepth.Of(line); d > jsondepth.Max {
		return nil, invalid(jsonline.ID(line), fmt.Sprintf("the message nests %d levels deep, more than %d", d, jsondepth.Max))
	}
	var m lineMembers
	rest, err := segjson.Parse(line, &m, exactNames)
	switch {
	case err != nil && !json.Valid(line), err == nil && len(bytes.TrimSpace(rest)) > 0:
		return nil, newRPCErrorReply(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON")
	case err != nil:
		return nil, invalid(nil, "a message is a JSON object")
	}
	id, ok := requestID(m.ID)
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

// invalid is the answer to a line whose JSON is no message, for the reason
// why: -32600, to the request with the id when it is one.
func invalid(id json.RawMessage, why string) *rpcErrorReply {
	if !jsonline.IsRequestID(id) {
		id = nil
	}
	return newRPCErrorReply(id, jsonrpc.CodeInvalidRequest, "invalid request: "+why)
}

// requestID returns the id that raw, a message's "id" as sent, is, and
// whether it is one: a string, an integer of at most 2^53 (beyond, a
// number is no longer held exactly), or none (absent, or null).
func requestID(raw json.RawMessage) (jsonrpc.ID, bool) {
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

// replyError writes a JSON-RPC error response to the request with the id
// (null when it has none).
func (c *lineConn) replyError(id json.RawMessage, code int64, message string) {
	c.reply(newRPCErrorReply(id, code, message))
}

// reply writes the error response r.
func (c *lineConn) reply(r *rpcErrorReply) {
	b, _ := json.Marshal(r)
	_ = c.write(b)
}

// rpcErrorReply is a JSON-RPC error response: the SDK's error object, to the
// request with the id, null when it has none. It is not a jsonrpc.Response
// for that null: jsonrpc.EncodeMessage leaves out an id that is none, where
// JSON-RPC asks for "id": null.
type rpcErrorReply struct {
	JSONRPC string          `json:"jsonrpc"` // "2.0"
	ID      json.RawMessage `json:"id"`
	Error   *jsonrpc.Error  `json:"error"`
}

// newRPCErrorReply returns the error response of the code and message to
// the request with the id (nil: null).
func newRPCErrorReply(id json.RawMessage, code int64, message string) *rpcErrorReply {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return &rpcErrorReply{JSONRPC: "2.0", ID: id, Error: &jsonrpc.Error{Code: code, Message: message}}
}

// Write writes msg as one line.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
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
func (c *lineConn) write(data []byte) error {
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

// Close closes in, and out with closeOut; a Read under way returns
// io.EOF.
func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.closeErr = c.in.Close()
		if c.closeOut != nil {
			c.closeErr = errors.Join(c.closeErr, c.closeOut())
		}
	})
	return c.closeErr
}

func (c *lineConn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}
