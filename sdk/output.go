package sdk

import (
	"io"
	"sync"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/output"
)

// Stdout is the call's stdout, for output that comes in pieces, such as a
// command's. What is written goes to the host as it comes, when the host
// takes it so (a tool that keeps its output's end, [KeepTail], called by a
// host of protocol minor 6 or later): the host keeps what its limits need
// and saves the rest, so that the output is never held whole. Otherwise
// the last 8 MiB written are kept and put before the [Result]'s own Stdout.
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
	kept [2]output.Tail // stdout, stderr
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
		o.kept[1].Write(p, maxKeptOutput)
	default:
		o.kept[0].Write(p, maxKeptOutput)
	}
	return len(p), nil
}

// into puts what was kept before res's own output.
func (o *callOutput) into(res *Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.kept[0].Len() > 0 {
		res.Stdout = o.kept[0].String() + res.Stdout
	}
	if o.kept[1].Len() > 0 {
		res.Stderr = o.kept[1].String() + res.Stderr
	}
	if o.kept[0].Dropped || o.kept[1].Dropped {
		res.TruncatedBytes = true
	}
}
