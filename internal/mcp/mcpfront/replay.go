package mcpfront

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resumable streams of the session era. The SDK's session handler keeps
// what it sends on each SSE stream in the front's replayStore, from
// protocol 2025-11-25 on (the stateless era has no resumable streams), and
// begins each POST's stream with a priming event (an id, no data); the
// front puts a retry field (sseRetry) before the first event of every
// stream, and sends the priming event with the stream's next one when that
// comes soon (sseWriter). A client whose stream breaks comes back with a GET
// and Last-Event-ID, and gets what it missed. The store is bounded for the
// whole front: replayBytes of messages and replayStreams streams, the
// oldest stream dropped first whole; a stream dropped can no longer be
// resumed (the SDK answers 400), and one that goes on after it was dropped
// is not kept again.

const (
	// replayBytes bounds the messages the front keeps for replays.
	replayBytes = 8 << 20
	// replayStreams bounds the streams it keeps them for.
	replayStreams = 4096
	// sseRetry is the retry field of the front's SSE streams: how long a
	// client waits before it reconnects.
	sseRetry = time.Second
)

// replayStore is the front's [mcp.EventStore]: the messages of the latest
// streams, bounded (replayBytes, replayStreams).
type replayStore struct {
	maxBytes, maxStreams int

	mu      sync.Mutex
	bytes   int
	order   *list.List                          // *replayStream, oldest first
	streams map[string]map[string]*replayStream // session → stream id → stream
}

// replayStream is the messages of one stream, from its first; dropped when
// the bounds took them.
type replayStream struct {
	session, id string
	data        [][]byte
	bytes       int
	dropped     bool
	elem        *list.Element
}

// newReplayStore returns an empty store with the bounds.
func newReplayStore(maxBytes, maxStreams int) *replayStore {
	return &replayStore{maxBytes: maxBytes, maxStreams: maxStreams, order: list.New(), streams: map[string]map[string]*replayStream{}}
}

// Open implements [mcp.EventStore]: a stream begins.
func (s *replayStore) Open(_ context.Context, session, stream string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamLocked(session, stream)
	return nil
}

// streamLocked returns the stream, made (and the oldest dropped past the
// bounds) when it is new. s.mu is held.
func (s *replayStore) streamLocked(session, stream string) *replayStream {
	if st := s.streams[session][stream]; st != nil {
		return st
	}
	st := &replayStream{session: session, id: stream}
	if s.streams[session] == nil {
		s.streams[session] = map[string]*replayStream{}
	}
	s.streams[session][stream] = st
	st.elem = s.order.PushBack(st)
	s.trimLocked()
	return st
}

// errDropped is Append's error for a stream the bounds dropped: its
// message is not kept (the SDK then counts it delivered only when it
// reached the client).
var errDropped = errors.New("mcp: the stream's messages are no longer kept")

// Append implements [mcp.EventStore]: a message sent on a stream. A
// stream the bounds dropped comes back as dropped, so its numbering is
// never taken for another's.
func (s *replayStore) Append(_ context.Context, session, stream string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[session][stream]
	if st == nil {
		st = s.streamLocked(session, stream)
		st.dropped = true
	}
	if st.dropped {
		return errDropped
	}
	st.data = append(st.data, data)
	st.bytes += len(data)
	s.bytes += len(data)
	s.trimLocked()
	return nil
}

// trimLocked drops the oldest streams while the store is past a bound.
// s.mu is held.
func (s *replayStore) trimLocked() {
	for s.bytes > s.maxBytes || s.order.Len() > s.maxStreams {
		s.removeLocked(s.order.Front().Value.(*replayStream))
	}
}

// removeLocked forgets a stream. s.mu is held.
func (s *replayStore) removeLocked(st *replayStream) {
	s.order.Remove(st.elem)
	s.bytes -= st.bytes
	if m := s.streams[st.session]; m[st.id] == st {
		delete(m, st.id)
		if len(m) == 0 {
			delete(s.streams, st.session)
		}
	}
}

// After implements [mcp.EventStore]: the messages of a stream after the
// index, or an error when they are not all kept.
func (s *replayStore) After(_ context.Context, session, stream string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	st := s.streams[session][stream]
	var data [][]byte
	var err error
	switch {
	case st == nil || st.dropped:
		err = fmt.Errorf("mcp: the messages of stream %q are no longer kept: %w", stream, mcp.ErrEventsPurged)
	case index+1 < len(st.data):
		data = st.data[index+1:]
	}
	s.mu.Unlock()
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range data {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed implements [mcp.EventStore]: the session's streams are
// forgotten.
func (s *replayStore) SessionClosed(_ context.Context, session string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.streams[session] {
		s.removeLocked(st)
	}
	return nil
}

// retryField is the SSE retry field of sseRetry, alone in its block: it
// sets the client's reconnection time and is no event.
var retryField = fmt.Sprintf("retry: %d\n\n", sseRetry.Milliseconds())

// primeAfter is how long an event stream's priming event waits for the
// stream's next event, to leave in one write with it: a call answered at
// once costs no packet more than without it.
const primeAfter = 10 * time.Millisecond

// sseWriter passes a response on; an event stream's first bytes come after
// retryField, and a priming event that opens it is held until the stream's
// next event, primeAfter, or the response's end, whichever comes first.
type sseWriter struct {
	http.ResponseWriter

	mu    sync.Mutex // the SDK writes from the goroutine that answers, its timer from another
	begun bool
	held  []byte // retryField and the priming event, not written yet
	timer *time.Timer
	ended bool
}

func (w *sseWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	prefix := w.held
	if !w.begun {
		w.begun = true
		if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			return w.ResponseWriter.Write(p)
		}
		prefix = []byte(retryField)
		if priming(p) {
			w.held = append(prefix, p...)
			w.timer = time.AfterFunc(primeAfter, w.release)
			return len(p), nil
		}
	}
	if len(prefix) == 0 {
		return w.ResponseWriter.Write(p)
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.held = nil
	n, err := w.ResponseWriter.Write(append(prefix, p...))
	return max(n-len(prefix), 0), err
}

// priming reports whether an event is a priming event: an id, no data.
func priming(event []byte) bool {
	return bytes.Contains(event, []byte("id: ")) && bytes.HasSuffix(event, []byte("\ndata: \n\n"))
}

// Flush flushes the response, unless a priming event is held.
func (w *sseWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held == nil {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// release writes a held priming event, when primeAfter has passed.
func (w *sseWriter) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held != nil && !w.ended {
		_, _ = w.ResponseWriter.Write(w.held)
		w.held = nil
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// end writes a held priming event before the handler returns; nothing is
// written after.
func (w *sseWriter) end() {
	w.release()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

// Unwrap returns the response writer it wraps, for http.ResponseController.
func (w *sseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
