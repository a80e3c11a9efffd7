package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The event types.
const (
	EventCallStarted       = "tool_call.started"   // a tool call was accepted and is about to run
	EventCallProgress      = "tool_call.progress"  // a running tool call reported progress
	EventCallInput         = "tool_call.input"     // a running tool call's module asked its client (sampling, elicitation, roots): the method and the answer's outcome, under the call
	EventCallCompleted     = "tool_call.completed" // a tool call returned a result (ok or not)
	EventCallFailed        = "tool_call.failed"    // a tool call ended in an error
	EventGroupRegistered   = "group.registered"    // a tool group was registered
	EventGroupUnregistered = "group.unregistered"  // a tool group was removed
	EventPluginExited      = "plugin.exited"       // a plugin process exited
	EventPluginRestarted   = "plugin.restarted"    // a plugin process was started again
	EventPluginRefused     = "plugin.refused"      // a plugin was refused for good: it stays down, the payload says why
	EventTokenCreated      = "token.created"       // a role token was made
	EventTokenRevoked      = "token.revoked"       // a role token was revoked
	EventStorageEvicted    = "storage.evicted"     // a quota evicted a saved output or an artifact: its kind, key, role, size and quota
)

// Event is one audit record.
type Event struct {
	// ID is set by the store: events are numbered in the order written.
	ID int64 `json:"id"`
	// Time is when the event happened; [EventWriter.Emit] sets it to the
	// current time when zero. Events read back have it in UTC.
	Time time.Time `json:"time"`
	// Type is one of the Event* constants (or another dotted name).
	Type string `json:"type"`
	// CallID is the tool call's id, for tool_call.* events.
	CallID string `json:"callId,omitempty"`
	// AgentID is the calling agent.
	AgentID string `json:"agentId,omitempty"`
	// Role is the calling agent's role.
	Role string `json:"role,omitempty"`
	// Tool is the called tool's name.
	Tool string `json:"tool,omitempty"`
	// Group is the tool group's id.
	Group string `json:"group,omitempty"`
	// ParentID is the id of the event or call this one belongs under.
	ParentID string `json:"parentId,omitempty"`
	// Payload holds the details, stored as a JSON object: once emitted it
	// belongs to the writer and must not be modified. Numbers read back are
	// float64, as with encoding/json.
	Payload map[string]any `json:"payload,omitempty"`
}

// WriterOptions tune an [EventWriter]; the zero value (or nil) gives the
// defaults.
type WriterOptions struct {
	// QueueSize is how many events may wait to be written (0: 65536).
	// [EventWriter.Emit] blocks while that many are waiting.
	QueueSize int
	// OnError is called, from the writer's goroutine, with the error of a
	// batch that could not be written after a few attempts and was dropped.
	// The writer waits for it, so it must not call [EventWriter.Emit] or
	// [EventWriter.Flush]. Nil: such errors are only reported by Flush and
	// Close.
	OnError func(error)
	// Urgent says that calls wait for the writer ([EventWriter.Flush] on their
	// path, as strict audit does): its thread then keeps the process's
	// priority instead of starting at nice 19, where a busy machine would
	// stall those calls until the writer was found starved.
	Urgent bool

	// The batching, tuned by the store's own tests only.
	//
	// maxBatch is the most events written in one transaction (0: 1024).
	maxBatch int
	// linger is how long the writer waits for more events when fewer than
	// maxBatch/4 are queued, so that a steady trickle is written in a few
	// large transactions rather than many small ones (0: 2ms; negative: no
	// wait). [EventWriter.Emit] never waits for it; [EventWriter.Flush] may,
	// once. (Longer lingers cost less CPU per event but make each commit
	// longer, which the p99 of the calls pays for: see docs/BENCHMARKS.md.)
	linger time.Duration
}

// writeAttempts is how many times a batch is tried before it is dropped;
// retryDelay is the wait before the second attempt, doubled for each next.
// A batch that fails because the database is unavailable (PostgreSQL
// stopped or unreachable) or its disk is full is not dropped: it is tried
// again, every outageRetry at most, until the database is back (or has
// room), or until closeGrace has passed since [EventWriter.Close]: one grace
// for all the batches left, so that a host closing through an outage
// stops within it.
const (
	writeAttempts = 3
	retryDelay    = 10 * time.Millisecond
	outageRetry   = time.Second
	closeGrace    = 5 * time.Second
)

