package mcpsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
	log := t.s.opts.Logger
	conn := jsonline.NewConn(outR, inW, jsonline.Options{MaxLine: MaxLine, Close: p.Close,
		Refused: func(_ *jsonline.Conn, r jsonline.Refusal) (jsonrpc.Message, error) {
			msg, err := refused(r, log)
			if err != nil {
				t.s.garbled.Store(&err)
			}
			return msg, err
		}})
	return heard{Connection: conn, s: t.s}, nil
}

// refused is what stands for a line of the server's that is no message. A
// line over MaxLine is read through (its members noted, its bytes not
// kept) and stands for the error response to the request it answers, or,
// when it is a request or a notification or has no id, for nothing (it is
// logged). Any other ends the connection, as the SDK's transport would: the
// server speaks something other than MCP.
func refused(r jsonline.Refusal, log hclog.Logger) (jsonrpc.Message, error) {
	if r.Size == 0 {
		return nil, fmt.Errorf("the server wrote a line that is not a JSON-RPC message (%s): %.100q", r.Error.Message, r.Line)
	}
	why := fmt.Sprintf("the server's message is %d bytes, over the %d-byte (%d MiB) bound of a line from a stdio server", r.Size, MaxLine, MaxLine>>20)
	id, ok := jsonline.RequestID(r.ID)
	if r.Method || r.ID == nil || !ok {
		log.Warn("a message of the server was dropped", "why", why, "request_or_notification", r.Method)
		return nil, nil
	}
	log.Warn("the answer to a request was refused", "why", why, "id", string(r.ID))
	return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: codeTooLong, Message: why}}, nil
}

// pipes are a started server's stdin and stdout.
type pipes struct {
	in, out   *os.File
	cmd       *exec.Cmd
	terminate time.Duration
}

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
