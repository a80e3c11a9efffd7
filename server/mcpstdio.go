package server

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
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
	"github.com/toolhost/toolhost/internal/jsondepth"
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
		rd:       bufio.NewReaderSize(t.in, 64<<10),
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
	rd      *bufio.Reader
	maxLine int    // < 0: no bound
	long    []byte // a line longer than rd's buffer, gathered
	err     error  // the error that ended reading

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
	if cap(c.long) > 1<<20 {
		c.long = nil // a long line's room is not kept
	}
	c.long = c.long[:0]
	for {
		chunk, err := c.rd.ReadSlice('\n')
		n := len(c.long) + len(chunk)
		if err == nil {
			n-- // the newline
		}
		if c.maxLine >= 0 && n > c.maxLine {
			if errors.Is(err, bufio.ErrBufferFull) {
				err = skipLine(c.rd)
			}
			c.replyError(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("a message longer than %d bytes is refused", c.maxLine))
			return nil, err
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			c.long = append(c.long, chunk...)
			continue
		}
		if len(c.long) > 0 {
			return append(c.long, chunk...), err
		}
		return chunk, err
	}
}

// skipLine reads to the end of the line in is in.
func skipLine(in *bufio.Reader) error {
	for {
		if _, err := in.ReadSlice('\n'); !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

// decode returns the message line is, or answers it and returns nil. A
// line is decoded once; one that fails is looked at again to say why.
func (c *lineConn) decode(line []byte) jsonrpc.Message {
	if line[0] == '[' {
		if !json.Valid(line) {
			c.replyError(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON")
		} else {
			c.replyError(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported (MCP has none since 2025-06-18)")
		}
		return nil
	}
	msg, err := decodeMessage(line)
	if r, ok := msg.(*jsonrpc.Response); ok && err == nil && r.Result == nil && r.Error == nil {
		err = errors.New("neither a request, a notification nor a response")
	}
	valid := json.Valid(line) // DecodeMessage reads the first JSON value of line; the rest must be nothing
	if err == nil && valid {
		return msg
	}
	if !valid {
		c.replyError(nil, jsonrpc.CodeParseError, "parse error: the line is not JSON")
		return nil
	}
	var r struct {
		ID json.RawMessage `json:"id"`
	}
	var id json.RawMessage
	if json.Unmarshal(line, &r) == nil && isRequestID(r.ID) {
		id = r.ID
	}
	c.replyError(id, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	return nil
}

// wireMessage is a JSON-RPC message as it is decoded: the go-sdk's own
// shape for it.
type wireMessage struct {
	VersionTag string          `json:"jsonrpc"`
	ID         any             `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

// maxDepth bounds how deeply a message's JSON may nest, as the go-sdk
// bounds it.
const maxDepth = 1000

// decodeFlags are the flags the go-sdk decodes with: a field's name
// matches its key exactly, never in another case.
const decodeFlags = segjson.DontMatchCaseInsensitiveStructFields

// decodeMessage decodes line as jsonrpc.DecodeMessage does: the same
// decoder with the same flags, the same nesting bound, the same checks, the
// same message. It spares what DecodeMessage's decoding allocates for each
// message, and again for its method: a 32 KiB buffer, zeroed, that the
// decoder reads the bytes it already has into (a tenth of a stdio call's
// CPU, with the collection it brings). TestDecodeMessageAsSDK holds the two
// to the same results.
func decodeMessage(line []byte) (jsonrpc.Message, error) {
	if jsondepth.Of(line) > maxDepth {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: json: exceeded maximum nesting depth of %d", maxDepth)
	}
	var w wireMessage
	if _, err := segjson.Parse(line, &w, decodeFlags); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.VersionTag != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", w.VersionTag, "2.0")
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if len(w.Method) > 0 {
		var method string
		if _, err := segjson.Parse(w.Method, &method, decodeFlags); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("invalid request")
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		resp.Error = w.Error
	}
	return resp, nil
}

// isRequestID reports whether id, as a message holds it, is a request's: a
// string or a number.
func isRequestID(id json.RawMessage) bool {
	return len(id) > 0 && bytes.ContainsRune([]byte(`"-0123456789`), rune(id[0]))
}

// replyError writes a JSON-RPC error response to the request with the id
// (null when it has none).
func (c *lineConn) replyError(id json.RawMessage, code int64, message string) {
	b, _ := json.Marshal(rpcErrorResponse(id, code, message))
	_ = c.write(b)
}

// rpcErrorResponse is a JSON-RPC error response to the request with the id,
// null when it has none.
func rpcErrorResponse(id json.RawMessage, code int64, message string) any {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	return struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, message}}
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