// EventWriter is the one writer of events: [EventWriter.Emit] only enqueues
// (it never waits for a disk write or fsync unless the queue is full, which
// applies backpressure instead of losing events); a goroutine writes batches,
// each batch in one transaction, as soon as events are waiting (no fixed
// delay: take what is queued, up to maxBatch, write, repeat).
type EventWriter struct {
	store *Store
	opts  WriterOptions

	mu    sync.Mutex
	ready sync.Cond // the queue is no longer empty, or the writer closed
	space sync.Cond // events were written, so the queue may have room
	// queue holds the events emitted and not yet taken by the goroutine, in
	// chunks of at most maxBatch, each written as a batch; Emit appends to
	// the last. free keeps a few written chunks for reuse.
	queue, free [][]Event
	closed      bool
	closedAt    time.Time // when Close was called: the grace of every batch left counts from it
	// emitted counts the events accepted by Emit and finished the events
	// written or dropped after failing; their difference is the queue's fill,
	// waiting or being written. lost counts the dropped ones, lastErr says why.
	emitted, finished, lost int64
	lastErr                 error
	// down is set while the database is unavailable or its disk full (then
	// full is set too): Emit drops an event rather than wait for room in a
	// full queue (calls go on), and counts it in lost, overflow and spilled;
	// the writer reports overflow once the database is back.
	down     bool
	full     bool
	overflow int64
	spilled  int64
	progress chan struct{}     // closed when finished advances; nil until Flush waits
	stopped  chan struct{}     // closed when the goroutines are done
	stmts    map[int]*sql.Stmt // the goroutine's INSERTs (SQLite), by rows
	buf      batchBuf          // the goroutine's, to encode batches in
	prio     threadPriority    // the priority of the goroutines' threads

	written atomic.Int64
	dropped atomic.Int64
}

// NewEventWriter starts a writer of events into s; opts may be nil. Close
// the writer ([EventWriter.Close]) before the store.
func (s *Store) NewEventWriter(opts *WriterOptions) *EventWriter {
	w := &EventWriter{store: s, stopped: make(chan struct{}), stmts: map[int]*sql.Stmt{}}
	if opts != nil {
		w.opts = *opts
	}
	if w.opts.QueueSize <= 0 {
		w.opts.QueueSize = 65536
	}
	if w.opts.maxBatch <= 0 {
		w.opts.maxBatch = 1024
	}
	if w.opts.linger == 0 {
		w.opts.linger = 2 * time.Millisecond
	}
	w.ready.L, w.space.L = &w.mu, &w.mu
	w.prio.origin = time.Now()
	go w.run()
	return w
}

// Emit queues e to be written. It is safe for concurrent use and returns
// without waiting for the disk unless QueueSize events are already waiting.
// After [EventWriter.Close] (or when Close is called while it waits for room), Emit drops
// the event and counts it in [EventWriter.Dropped].
func (w *EventWriter) Emit(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	w.mu.Lock()
	for !w.closed && w.emitted-w.finished >= int64(w.opts.QueueSize) {
		if w.down {
			w.lost++
			w.overflow++
			w.spilled++
			w.mu.Unlock()
			return
		}
		w.space.Wait()
	}
	if w.closed {
		w.mu.Unlock()
		w.dropped.Add(1)
		return
	}
	if len(w.queue) == 0 {
		w.ready.Signal() // the goroutine wakes once w.mu is released
	}
	if n := len(w.queue); n == 0 || len(w.queue[n-1]) == w.opts.maxBatch {
		w.queue = append(w.queue, w.newChunk())
	}
	last := &w.queue[len(w.queue)-1]
	*last = append(*last, e)
	w.emitted++
	w.mu.Unlock()
}

// newChunk returns an empty chunk for the queue. The caller holds w.mu.
func (w *EventWriter) newChunk() []Event {
	if n := len(w.free); n > 0 {
		c := w.free[n-1]
		w.free = w.free[:n-1]
		return c
	}
	return make([]Event, 0, w.opts.maxBatch)
}

