package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/toolhost/toolhost/internal/procstat"
	"github.com/toolhost/toolhost/internal/proctest"
)

// The main goroutine keeps the main thread, so that no test goroutine runs
// there: a goroutine that ends locked to the main thread does not end it,
// and the tests below need locked goroutines whose threads do end.
func init() { runtime.LockOSThread() }

// TestPriorityPolicy checks the writer's priority decisions against what
// they must guarantee, over random histories of its thread's run delay: a
// cycle starved at nice 19 always leaves it; it goes back only after a calm
// window of at least minCalm in which it waited for a CPU less than a tenth
// of the time; the window stays within its bounds; and a machine that stays
// calm long enough always gets it back to nice 19.
func TestPriorityPolicy(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := runSample{at: time.Duration(rapid.Int64Range(0, 1e12).Draw(rt, "start")), delay: time.Duration(rapid.Int64Range(0, 1e9).Draw(rt, "delay0"))}
		p := newPriorityPolicy(s)
		var history []runSample // the samples since it last left nice 19
		step := func(elapsed, delay time.Duration) {
			wasLow := p.low
			s = runSample{at: s.at + elapsed, delay: s.delay + delay}
			changed := p.next(s)
			if changed != (wasLow != p.low) {
				rt.Fatalf("next reported %v, but low went from %v to %v", changed, wasLow, p.low)
			}
			if p.calm < minCalm || p.calm > maxCalm {
				rt.Fatalf("calm window %v outside [%v, %v]", p.calm, minCalm, maxCalm)
			}
			switch {
			case wasLow && delay > starvedDelay && p.low:
				rt.Fatalf("stayed at nice 19 after waiting %v for a CPU in one cycle", delay)
			case wasLow && delay <= starvedDelay && !p.low:
				rt.Fatalf("left nice 19 after waiting only %v", delay)
			case !wasLow && p.low:
				calm := false
				for _, f := range history {
					if w := s.at - f.at; w >= minCalm && (s.delay-f.delay)*calmShare < w {
						calm = true
					}
				}
				if !calm {
					rt.Fatalf("went back to nice 19 at %v without a calm window since %v", s.at, history)
				}
			}
			if wasLow && !p.low {
				history = history[:0]
			}
			if !p.low {
				history = append(history, s)
			}
		}
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			elapsed := time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(rt, "elapsed"))
			delay := time.Duration(rapid.Int64Range(0, int64(elapsed)).Draw(rt, "waited"))
			step(elapsed, delay)
		}
		// Then a calm machine: it must end at nice 19.
		for range 2 * maxCalm / (100 * time.Millisecond) {
			step(100*time.Millisecond, 0)
		}
		if !p.low {
			rt.Fatalf("still at the process's priority after %v of calm", 2*maxCalm)
		}
	})
}

// TestPriorityBackoff: a thread starved again soon after going back to nice
// 19 waits twice as long before the next try, up to maxCalm; one that stays
// low long enough starts again from minCalm.
func TestPriorityBackoff(t *testing.T) {
	var s runSample
	p := newPriorityPolicy(s)
	advance := func(elapsed, delay time.Duration) bool {
		s = runSample{at: s.at + elapsed, delay: s.delay + delay}
		return p.next(s)
	}
	want := minCalm
	for range 10 {
		if !advance(10*time.Millisecond, 2*starvedDelay) || p.low {
			t.Fatal("a starved cycle did not leave nice 19")
		}
		want = min(2*want, maxCalm)
		if p.calm != want {
			t.Fatalf("calm window %v, want %v", p.calm, want)
		}
		if advance(p.calm-time.Millisecond, 0) {
			t.Fatalf("went back before the calm window %v", p.calm)
		}
		if !advance(time.Millisecond, 0) || !p.low {
			t.Fatalf("did not go back after a calm window of %v", p.calm)
		}
	}
	advance(lowProbation*maxCalm, 0)
	if !advance(10*time.Millisecond, 2*starvedDelay) || p.calm != minCalm {
		t.Fatalf("after a long calm, calm window %v, want %v", p.calm, minCalm)
	}
}

// TestStarvedWriterLeavesNice19 is the attack: work at normal priority that
// keeps a core busy (an agent's build through the command module, say)
// starves the writer's thread at nice 19 on that core, and each of the
// garbage collector's stop-the-world phases then waits for that thread,
// stalling every call for tens of milliseconds (docs/several-hosts.md). The
// writer must move to a thread at the process's priority. A busy loop and
// the writer's thread are pinned to one core, so that the rest of the
// machine stays free; the thread is pinned before the first batch, so that
// nothing else can have moved the writer first.
func TestStarvedWriterLeavesNice19(t *testing.T) {
	own := processNice(t)
	s := open(t, t.TempDir())
	w := s.NewEventWriter(nil)
	defer w.Close()
	var tid int
	for tid == 0 || !w.prio.low.Load() {
		time.Sleep(time.Millisecond)
		tid = int(w.prio.tid.Load())
	}
	if n := threadNice(t, tid); n != lowNice {
		t.Fatalf("writer's thread %d at nice %d, want %d", tid, n, lowNice)
	}
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &cpus); err != nil {
		t.Fatal(err)
	}
	var one unix.CPUSet
	for c := range 1024 {
		if cpus.IsSet(c) {
			one.Zero()
			one.Set(c)
		}
	}
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = busy.Process.Kill()
		_ = busy.Wait()
	}()
	if err := unix.SchedSetaffinity(busy.Process.Pid, &one); err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedSetaffinity(tid, &one); err != nil {
		t.Fatal(err)
	}
	emitUntil(t, w, 30*time.Second, "off nice 19 with a busy loop on its core", func() bool {
		return !w.prio.low.Load() && int(w.prio.tid.Load()) != tid
	})
	if moved := int(w.prio.tid.Load()); threadNice(t, moved) != own {
		t.Fatalf("writer moved to thread %d at nice %d, want %d", moved, threadNice(t, moved), own)
	}
}

