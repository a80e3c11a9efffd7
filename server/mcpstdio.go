package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over stdio the SDK's transport ends the connection at the first line it
// cannot decode: a stray line from a client ended `toolhost mcp`. The
// lines filter stands in front of it: each line that is not a JSON-RPC
// message (or batch of them) is answered with the error JSON-RPC names for
// it, -32700 for a line that is not JSON and -32600 for JSON that is not a
// message or a line longer than the limit, and dropped; the SDK reads the
// others, and the connection goes on.

// filteredLines returns a transport over in and out whose lines the filter
// checks first; maxLine bounds a line (0: mcp.DefaultMaxLineLength). The
// filter and the SDK write whole messages to out under one lock; closing
// the transport closes in, and out with closeOut unless it is nil.
func filteredLines(in io.ReadCloser, out io.Writer, closeOut func() error, maxLine int) *mcp.IOTransport {
	if maxLine <= 0 {
		maxLine = mcp.DefaultMaxLineLength
	}
	w := &lockedWriter{w: out, close: closeOut}
	pr, pw := io.Pipe()
	go filterLines(bufio.NewReaderSize(in, 64<<10), pw, w, maxLine)
	return &mcp.IOTransport{Reader: readBoth{pr, in}, Writer: w, MaxLineLength: -1}
}

// filterLines copies the JSON-RPC lines of in to sdk and answers the others
// on out, until in ends (sdk is then closed with in's error) or sdk stops
// reading.
func filterLines(in *bufio.Reader, sdk *io.PipeWriter, out io.Writer, maxLine int) {
	var line []byte
	for {
		chunk, err := in.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull) || (err == nil && len(line)+len(chunk) > maxLine):
			if len(line)+len(chunk) <= maxLine {
				line = append(line, chunk...)
				continue
			}
			line = line[:0]
			if errors.Is(err, bufio.ErrBufferFull) {
				err = skipLine(in)
			}
			reply(out, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("a message longer than %d bytes is refused", maxLine))
		case len(chunk) > 0:
			line = append(line, chunk...)
			if msg := bytes.TrimSpace(line); len(msg) > 0 {
				if id, code, why := checkLine(msg); code != 0 {
					reply(out, id, code, why)
				} else if _, werr := sdk.Write(append(msg, '\n')); werr != nil {
					return
				}
			}
			line = line[:0]
		}
		if err != nil {
			_ = sdk.CloseWithError(err)
			return
		}
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

// checkLine returns 0 when msg is a JSON-RPC message or a batch of them,
// else the error code for it, why, and the id of the request it may be. A
// message is decoded once; a line that fails is looked at again to say
// why.
func checkLine(msg []byte) (id json.RawMessage, code int64, why string) {
	if msg[0] != '[' {
		return checkMessage(msg, true)
	}
	var msgs []json.RawMessage
	if json.Unmarshal(msg, &msgs) != nil {
		return checkMessage(msg, false)
	}
	if len(msgs) == 0 {
		return nil, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch"
	}
	for _, m := range msgs {
		if _, code, why := checkMessage(m, false); code != 0 {
			return nil, code, why
		}
	}
	return nil, 0, ""
}

// checkMessage checks one message; single says it is the line's only
// one, whose id an error answers.
func checkMessage(m []byte, single bool) (id json.RawMessage, code int64, why string) {
	decoded, err := jsonrpc.DecodeMessage(m)
	if r, ok := decoded.(*jsonrpc.Response); ok && err == nil && r.Result == nil && r.Error == nil {
		err = errors.New("neither a request, a notification nor a response")
	}
	if err == nil {
		return nil, 0, ""
	}
	if !json.Valid(m) {
		return nil, jsonrpc.CodeParseError, "parse error: the line is not JSON"
	}
	var r struct {
		ID json.RawMessage `json:"id"`
	}
	if single && json.Unmarshal(m, &r) == nil && isRequestID(r.ID) {
		id = r.ID
	}
	return id, jsonrpc.CodeInvalidRequest, "invalid request: " + err.Error()
}

// isRequestID reports whether id, as a message holds it, is a request's: a
// string or a number.
func isRequestID(id json.RawMessage) bool {
	return len(id) > 0 && bytes.ContainsRune([]byte(`"-0123456789`), rune(id[0]))
}

// reply writes a JSON-RPC error response to the request with the id (null
// when it has none) as one line.
func reply(out io.Writer, id json.RawMessage, code int64, message string) {
	b, _ := json.Marshal(rpcErrorResponse(id, code, message))
	_, _ = out.Write(append(b, '\n'))
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

// lockedWriter writes each message whole, however many goroutines write.
type lockedWriter struct {
	mu    sync.Mutex
	w     io.Writer
	close func() error // nil: Close leaves w open
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error {
	if l.close == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.close()
}

// readBoth reads from the pipe the filtered lines go through, and closes the
// stream they come from with it.
type readBoth struct {
	io.ReadCloser
	in io.Closer
}

func (r readBoth) Close() error { return errors.Join(r.ReadCloser.Close(), r.in.Close()) }