// Flush returns once every event emitted before the call has been written,
// or dropped after failing to write, in which case it returns an error; it
// also returns early with ctx's error, and at once with the error of
// [EventWriter.Down] while the database is unavailable or its disk full.
func (w *EventWriter) Flush(ctx context.Context) error {
	w.mu.Lock()
	target, lost := w.emitted, w.lost
	for w.finished < target {
		if err := w.downError(); err != nil {
			w.mu.Unlock()
			return err
		}
		if w.progress == nil {
			w.progress = make(chan struct{})
		}
		progress := w.progress
		w.mu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		}
		w.mu.Lock()
	}
	defer w.mu.Unlock()
	return w.lostError(w.lost - lost)
}

// Close writes what is queued and stops the writer's goroutine. It returns an
// error if any events could not be written during the writer's life. Calling
// it again does nothing more and returns the same.
func (w *EventWriter) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closedAt = time.Now()
	}
	w.closed = true
	w.ready.Signal()
	w.space.Broadcast()
	w.mu.Unlock()
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lostError(w.lost)
}

// lostError describes n events dropped after failing to write; nil when n is
// 0. The caller holds w.mu.
func (w *EventWriter) lostError(n int64) error {
	if n == 0 {
		return nil
	}
	return fmt.Errorf("store: %d events not written: %w", n, w.lastErr)
}

// Down returns nil while the writer can write, else why it cannot: an error
// wrapping [ErrDiskFull] while the database's disk is full, or
// [ErrUnavailable] while the database cannot be reached, and the last
// write's error. Events then wait in the queue, and are written once the
// database has room or is back.
func (w *EventWriter) Down() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.downError()
}

// downError is Down's error. The caller holds w.mu.
func (w *EventWriter) downError() error {
	switch {
	case !w.down:
		return nil
	case w.full:
		return fmt.Errorf("store: %w: %v", ErrDiskFull, w.lastErr)
	}
	return fmt.Errorf("store: %w: %v", ErrUnavailable, w.lastErr)
}

// Written returns how many events have been written so far.
func (w *EventWriter) Written() int64 { return w.written.Load() }

// Dropped returns how many events [EventWriter.Emit] dropped because the
// writer was closed.
func (w *EventWriter) Dropped() int64 { return w.dropped.Load() }

// Queued returns how many events are waiting to be written or being
// written: emitted and neither written nor dropped after failing yet.
func (w *EventWriter) Queued() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.emitted - w.finished
}

// failed returns how many events were lost, the sum of what
// [EventWriter.Lost] returns.
func (w *EventWriter) failed() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}

// Lost returns how many events were lost, by why: failed, those of batches
// that every attempt failed to write (each batch reported to OnError), and
// overflowed, those dropped because the queue was full while the database
// was unavailable or its disk full (reported to OnError once it is back).
func (w *EventWriter) Lost() (failed, overflowed int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost - w.spilled, w.spilled
}

// freeChunks is how many written chunks the writer keeps for reuse.
const freeChunks = 4

// run is the writer's goroutine. It keeps a thread of its own at nice 19
// (at the process's priority when Urgent) and writes batches (write) until
// closed and drained. When that thread is starved, it hands the work to a
// second goroutine, whose thread has the process's priority, until a calm
// window gives it back (threadPriority).
func (w *EventWriter) run() {
	runtime.LockOSThread()
	var low *writerThread
	if !w.opts.Urgent {
		low = w.prio.watch(true)
	}
	if low == nil { // urgent, or not watched: write at the process's priority
		w.prio.resume(nil)
		w.write(nil)
		w.finish()
		runtime.UnlockOSThread()
		return
	}
	w.prio.resume(low)
	var toNormal, toLow chan bool // true: write; false: stop
	for w.write(low) {
		if toNormal == nil {
			toNormal, toLow = make(chan bool), make(chan bool)
			go w.runNormal(toNormal, toLow)
		}
		toNormal <- true
		if !<-toLow { // closed and drained there; it has stopped
			toNormal = nil
			break
		}
		w.prio.resume(low)
	}
	if toNormal != nil {
		toNormal <- false
	}
	low.close()
	w.finish()
	endLockedThread() // a thread at nice 19 must not go back to the pool
}

