package sandbox

import (
	"fmt"
	"os"
	"strconv"

	"github.com/toolhost/toolhost/sandbox/internal/stage"
)

// A sandbox ends when its command exits, when the process that started it
// ends it (Cancel, Close) or dies, SIGKILLed included, and when its
// bubblewrap is killed. The stage, PID 1 of the sandbox's PID namespace
// (--as-pid-1), does it by exiting; the kernel then kills every other
// process there.
//
// Neither bubblewrap's --die-with-parent nor a parent-death signal on
// bubblewrap can promise it. Between its clone and the moment it lets its
// child go on, bubblewrap must live: its child waits for it in that window
// and, were bubblewrap killed there, would wait forever. And the child arms
// its own parent-death signal only after setting the sandbox up, so
// bubblewrap killed before that leaves a sandbox that runs on unwatched: a
// host SIGKILLed while bubblewrap set a sandbox up left it running its
// command to the end, or stuck for good (TestHostKilledEndsSandbox).
//
// So bubblewrap outlives the host, for as long as the stage takes to see
// it: the stage watches two pipes and ends the sandbox when one of them
// reads as the end (stage.Spec.Watch). The host's pipe has its write end in
// this process alone, and nothing is written to it: Close or Cancel closes
// it, and so does this process's death, whatever kills it. Bubblewrap's
// pipe is its --json-status-fd, which it keeps open as long as it lives,
// outside the sandbox: bubblewrap killed (the process group a caller kills
// on cancellation) ends the sandbox too; the stage drops what bubblewrap
// reports there. Once set up, the stage also dies with bubblewrap, its
// parent, by a parent-death signal of its own. Bubblewrap writes its
// reports (and its --info-fd) before it lets its child go on, so each of
// those pipes has a reader besides the host, or that write would kill
// bubblewrap with SIGPIPE in the window once the host is dead: the child's
// inherited copy, and for --info-fd a read end bubblewrap itself holds.

// tieLife makes the host's and bubblewrap's pipes and names them in b and
// st.
func (c *Cmd) tieLife(b *args, st *stage.Spec) error {
	hostRead, hostWrite, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	c.hostEnd = hostWrite
	c.inherited = append(c.inherited, hostRead)
	statusRead, statusWrite, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	// This process keeps a reader of the reports until Close, for the
	// exit status bubblewrap reports last.
	c.status = statusRead
	c.inherited = append(c.inherited, statusWrite)
	st.Watch = []int{c.pass(hostRead), c.pass(statusRead)}
	b.add("--json-status-fd", strconv.Itoa(c.pass(statusWrite)))
	return nil
}

// pass hands f down to bubblewrap and the stage, and returns its
// descriptor's number there.
func (c *Cmd) pass(f *os.File) int {
	c.ExtraFiles = append(c.ExtraFiles, f)
	return 2 + len(c.ExtraFiles)
}

// closeInherited closes this process's copies of the descriptors only
// bubblewrap and the stage need, once bubblewrap has its own.
func (c *Cmd) closeInherited() {
	for _, f := range c.inherited {
		_ = f.Close()
	}
	c.inherited = nil
}