// TestWriterMovesBetweenItsThreads drives a real writer with a run delay the
// test writes: a batch starved past starvedDelay moves the work to a second
// thread, at the process's priority; once a calm window has passed, the
// work goes back to the first thread, still at nice 19. Neither thread
// ends on the way: a thread's end would kill the plugins it started.
func TestWriterMovesBetweenItsThreads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedstat")
	delay := func(d time.Duration) {
		if err := os.WriteFile(path, fmt.Appendf(nil, "123 %d 45\n", d), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	defer func(old string) { schedstatPath = old }(schedstatPath)
	schedstatPath = path
	delay(time.Second)
	own := processNice(t)
	s := open(t, t.TempDir())
	w := s.NewEventWriter(nil)
	defer w.Close()

	emitUntil(t, w, 10*time.Second, "at nice 19", w.prio.low.Load)
	first := int(w.prio.tid.Load())
	if n := threadNice(t, first); n != lowNice {
		t.Fatalf("first thread %d at nice %d, want %d", first, n, lowNice)
	}
	delay(time.Second + 2*starvedDelay)
	emitUntil(t, w, 10*time.Second, "on the second thread after a starved batch", func() bool {
		return !w.prio.low.Load() && int(w.prio.tid.Load()) != first
	})
	second := int(w.prio.tid.Load())
	if n := threadNice(t, second); n != own {
		t.Fatalf("second thread %d at nice %d, want %d", second, n, own)
	}
	start := time.Now()
	emitUntil(t, w, 2*maxCalm, "back on the first thread after a calm window", func() bool {
		return w.prio.low.Load() && int(w.prio.tid.Load()) == first
	})
	if waited := time.Since(start); waited < minCalm {
		t.Errorf("back after %v, before a calm window of %v", waited, minCalm)
	}
	for tid, want := range map[int]int{first: lowNice, second: own} {
		if n := threadNice(t, tid); n != want {
			t.Errorf("thread %d at nice %d, want %d", tid, n, want)
		}
	}
}

// TestEndLockedThreadKeepsChildren: a goroutine that ends locked to its
// thread ends the thread, and a child process that the thread started with
// a parent-death signal (as plugins are started) gets it. So the writer's
// goroutine at nice 19, whose thread may have started plugins before it
// took the thread, keeps the thread instead when it has children.
func TestEndLockedThreadKeepsChildren(t *testing.T) {
	exited := make(chan error, 1)
	started := make(chan *exec.Cmd, 1)
	go func() {
		runtime.LockOSThread()
		child := exec.Command("sleep", "60")
		child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := child.Start(); err != nil {
			exited <- err
			return
		}
		started <- child
		go func() { exited <- child.Wait() }()
		endLockedThread()
	}()
	var child *exec.Cmd
	select {
	case child = <-started:
	case err := <-exited:
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill() }()
	select {
	case err := <-exited:
		t.Fatalf("the child of the ended thread exited: %v", err)
	case <-time.After(500 * time.Millisecond):
	}

	// Without children, the thread ends.
	done := make(chan int)
	go func() {
		runtime.LockOSThread()
		tid := syscall.Gettid()
		defer func() { done <- tid }()
		endLockedThread()
	}()
	tid := <-done
	proctest.Eventually(t, fmt.Sprintf("thread %d, without children, ends", tid), func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
		return err != nil
	})
}

// emitUntil writes small batches to w, as calls would, until cond holds.
func emitUntil(t *testing.T, w *EventWriter, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for i := 0; !cond(); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: not %s", limit, what)
		}
		for j := range 10 {
			w.Emit(benchEvent(i*10 + j))
		}
		if err := w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// processNice is the process's nice value: that of a thread of the pool
// (not the main thread's, which an earlier writer may have left at nice 19).
func processNice(t *testing.T) int {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return threadNice(t, syscall.Gettid())
}

// threadNice reads a thread's nice value (field 19 of its stat file).
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	fields := procstat.File(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if len(fields) < 17 {
		t.Fatalf("thread %d: no stat fields to read its nice value from", tid)
	}
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUrgentWriterKeepsTheProcessPriority: the writer that strict audit's
// calls wait for never takes nice 19, where a busy machine would stall each
// of them until the writer was found starved.
func TestUrgentWriterKeepsTheProcessPriority(t *testing.T) {
	own := processNice(t)
	s := open(t, t.TempDir())
	w := s.NewEventWriter(&WriterOptions{Urgent: true})
	defer w.Close()
	emitUntil(t, w, 10*time.Second, "writing", func() bool { return w.Written() > 0 })
	tid := int(w.prio.tid.Load())
	if tid == 0 || w.prio.low.Load() {
		t.Fatalf("the urgent writer writes on thread %d, at nice 19: %v", tid, w.prio.low.Load())
	}
	if n := threadNice(t, tid); n != own {
		t.Fatalf("the urgent writer's thread %d is at nice %d, want the process's %d", tid, n, own)
	}
}