// runNormal is the writer's second goroutine, on a thread at the process's
// priority: it writes while told to (work), and reports on back whether it
// stopped writing for the thread at nice 19 (true) or because the writer
// is closed and drained (false).
func (w *EventWriter) runNormal(work <-chan bool, back chan<- bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread() // its priority is the process's
	normal := w.prio.watch(false)
	defer normal.close()
	for <-work {
		w.prio.resume(normal)
		more := w.write(normal)
		back <- more
		if !more {
			return
		}
	}
}

// finish releases what the writer's goroutines held, once they are done.
func (w *EventWriter) finish() {
	for _, stmt := range w.stmts {
		_ = stmt.Close()
	}
	close(w.stopped)
}

// write takes the oldest chunk of the queue, writes it as a batch, and
// repeats until closed and drained (false) or until the work should move to
// the writer's other thread (true); th is the thread it runs on.
func (w *EventWriter) write(th *writerThread) (leave bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for len(w.queue) == 0 && !w.closed {
			w.ready.Wait()
		}
		if len(w.queue) == 0 {
			return false
		}
		if w.opts.linger > 0 && !w.closed && len(w.queue) == 1 && len(w.queue[0]) < w.opts.maxBatch/4 {
			w.mu.Unlock()
			time.Sleep(w.opts.linger)
			w.mu.Lock()
		}
		batch := w.queue[0]
		w.queue = slices.Delete(w.queue, 0, 1)
		w.mu.Unlock()
		region := trace.StartRegion(context.Background(), "store: write events") // for go tool trace; nothing when off
		err := w.writeRetrying(batch)
		region.End()
		leave := w.prio.observe(th)
		w.mu.Lock()
		w.finished += int64(len(batch))
		if err != nil {
			w.lost += int64(len(batch))
			w.lastErr = err
		}
		if w.progress != nil {
			close(w.progress)
			w.progress = nil
		}
		w.space.Broadcast()
		if len(w.free) < freeChunks {
			clear(batch) // let the payloads go
			w.free = append(w.free, batch[:0])
		}
		if leave {
			return true
		}
	}
}

// writeRetrying writes a batch, trying again after a growing delay when that
// fails; after the last attempt it reports the error to OnError and returns
// it. While the database is unavailable or its disk full it keeps trying
// (see outageRetry), with the writer marked down.
func (w *EventWriter) writeRetrying(batch []Event) error {
	var err error
	for attempt := 0; ; attempt++ {
		if err = w.insert(batch); err == nil {
			w.written.Add(int64(len(batch)))
			w.recovered()
			return nil
		}
		if full := w.store.eng.diskFull(err); full || w.store.eng.unavailable(err) {
			w.mu.Lock()
			w.down, w.full, w.lastErr = true, full, err
			closing := w.closedAt
			w.space.Broadcast() // Emits waiting for room drop their events now
			if w.progress != nil {
				close(w.progress) // and Flushes return
				w.progress = nil
			}
			w.mu.Unlock()
			if closing.IsZero() || time.Since(closing) < closeGrace {
				time.Sleep(min(retryDelay<<min(attempt, 10), outageRetry))
				continue
			}
		} else if attempt+1 < writeAttempts {
			time.Sleep(retryDelay << attempt)
			continue
		}
		break
	}
	err = fmt.Errorf("store: write %d events: %w", len(batch), err)
	if w.opts.OnError != nil {
		w.opts.OnError(err)
	}
	return err
}

// recovered clears the writer's down mark after a write, reporting the
// events lost to a full queue meanwhile.
func (w *EventWriter) recovered() {
	w.mu.Lock()
	overflow := w.overflow
	w.down, w.full, w.overflow = false, false, 0
	w.mu.Unlock()
	if overflow > 0 && w.opts.OnError != nil {
		w.opts.OnError(fmt.Errorf("store: %d events lost: the queue was full while the database was unavailable or its disk full", overflow))
	}
}

