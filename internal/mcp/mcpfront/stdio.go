package mcpfront

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/jsonline"
)

// Over stdio the SDK's transport ends the connection at the first line it
// cannot decode: a stray line from a client ended `toolhost mcp`. Ours
// (jsonline.Conn) does not: each line that is not a JSON-RPC message is
// answered with the error JSON-RPC names for it, -32700 for a line that is
// not JSON and -32600 for JSON that is not a message, a batch, or a line
// longer than the limit (to the request's id when the line is one), and
// skipped; the connection goes on.

// newLineTransport returns a transport of newline-delimited JSON-RPC over in
// and out; maxLine bounds a line (0: mcp.DefaultMaxLineLength; < 0: no
// bound). Closing its connection closes in, and out with closeOut unless
// it is nil.
func newLineTransport(in io.ReadCloser, out io.Writer, closeOut func() error, maxLine int) mcp.Transport {
	return &lineTransport{in: in, out: out, closeOut: closeOut, maxLine: maxLine}
}

// lineTransport is a transport of newline-delimited JSON-RPC; its one
// connection is a jsonline.Conn, which reads ahead when closing in may not
// end a read.
type lineTransport struct {
	in       io.ReadCloser
	out      io.Writer
	closeOut func() error
	maxLine  int
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	return jsonline.NewConn(t.in, t.out, jsonline.Options{
		MaxLine:   t.maxLine,
		ReadAhead: !closeEndsRead(t.in),
		Close: func() error {
			err := t.in.Close()
			if t.closeOut != nil {
				err = errors.Join(err, t.closeOut())
			}
			return err
		},
	}), nil
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
