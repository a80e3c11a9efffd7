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

// threadPriority runs a priorityPolicy over the writer's two threads: one at
// nice 19 and, from the first time that one is starved, one at the process's
// priority. The work moves between them (EventWriter.run); neither thread
// ends while the writer runs, because a child process started with a
// parent-death signal (as plugins are) gets it when the thread that started
// it ends, and either thread may have started one before the writer took it.
type threadPriority struct {
	policy priorityPolicy
	origin time.Time
	// tid is the id of the thread writing now, and low says it is the one
	// at nice 19 (read by tests).
	tid atomic.Int32
	low atomic.Bool
}

// writerThread is one of the writer's threads, watched.
type writerThread struct {
	stat *os.File // its schedstat
	tid  int32
}

// watch takes the calling goroutine's thread, which must be locked to it,
// and with low puts it at nice 19. It returns nil when the thread's run
// delay cannot be read or its priority cannot be set: the thread then keeps
// the process's priority, unwatched.
func (t *threadPriority) watch(low bool) *writerThread {
	th := &writerThread{tid: int32(syscall.Gettid())}
	f, err := os.Open(schedstatPath)
	if err != nil {
		return nil
	}
	th.stat = f
	s, ok := th.sample(t.origin)
	if ok && low {
		ok = syscall.Setpriority(syscall.PRIO_PROCESS, int(th.tid), lowNice) == nil
	}
	if !ok {
		th.close()
		return nil
	}
	if t.policy.calm == 0 {
		t.policy = newPriorityPolicy(s)
	}
	return th
}

// resume makes th the thread that writes: its own run delay counts from now.
// th may be nil (unwatched).
func (t *threadPriority) resume(th *writerThread) {
	if th == nil {
		t.tid.Store(int32(syscall.Gettid()))
		t.low.Store(false)
		return
	}
	if s, ok := th.sample(t.origin); ok {
		t.policy.last = s
		if !t.policy.low {
			t.policy.from = s
		}
	}
	t.tid.Store(th.tid)
	t.low.Store(t.policy.low)
}

// observe samples th, the thread that writes, after a batch cycle: true when
// the work should move to the other thread.
func (t *threadPriority) observe(th *writerThread) bool {
	if th == nil {
		return false
	}
	s, ok := th.sample(t.origin)
	return ok && t.policy.next(s)
}

// close stops watching th; nil does nothing.
func (th *writerThread) close() {
	if th != nil {
		_ = th.stat.Close()
	}
}

// endLockedThread lets the calling goroutine, locked to its thread for good,
// end and take the thread with it, unless the thread started child
// processes before the goroutine took it (their parent-death signal would
// kill them): then the goroutine parks forever, keeping the thread.
func endLockedThread() {
	b, err := os.ReadFile("/proc/thread-self/children")
	if err != nil || len(strings.TrimSpace(string(b))) > 0 {
		select {}
	}
}

// sample reads the thread's run delay: the second of schedstat's fields
// (time on a CPU, time waiting for one, time slices), in nanoseconds.
func (th *writerThread) sample(origin time.Time) (runSample, bool) {
	var buf [80]byte
	n, _ := th.stat.ReadAt(buf[:], 0)
	_, rest, ok := strings.Cut(string(buf[:n]), " ")
	if !ok {
		return runSample{}, false
	}
	field, _, _ := strings.Cut(rest, " ")
	delay, err := strconv.ParseInt(field, 10, 64)
	if err != nil || delay < 0 {
		return runSample{}, false
	}
	return runSample{at: time.Since(origin), delay: time.Duration(delay)}, true
}