// insert writes events in one transaction: SQLite's rowsPerInsert to a
// statement (one statement per row would cost several times more in
// database/sql and the driver), prepared once by number of rows and kept
// for the writer's life; PostgreSQL's with COPY.
func (w *EventWriter) insert(events []Event) error {
	ctx := context.Background()
	if c, ok := w.store.eng.(copier); ok { // PostgreSQL
		table := w.store.copyTable(events)
		w.buf.data = w.buf.appendCopyMessages(w.buf.data[:0], events, table)
		err := c.copyEvents(ctx, w.store.sqlDB, w.buf.data)
		if table != "events" && missingTable(err) {
			w.store.days.Delete(strings.TrimPrefix(table, partitionPrefix)) // the next attempt goes to the events table
		}
		if cap(w.buf.data) > maxKeptBatch {
			w.buf.data = nil // an unusually large batch: let it go
		}
		return err
	}
	return w.store.tx(ctx, func(tx db) error {
		args := w.buf.args[:0]
		for group := range slices.Chunk(events, rowsPerInsert) {
			stmt, ok := w.stmts[len(group)]
			if !ok {
				var err error
				if stmt, err = w.store.db.prepare(ctx, insertSQL(len(group))); err != nil {
					return err
				}
				w.stmts[len(group)] = stmt
			}
			args = args[:0]
			for _, e := range group {
				args = w.buf.appendRow(args, e)
			}
			if _, err := tx.stmt(ctx, stmt).ExecContext(ctx, args...); err != nil {
				return err
			}
			runtime.Gosched() // between statements, the calls waiting for a CPU go first
		}
		clear(args)
		w.buf.args = args[:0]
		return nil
	})
}

// maxKeptBatch is the largest encoded batch whose buffer the writer keeps
// for the next.
const maxKeptBatch = 1 << 20

// copier is an engine that writes a batch of events its own way, faster
// than INSERT statements: data is the batch as appendCopyMessages encodes it.
// PostgreSQL's also makes hosts sharing a database write their batches in
// turn, so that ids follow commit order and a follower paging by id
// (Follow) never passes an id whose event is not committed yet.
type copier interface {
	copyEvents(ctx context.Context, sqlDB *sql.DB, data []byte) error
}

// rowsPerInsert is how many events one INSERT statement writes;
// eventFields is how many columns it sets per event.
const (
	rowsPerInsert = 64
	eventFields   = 11
)

// insertSQL returns an INSERT of rows events. OR FAIL spares SQLite a
// statement journal (a temporary file) for multi-row statements; no row can
// fail, and a failed batch is rolled back whole anyway.
func insertSQL(rows int) string {
	row := "(" + strings.Repeat("?, ", eventFields-1) + "?)"
	return `INSERT OR FAIL INTO events (ts, type, call_id, agent_id, role, tool, group_id, parent_id, credential, approval, payload) VALUES ` +
		strings.Repeat(row+", ", rows-1) + row
}

// EventFilter selects events; every set field must match.
type EventFilter struct {
	// Tool, Agent, Call, Role, Credential and Parent match an event's
	// [Event.Tool], [Event.AgentID], [Event.CallID], [Event.Role], the
	// credential its payload names and [Event.ParentID] exactly when set.
	Tool       string
	Agent      string
	Call       string
	Role       string
	Credential string
	Parent     string
	// Type is an exact type, or a prefix ending in "." such as "tool_call.".
	Type string
	// Outcome keeps only the terminal events of calls that ended so: one
	// of the Outcome* constants; "": any event.
	Outcome string
	// Code, with [OutcomeFailed], keeps only the failures of that error
	// code ("timeout"); "": any.
	Code string
	// Since keeps events at or after the time; zero: no lower bound.
	Since time.Time
	// Until keeps events before the time; zero: no upper bound.
	Until time.Time
	// AfterID keeps events with a greater id, for following new events.
	AfterID int64
	// BeforeID keeps events with a smaller id, for paging back through
	// history: the next older page is before the oldest id of the last.
	BeforeID int64
	// Limit is the most events returned (0: 1000): when more match, the
	// last (most recent) Limit are returned ([Store.Follow]'s pages: the
	// first (oldest) Limit).
	Limit int
	// first returns the oldest matching events when more than Limit match:
	// what Follow wants, paging forward from AfterID through a burst
	// without skipping any.
	first bool
}

