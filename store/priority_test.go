package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
// writer must move to a thread at the process's priority, and go back to
// nice 19 once the work stops. A busy loop and the writer's thread are
// pinned to one core, so that the rest of the machine stays free.
func TestStarvedWriterLeavesNice19(t *testing.T) {
	s := open(t, t.TempDir())
	w := s.NewEventWriter(nil)
	defer w.Close()
	ctx := context.Background()
	// emitUntil writes small batches, as calls would, until cond holds.
	emitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; !cond(); i++ {
			if time.Now().After(deadline) {
				t.Fatalf("after 30 s: not %s", what)
			}
			for j := range 10 {
				w.Emit(benchEvent(i*10 + j))
			}
			if err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The process's priority: this goroutine's thread's (not the main
	// thread's, which an earlier writer may have taken and left at nice 19).
	runtime.LockOSThread()
	own := threadNice(t, syscall.Gettid())
	runtime.UnlockOSThread()
	emitUntil("at nice 19 on an idle machine", func() bool { return w.prio.low.Load() })
	tid := int(w.prio.tid.Load())
	if n := threadNice(t, tid); n != lowNice {
		t.Fatalf("writer's thread %d at nice %d, want %d", tid, n, lowNice)
	}

	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &cpus); err != nil {
		t.Fatal(err)
	}
	core := -1
	for c := range 1024 {
		if cpus.IsSet(c) {
			core = c
		}
	}
	var one unix.CPUSet
	one.Set(core)
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	stopBusy := func() {
		_ = busy.Process.Kill()
		_ = busy.Wait()
	}
	defer stopBusy()
	if err := unix.SchedSetaffinity(busy.Process.Pid, &one); err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedSetaffinity(tid, &one); err != nil {
		t.Fatal(err)
	}
	emitUntil("off nice 19 with a busy loop on its core", func() bool { return !w.prio.low.Load() })
	stopBusy()
	// The thread that took over has the process's priority; the starved
	// one ended with its goroutine.
	if moved := int(w.prio.tid.Load()); moved == tid || threadNice(t, moved) != own {
		t.Fatalf("writer on thread %d (was %d), at nice %d, want a new thread at nice %d", moved, tid, threadNice(t, moved), own)
	}
	emitUntil("back at nice 19 once the busy loop stopped", func() bool { return w.prio.low.Load() })
	if tid := int(w.prio.tid.Load()); threadNice(t, tid) != lowNice {
		t.Fatalf("writer's thread %d back at nice %d, want %d", tid, threadNice(t, tid), lowNice)
	}
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
