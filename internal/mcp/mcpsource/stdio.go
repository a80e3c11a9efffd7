package mcpsource

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/jsonline"
)

// MaxLine bounds a line (one JSON-RPC message) from a stdio server, as the
// SDK's own transport does. A longer line fails the request it answers,
// with an error naming its size, and nothing else: the SDK would end the
// connection, failing every call in flight and restarting the server (a
// caller asking for a big file could do it again and again, until the
// restarts ran out). A longer request or notification from the server is
// dropped, and logged.
const MaxLine = mcp.DefaultMaxLineLength

// codeTooLong is the JSON-RPC error code of the answer the module makes up
// for a response over MaxLine, which protocolFailure leaves out: the call
// fails with tool_exec, not as a protocol error of the server's. It is the
// last of JSON-RPC's implementation-defined server errors, which MCP does
// not use.
const codeTooLong = -32099

// stdio is the transport of a stdio server. It starts s.cmd with pipes of
// its own (os.Pipe: reaping the process closes neither, so the server's
// last lines are read whatever the order), watches the process (its exit
// ends the session at once; the SDK would notice only when its next write
// failed), and bounds the lines it reads (lines).
type stdio struct {
	s *Server
	// terminate is how long Close waits for the process to exit after
	// closing its stdin, and then after SIGTERM, before SIGKILL.
	terminate time.Duration
}

func (t stdio) Connect(context.Context) (mcp.Connection, error) {
	cmd := t.s.cmd
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	go t.s.watchProcess(cmd.Process.Pid)
	p := &pipes{in: inW, out: outR, cmd: cmd, terminate: t.terminate}
	// The SDK's bound, twice ours, is only for a message spread over
	// several lines, which no MCP server writes.
	conn, err := (&mcp.IOTransport{Reader: newLines(p, MaxLine, t.s.opts.Logger), Writer: p, MaxLineLength: 2 * MaxLine}).Connect(context.Background())
	if err != nil {
		p.Close()
		return nil, err
	}
	return heard{Connection: conn, s: t.s}, nil
}

// pipes are a started server's stdin and stdout.
type pipes struct {
	in, out   *os.File
	cmd       *exec.Cmd
	terminate time.Duration
}

func (p *pipes) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *pipes) Write(b []byte) (int, error) { return p.in.Write(b) }

// Close closes the server's stdin, which asks it to exit (MCP's stdio
// shutdown), waits for it, SIGTERM then SIGKILL after terminate each, reaps
// it (its exit status stays in the exec.Cmd), and then closes its stdout.
func (p *pipes) Close() error {
	err := p.in.Close()
	exited := make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(exited)
	}()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-exited:
			return errors.Join(err, p.out.Close())
		case <-time.After(p.terminate):
			_ = p.cmd.Process.Signal(sig)
		}
	}
	<-exited
	return errors.Join(err, p.out.Close())
}

// lines hands the SDK the server's stdout line by line, each no longer than
// max: a longer one is read through (its members noted, its bytes not
// kept) and stands for the error response to the request it answers, or,
// when it is a request or a notification or has no id, for nothing (it is
// logged).
type lines struct {
	rd      *jsonline.Reader
	max     int
	log     hclog.Logger
	pending []byte // what is left to hand over of the current line
	err     error  // the error that ended reading, once pending is handed over
}

func newLines(p *pipes, max int, log hclog.Logger) *lines {
	return &lines{rd: jsonline.NewReader(bufio.NewReaderSize(p, 64<<10), max), max: max, log: log}
}

// Close does nothing: pipes.Close closes the server's stdout once the
// process is reaped (the SDK closes its reader first).
func (l *lines) Close() error { return nil }

func (l *lines) Read(b []byte) (int, error) {
	for len(l.pending) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		l.pending, l.err = l.next()
	}
	n := copy(b, l.pending)
	l.pending = l.pending[n:]
	return n, nil
}

// next returns the next line, its newline included, or what stands for a
// line too long: the error response to the request it answers, or, when
// it is a request or a notification or has no id, nothing (it is logged).
func (l *lines) next() ([]byte, error) {
	var m jsonline.Members
	line, size, err := l.rd.Next(func(b []byte) { _, _ = m.Write(b) })
	if size == 0 {
		return line, err
	}
	why := fmt.Sprintf("the server's message is %d bytes, over the %d-byte (%d MiB) bound of a line from a stdio server", size, l.max, l.max>>20)
	id := m.ID()
	if m.HasMethod() || id == nil {
		l.log.Warn("a message of the server was dropped", "why", why, "request_or_notification", m.HasMethod())
		return nil, err
	}
	l.log.Warn("the answer to a request was refused", "why", why, "id", string(id))
	msg, _ := json.Marshal(why)
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`+"\n", id, codeTooLong, msg), err
}