// The outcomes of [EventFilter.Outcome], each a set of calls' terminal
// events, as the host writes them (host/executor.go, emitEnded).
const (
	// OutcomeOK is a call that returned an ok result: tool_call.completed.
	OutcomeOK = "ok"
	// OutcomeFailed is a call that did not: tool_call.failed, whatever
	// its code (a tool's failed result, a refusal, an error).
	OutcomeFailed = "failed"
	// OutcomeDenied is a call refused by policy: failed with code policy
	// (a rule denied it), tool_not_available (its role does not offer the
	// tool) or approval_denied (its approver said no).
	OutcomeDenied = "denied"
	// OutcomeApproved is a call its approver let run (approved, or with
	// modified arguments): a terminal event whose payload's approval has
	// the decision approve or modify; it may have failed after.
	OutcomeApproved = "approved"
	// OutcomeRateLimited is a call refused by a call limit: failed with
	// code rate_limited.
	OutcomeRateLimited = "rate_limited"
)

// Outcomes lists the outcomes an [EventFilter] takes, in the order the
// documentation gives them.
func Outcomes() []string {
	return []string{OutcomeOK, OutcomeFailed, OutcomeDenied, OutcomeApproved, OutcomeRateLimited}
}

// failedIndexed and approvedIndexed are the conditions of the partial
// indexes of the failures and of the calls that asked an approver
// (migrations/*/022), which a query names as they are written there to be
// served by them.
const (
	failedIndexed   = `type = '` + EventCallFailed + `'`
	approvedIndexed = `approval <> ''`
)

// outcomeWhere returns the condition of outcome (and code), its
// literals constant so that the statement's shape stays one of a few.
func (s *Store) outcomeWhere(outcome, code string) (string, []any, error) {
	failed := failedIndexed
	codeOf := s.eng.jsonText("payload", "code")
	switch {
	case code != "" && outcome != OutcomeFailed:
		return "", nil, fmt.Errorf("store: event filter: a code (%q) goes with outcome %q only", code, OutcomeFailed)
	case outcome == OutcomeOK:
		return `type = '` + EventCallCompleted + `'`, nil, nil
	case outcome == OutcomeFailed && code != "":
		return failed + ` AND ` + codeOf + ` = ?`, []any{code}, nil
	case outcome == OutcomeFailed:
		return failed, nil, nil
	case outcome == OutcomeDenied:
		return failed + ` AND ` + codeOf + ` IN ('policy', 'tool_not_available', 'approval_denied')`, nil, nil
	case outcome == OutcomeRateLimited:
		return failed + ` AND ` + codeOf + ` = 'rate_limited'`, nil, nil
	case outcome == OutcomeApproved:
		return approvedIndexed + ` AND approval <> 'deny'`, nil, nil
	}
	return "", nil, fmt.Errorf("store: event filter: unknown outcome %q (want one of %s)", outcome, strings.Join(Outcomes(), ", "))
}

// defaultEventLimit is the Limit of an [EventFilter] that sets none.
const defaultEventLimit = 1000

