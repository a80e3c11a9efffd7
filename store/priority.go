package store

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The event writer's goroutine keeps a thread of its own. While the machine
// has CPU to spare, that thread runs at nice 19, so that the calls and the
// plugins get the CPU first. On a machine whose cores other work keeps busy,
// such a thread gets almost no CPU: the writer falls behind, and worse, every
// stop-the-world phase of the garbage collector waits for the thread to reach
// a safe point, stalling every call of the process for tens of milliseconds.
// So the writer watches how long its thread waits for a CPU (the run delay
// of /proc/thread-self/schedstat) and leaves nice 19 as soon as that wait
// shows it is starved; it goes back once a calm window shows the CPU to spare
// again. Where the run delay cannot be read, the thread keeps the process's
// priority.

const (
	// starvedDelay is the run delay, in one batch cycle at nice 19, past
	// which the thread counts as starved. On 2 cores busy with no-op calls it
	// stays under 11 ms; with a busy loop per core it is around 250 ms.
	starvedDelay = 20 * time.Millisecond
	// In a calm window, the thread (at the process's priority) waits for a
	// CPU less than 1/calmShare of the time; then it goes back to nice 19.
	// Measured: 4.5 % on 2 cores busy with no-op calls, 21 % with a busy
	// loop per core.
	calmShare = 10
	// minCalm and maxCalm bound the calm window. It doubles each time the
	// thread is starved again within lowProbation calm windows of going back,
	// so that a machine that keeps flipping costs few starved cycles.
	minCalm      = time.Second
	maxCalm      = time.Minute
	lowProbation = 10
	// lowNice is the thread's nice value while the machine has CPU to spare.
	lowNice = 19
)

// schedstatPath is where a thread reads its own run delay (tests change it).
var schedstatPath = "/proc/thread-self/schedstat"

// runSample is a thread's run delay (time runnable but waiting for a CPU)
// at a time, both since a fixed origin.
type runSample struct {
	at, delay time.Duration
}

// priorityPolicy decides, from successive samples of its thread, whether the
// writer's thread should run at nice 19 (low) or at the process's priority.
type priorityPolicy struct {
	low      bool
	last     runSample     // the previous sample
	from     runSample     // the start of the current calm window (not low)
	lowSince time.Duration // when the thread last went low
	calm     time.Duration // the calm window's length
}

// newPriorityPolicy starts low at s.
func newPriorityPolicy(s runSample) priorityPolicy {
	return priorityPolicy{low: true, last: s, lowSince: s.at, calm: minCalm}
}

// next takes the sample after a batch cycle and reports whether the thread
// should change priority; p.low is then the new one.
func (p *priorityPolicy) next(s runSample) bool {
	prev := p.last
	p.last = s
	if p.low {
		if s.delay-prev.delay <= starvedDelay {
			return false
		}
		if s.at-p.lowSince < lowProbation*p.calm {
			p.calm = min(2*p.calm, maxCalm)
		} else {
			p.calm = minCalm
		}
		p.low, p.from = false, s
		return true
	}
	window := s.at - p.from.at
	if window < p.calm {
		return false
	}
	if (s.delay-p.from.delay)*calmShare >= window {
		p.from = s // not calm yet: start another window
		return false
	}
	p.low, p.lowSince = true, s.at
	return true
}

// threadPriority applies a priorityPolicy to the writer's thread.
type threadPriority struct {
	policy priorityPolicy
	stat   *os.File // the thread's schedstat; nil: not watched
	origin time.Time
	// tid is the thread's id and low says it is at nice 19 (read by tests).
	tid atomic.Int32
	low atomic.Bool
}

// attach takes the calling goroutine's thread, which must be locked to it:
// it keeps the process's priority unless its run delay can be read and the
// policy says low.
func (t *threadPriority) attach() {
	t.tid.Store(int32(syscall.Gettid()))
	if t.origin.IsZero() {
		t.origin = time.Now()
	}
	f, err := os.Open(schedstatPath)
	if err != nil {
		return
	}
	t.stat = f
	s, ok := t.sample()
	if !ok {
		t.detach()
		return
	}
	if t.policy.calm == 0 { // the first thread
		t.policy = newPriorityPolicy(s)
	} else { // one that took over: its run delay counts from its start
		t.policy.last, t.policy.from = s, s
	}
	if t.policy.low {
		t.setLow()
	}
}

// observe samples the thread after a batch cycle. It reports true when the
// thread should be left for one at the process's priority (a thread cannot
// lower its own nice value without privileges); it has then detached it.
func (t *threadPriority) observe() (leave bool) {
	if t.stat == nil {
		return false
	}
	s, ok := t.sample()
	if !ok || !t.policy.next(s) {
		return false
	}
	if t.policy.low {
		t.setLow()
		return false
	}
	t.detach()
	return true
}

// setLow puts the thread at lowNice, or leaves the policy unwatched if it
// cannot.
func (t *threadPriority) setLow() {
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, int(t.tid.Load()), lowNice); err != nil {
		t.policy.low = false
		t.detach()
		return
	}
	t.low.Store(true)
}

// detach stops watching the thread, which ends at the process's priority
// or with its goroutine.
func (t *threadPriority) detach() {
	if t.stat != nil {
		_ = t.stat.Close()
		t.stat = nil
	}
	t.low.Store(false)
}

// sample reads the thread's run delay: the second of schedstat's fields
// (time on a CPU, time waiting for one, time slices), in nanoseconds.
func (t *threadPriority) sample() (runSample, bool) {
	var buf [80]byte
	n, _ := t.stat.ReadAt(buf[:], 0)
	_, rest, ok := strings.Cut(string(buf[:n]), " ")
	if !ok {
		return runSample{}, false
	}
	field, _, _ := strings.Cut(rest, " ")
	delay, err := strconv.ParseInt(field, 10, 64)
	if err != nil || delay < 0 {
		return runSample{}, false
	}
	return runSample{at: time.Since(t.origin), delay: time.Duration(delay)}, true
}
