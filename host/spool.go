package host

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/redact"
	"github.com/toolhost/toolhost/store"
)

// A tool that keeps its output's end (toolhost.ToolSpec.OutputTail: a
// command) may write far more than a result holds: a gigabyte of `yes`.
// The host takes such output as it is written (toolhost.Output) into a
// spool, which keeps of each of stdout and stderr the end the result's
// limits need, in memory, and the last maxSavedStream bytes in a file, for
// the saved output. So a call holds its limits and spoolMargin in memory
// whatever it writes and whatever runs beside it; a cut output is read back
// for saving one call at a time in the process (saving).

const (
	// maxSavedStream bounds what a saved output keeps of each of stdout and
	// stderr: their end.
	maxSavedStream = 8 << 20
	// spoolMargin is kept in memory beyond the byte limit, so that a secret
	// across the cut is redacted whole before the result is cut.
	spoolMargin = 64 << 10
)

// saving admits one call at a time to read a spooled output back, redact
// and save it: what a cut output costs in memory beyond its limits.
var saving = make(chan struct{}, 1)

// spool is a call's output taken as it is written.
type spool struct {
	dir     string // the outputs directory, where its files go
	keep    int    // bytes of each stream's end kept in memory
	mu      sync.Mutex
	closed  bool
	streams [2]spoolStream // stdout, stderr
}

// spoolStream is one stream of a spool: its end in memory, and in a file
// once it has passed keep (unless keep holds what a saved output would).
type spoolStream struct {
	mem     output.Tail
	size    int64    // bytes written in all
	file    *os.File // a ring of maxSavedStream bytes
	written int64    // bytes written to the file in all
	err     error    // the file could not be written: the saved output is not kept
}

// newSpool returns a spool for a result that keeps limit bytes of each
// stream (0: no limit): it keeps their end in memory, spoolMargin more than
// limit, and at most maxSavedStream.
func newSpool(dir string, limit int) *spool {
	keep := maxSavedStream
	if limit > 0 {
		keep = min(limit+spoolMargin, maxSavedStream)
	}
	return &spool{dir: dir, keep: keep}
}

// write takes a piece of output (a toolhost.Output).
func (s *spool) write(stderr bool, p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errSpoolClosed
	}
	st := &s.streams[0]
	if stderr {
		st = &s.streams[1]
	}
	if st.file == nil && st.err == nil && s.keep < maxSavedStream && st.size+int64(len(p)) > int64(s.keep) {
		// Past what memory keeps: from here on the file keeps the end.
		if st.err = os.MkdirAll(s.dir, store.DirMode); st.err == nil {
			st.file, st.err = os.CreateTemp(s.dir, tmpPrefix+"spool-*") // store.FileMode (0600)
		}
		if st.err == nil {
			st.err = st.toFile([]byte(st.mem.String()))
		}
	}
	if st.file != nil && st.err == nil {
		st.err = st.toFile(p)
	}
	st.mem.Write(p, s.keep)
	st.size += int64(len(p))
	return nil
}

var errSpoolClosed = errors.New("host: the call has ended")

// toFile writes p at the end of the file's ring.
func (st *spoolStream) toFile(p []byte) error {
	if len(p) > maxSavedStream {
		st.written += int64(len(p) - maxSavedStream)
		p = p[len(p)-maxSavedStream:]
	}
	for len(p) > 0 {
		at := st.written % maxSavedStream
		n := min(len(p), int(maxSavedStream-at))
		if _, err := st.file.WriteAt(p[:n], at); err != nil {
			return err
		}
		st.written += int64(n)
		p = p[n:]
	}
	return nil
}

// text returns the end of stdout and of stderr kept in memory, and whether
// either lost its beginning (is cut already).
func (s *spool) text() (stdout, stderr string, cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, e := &s.streams[0], &s.streams[1]
	return o.mem.String(), e.mem.String(), o.size > int64(s.keep) || e.size > int64(s.keep)
}

// saved returns the output a saved output keeps, redacted: the end of
// stdout, then of stderr after a separator, each at most maxSavedStream
// bytes, as [call.saveFullOutput] writes it; or why it cannot.
func (s *spool) saved() (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	b.Grow(s.streams[0].savedSize() + len("\n--- stderr ---\n") + s.streams[1].savedSize())
	for i := range s.streams {
		st := &s.streams[i]
		if st.err != nil {
			return "", false, st.err
		}
		if i == 1 && st.size > 0 {
			b.WriteString("\n--- stderr ---\n")
		}
		if st.file == nil {
			b.WriteString(st.mem.String())
			continue
		}
		at := st.written % maxSavedStream
		if st.written >= maxSavedStream { // full: the oldest bytes are from at on
			if _, err := io.Copy(&b, io.NewSectionReader(st.file, at, maxSavedStream-at)); err != nil {
				return "", false, err
			}
		}
		if _, err := io.Copy(&b, io.NewSectionReader(st.file, 0, at)); err != nil {
			return "", false, err
		}
	}
	data, changed := redact.String(b.String())
	return data, changed, nil
}

// savedSize is the size of what a saved output keeps of the stream.
func (st *spoolStream) savedSize() int {
	if st.file == nil {
		return st.mem.Len()
	}
	return int(min(st.written, maxSavedStream))
}

// close removes the spool's files; a write after it fails.
func (s *spool) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for i := range s.streams {
		if f := s.streams[i].file; f != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}
}

// saveSpooled keeps a spooled output that was cut, as saveFullOutput does a
// whole one.
func (c *call) saveSpooled(ctx context.Context) (path, notKept string) {
	select {
	case saving <- struct{}{}:
	case <-ctx.Done():
		return "", "not written: " + ctx.Err().Error()
	}
	defer func() { <-saving }()
	data, changed, err := c.spool.saved()
	if err != nil {
		return "", "not written: " + err.Error()
	}
	c.redacted = c.redacted || changed
	return c.keepOutput(ctx, data)
}
