package sdk

import (
	"io"
	"sync"

	"github.com/toolhost/toolhost"
)

// Stdout is the call's stdout, for output that comes in pieces, such as a
// command's. What is written goes to the host as it comes, when the host
// takes it so (a tool that keeps its output's end, [KeepTail], called by a
// host of protocol minor 6 or later): the host keeps what its limits need
// and saves the rest, so that the output is never held whole. Otherwise
// the last 8 MiB written are kept and put before the Result's own Stdout.
// A write never fails, so that a command writing to it never sees a broken
// pipe. Of a Request the SDK did not make (a test's), it discards.
func (r *Request[In]) Stdout() io.Writer { return outputWriter{r.output, false} }

// Stderr is the call's stderr, as [Request.Stdout] is its stdout.
func (r *Request[In]) Stderr() io.Writer { return outputWriter{r.output, true} }

// maxKeptOutput bounds what a call keeps of each of its stdout and stderr
// when the host does not take them as they come: their last bytes.
const maxKeptOutput = 8 << 20

// callOutput is the stdout and stderr of one call: passed to the host's
// Output one write at a time, or kept.
type callOutput struct {
	to   toolhost.Output // nil: kept
	mu   sync.Mutex
	kept [2]tailBuffer // stdout, stderr
}

// outputWriter writes to one of a call's streams.
type outputWriter struct {
	o      *callOutput
	stderr bool
}

func (w outputWriter) Write(p []byte) (int, error) {
	o := w.o
	if o == nil { // a Request the SDK did not make: a test's
		return len(p), nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.to != nil:
		_ = o.to(w.stderr, p) // a host that takes no more ends the call
	case w.stderr:
		o.kept[1].write(p)
	default:
		o.kept[0].write(p)
	}
	return len(p), nil
}

// into puts what was kept before res's own output.
func (o *callOutput) into(res *Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.kept[0].buf != nil {
		res.Stdout = o.kept[0].String() + res.Stdout
	}
	if o.kept[1].buf != nil {
		res.Stderr = o.kept[1].String() + res.Stderr
	}
	if o.kept[0].dropped || o.kept[1].dropped {
		res.TruncatedBytes = true
	}
}

// tailBuffer keeps the last maxKeptOutput bytes written to it: a ring once
// full.
type tailBuffer struct {
	buf     []byte
	next    int // where the oldest byte is, once buf is full
	dropped bool
}

func (t *tailBuffer) write(p []byte) {
	if room := maxKeptOutput - len(t.buf); room > 0 {
		n := min(room, len(p))
		if len(t.buf)+n > cap(t.buf) {
			grown := make([]byte, len(t.buf), min(maxKeptOutput, max(2*cap(t.buf), len(t.buf)+n, 4096)))
			copy(grown, t.buf)
			t.buf = grown
		}
		t.buf, p = append(t.buf, p[:n]...), p[n:]
	}
	if len(p) == 0 {
		return
	}
	t.dropped = true
	if len(p) >= len(t.buf) {
		copy(t.buf, p[len(p)-len(t.buf):])
		t.next = 0
		return
	}
	n := copy(t.buf[t.next:], p)
	copy(t.buf, p[n:])
	t.next = (t.next + len(p)) % len(t.buf)
}

// String is what was kept, oldest first.
func (t *tailBuffer) String() string { return string(t.buf[t.next:]) + string(t.buf[:t.next]) }
