package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

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
	// The process's priority: this goroutine's thread's (not the main
	// thread's, which an earlier writer may have taken and left at nice 19).
	runtime.LockOSThread()
	own := threadNice(t, syscall.Gettid())
	runtime.UnlockOSThread()

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

	// Small batches, as calls would make, until the writer moves.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; w.prio.low.Load(); i++ {
		if time.Now().After(deadline) {
			t.Fatal("after 30 s with a busy loop on its core, the writer is still at nice 19")
		}
		for j := range 10 {
			w.Emit(benchEvent(i*10 + j))
		}
		if err := w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// The thread that takes over has the process's priority; the starved
	// one ends with its goroutine.
	moved := int(w.prio.tid.Load())
	for ; moved == tid; moved = int(w.prio.tid.Load()) {
		if time.Now().After(deadline) {
			t.Fatal("after 30 s, no thread took over from the starved one")
		}
		time.Sleep(time.Millisecond)
	}
	if n := threadNice(t, moved); n != own {
		t.Fatalf("writer moved to thread %d at nice %d, want %d", moved, n, own)
	}
	// (Unless it was the main thread, which Go parks instead of ending.)
	for tid != os.Getpid() {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, the starved thread %d still exists", tid)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestThreadPriorityFollowsRunDelay drives threadPriority with a run delay
// the test writes, on threads of its own: the thread starts at nice 19; a
// cycle starved past starvedDelay makes observe ask for another thread,
// which keeps the process's priority until a calm window has passed, and
// then goes to nice 19 itself.
func TestThreadPriorityFollowsRunDelay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedstat")
	delay := func(d time.Duration) {
		if err := os.WriteFile(path, fmt.Appendf(nil, "123 %d 45\n", d), 0o600); err != nil {
			t.Error(err)
		}
	}
	defer func(old string) { schedstatPath = old }(schedstatPath)
	schedstatPath = path
	var p threadPriority
	// onThread runs f on a goroutine locked to a thread of its own, which
	// ends with it (its nice value with it).
	onThread := func(f func(tid int)) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			f(syscall.Gettid())
		}()
		<-done
	}
	var own int
	onThread(func(tid int) { own = threadNice(t, tid) })

	onThread(func(tid int) {
		delay(time.Second)
		p.attach()
		if n := threadNice(t, tid); n != lowNice || !p.low.Load() {
			t.Errorf("first thread at nice %d (low %v), want %d", n, p.low.Load(), lowNice)
		}
		delay(time.Second + starvedDelay)
		if p.observe() {
			t.Error("observe left after a wait of starvedDelay")
		}
		delay(time.Second + 2*starvedDelay + time.Nanosecond)
		if !p.observe() || p.low.Load() {
			t.Error("observe stayed after a wait over starvedDelay")
		}
	})
	onThread(func(tid int) {
		delay(5 * time.Second) // another thread's run delay
		p.attach()
		if n := threadNice(t, tid); n != own || p.low.Load() {
			t.Errorf("thread that took over at nice %d (low %v), want %d", n, p.low.Load(), own)
		}
		start := time.Now()
		for !p.low.Load() {
			if time.Since(start) > maxCalm {
				t.Fatal("still not at nice 19 after a calm maxCalm")
			}
			time.Sleep(10 * time.Millisecond)
			if p.observe() {
				t.Fatal("observe asked for another thread while calm")
			}
		}
		if waited := time.Since(start); waited < minCalm {
			t.Errorf("back at nice 19 after %v, before a calm window of %v", waited, minCalm)
		}
		if n := threadNice(t, tid); n != lowNice {
			t.Errorf("back at nice %d, want %d", n, lowNice)
		}
		p.detach()
	})
}

// threadNice reads a thread's nice value (field 19 of /proc/self/task/TID/stat).
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/stat", tid))
	if err != nil {
		t.Fatal(err)
	}
	// The command, field 2, is in parentheses and may hold spaces.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}
