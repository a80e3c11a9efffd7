// Package proctest helps tests check on processes and what they write.
package proctest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/procstat"
)

// Alive reports whether pid is a live process. A zombie counts as dead: it
// has exited and only waits to be reaped (in a container whose init does not
// reap orphans, it may wait forever).
func Alive(pid int) bool {
	f := procstat.Of(pid)
	return f != nil && f[0] != "Z"
}

// Running counts the live processes whose command line is exactly argv:
// the way to find a process started in a sandbox, whose pid there means
// nothing outside.
func Running(argv ...string) int {
	want := strings.Join(argv, "\x00") + "\x00"
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && string(b) == want {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil && Alive(pid) {
				n++
			}
		}
	}
	return n
}

// WithEnv lists the live processes whose environment holds entry
// ("KEY=value"): the way to find a process that the test had started with a
// value of its own, whether or not it got far enough to say its pid.
func WithEnv(entry string) []int {
	files, _ := filepath.Glob("/proc/[0-9]*/environ")
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), entry) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil && Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Patience is how long a test waits for something it expects to happen:
// long enough for a 2-core machine whose cores are both busy to start
// race-built processes and answer, so that reaching it means the thing
// never happens. A passing test waits only as long as the thing takes.
const Patience = 60 * time.Second

// Eventually polls cond until it holds, and fails the test, naming what it
// waited for, if it does not within [Patience]. It is a wait, not a timing
// assertion.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(Patience); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", Patience, what)
		}
	}
}

// Marker is a number of seconds that no other test's sleep uses, for a
// `sleep MARKER` that [Running] can find.
func Marker() string {
	return fmt.Sprintf("%d.%09d", 1000+os.Getpid()%1000, time.Now().UnixNano()%1e9)
}

// Buffer is a [bytes.Buffer] that several goroutines may write at once, such
// as a logger's: what a test reads of a process's log or output.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