// Follow calls emit with the events matching f written after f.AfterID,
// oldest first, a page (f.Limit, 0: 1000) at a time, as they come: it reads
// again at once after a full page, so a burst is never skipped, and every
// interval otherwise. It returns nil when ctx ends, or the first error of a
// read or of emit.
func (s *Store) Follow(ctx context.Context, f EventFilter, every time.Duration, emit func([]Event) error) error {
	f.first = true
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		events, err := s.Events(ctx, f)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if len(events) > 0 {
			if err := emit(events); err != nil {
				return err
			}
			f.AfterID = events[len(events)-1].ID
		}
		if len(events) >= cmp.Or(f.Limit, defaultEventLimit) {
			continue // a full page: more are waiting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

const eventColumns = `id, ts, type, call_id, agent_id, role, tool, group_id, parent_id, payload`

// Events returns the events matching f in ascending id order (oldest first),
// at most f.Limit of them: the most recent when more match. Each column
// filter has an index (migrations/*/022) that reads its events backwards
// from the newest, so that a page costs its rows, not the table.
func (s *Store) Events(ctx context.Context, f EventFilter) ([]Event, error) {
	query, args, err := s.eventsQuery(f)
	if err != nil {
		return nil, err
	}
	return queryAll(ctx, s.db, "events", scanEvent, query, args...)
}

// eventsQuery is the statement of [Store.Events] and its arguments.
func (s *Store) eventsQuery(f EventFilter) (string, []any, error) {
	var where []string
	var args []any
	match := func(cond string, arg any) {
		where = append(where, cond)
		args = append(args, arg)
	}
	for _, eq := range []struct{ column, value string }{{"tool", f.Tool}, {"agent_id", f.Agent}, {"call_id", f.Call},
		{"role", f.Role}, {"credential", f.Credential}} {
		if eq.value != "" {
			match(eq.column+" = ?", eq.value)
		}
	}
	if f.Parent != "" {
		// The literal term lets both engines use the partial index.
		where = append(where, "parent_id <> ''")
		match("parent_id = ?", f.Parent)
	}
	if prefix, ok := strings.CutSuffix(f.Type, "."); ok {
		// The types starting with "x." sort from "x." up to, not including, "x/".
		match("type >= ?", f.Type)
		match("type < ?", prefix+"/")
	} else if f.Type != "" {
		match("type = ?", f.Type)
	}
	if f.Outcome != "" || f.Code != "" {
		cond, cargs, err := s.outcomeWhere(f.Outcome, f.Code)
		if err != nil {
			return "", nil, err
		}
		where = append(where, cond)
		args = append(args, cargs...)
	}
	if !f.Since.IsZero() {
		match("ts >= ?", stamp(f.Since))
	}
	if !f.Until.IsZero() {
		match("ts < ?", stamp(f.Until))
	}
	if f.AfterID > 0 {
		match("id > ?", f.AfterID)
	}
	if f.BeforeID > 0 {
		match("id < ?", f.BeforeID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultEventLimit
	}
	query := `SELECT ` + eventColumns + ` FROM events`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	if f.first {
		query += ` ORDER BY id LIMIT ?`
	} else {
		query = `SELECT * FROM (` + query + ` ORDER BY id DESC LIMIT ?) AS recent ORDER BY id`
	}
	return query, append(args, limit), nil
}

// EachEvent calls emit with the events matching f, oldest first, a page
// (f.Limit, 0: 1000) at a time, up to the newest event written when it
// starts: what an export reads, in memory one page at a time. It returns
// the first error of a read or of emit, or ctx's.
func (s *Store) EachEvent(ctx context.Context, f EventFilter, emit func([]Event) error) error {
	newest, err := s.Events(ctx, EventFilter{Limit: 1})
	if err != nil || len(newest) == 0 {
		return err
	}
	if f.BeforeID <= 0 || f.BeforeID > newest[0].ID {
		f.BeforeID = newest[0].ID + 1
	}
	f.first = true
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		events, err := s.Events(ctx, f)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		if err := emit(events); err != nil {
			return err
		}
		f.AfterID = events[len(events)-1].ID
	}
}

// jsonTextKeys are the payload keys whose values the host writes as JSON
// text: a call's arguments, cut to a bound (host/executor.go).
var jsonTextKeys = []string{"arguments"}

// Readable returns e with the payload values that carry JSON as text (a
// call's arguments) decoded into JSON values, as they were redacted and
// stored; a value that does not decode (arguments cut at their bound, said
// by arguments_truncated) stays text. e's payload is not modified.
func (e Event) Readable() Event {
	var decoded map[string]any
	for _, k := range jsonTextKeys {
		text, ok := e.Payload[k].(string)
		var v any
		if !ok || json.Unmarshal([]byte(text), &v) != nil {
			continue
		}
		if decoded == nil {
			decoded = maps.Clone(e.Payload)
		}
		decoded[k] = v
	}
	if decoded != nil {
		e.Payload = decoded
	}
	return e
}

func scanEvent(row scanner) (Event, error) {
	var e Event
	var ts, payload string
	err := row.Scan(&e.ID, &ts, &e.Type, &e.CallID, &e.AgentID, &e.Role, &e.Tool, &e.Group, &e.ParentID, &payload)
	e.Time = parseTime(ts)
	if err == nil && payload != "{}" {
		err = json.Unmarshal([]byte(payload), &e.Payload)
	}
	return e, err
}
