package codemode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/rules"
	"golang.org/x/sys/unix"
)

// runnerEnv is the environment variable that makes a process the runner
// of one script: its value is the script's memory bound in bytes. The
// host re-executes its own binary with it (see startRunner).
const runnerEnv = "TOOLHOST_CODE_RUNNER"

// runtimeMargin is the address space the runner's Go runtime needs over
// the memory bound and over what it held at its start: the heap's
// metadata and new reservations. 4MiB is the least that runs a trivial
// script; this leaves room.
const runtimeMargin = 16 << 20

// maxArgs is the most bytes, as JSON, of the arguments of one call a
// script makes.
const maxArgs = 1 << 20

// startMsg is the host's first line to the runner: the script, its
// functions and its bounds.
type startMsg struct {
	Script    string            `json:"script"`
	Functions map[string]string `json:"functions"` // function name → tool
	Tools     []string          `json:"tools"`     // every tool call() may name
	Bounds    rules.CodeBounds  `json:"bounds"`
}

// runnerMsg is one line from the runner: a call (ID, Tool, Args), a
// printed line (Print), or the end (End, and Result or Error).
type runnerMsg struct {
	ID     int64               `json:"id,omitempty"`
	Tool   string              `json:"tool,omitempty"`
	Args   json.RawMessage     `json:"args,omitempty"`
	Print  *string             `json:"print,omitempty"`
	End    bool                `json:"end,omitempty"`
	Result json.RawMessage     `json:"result,omitempty"`
	Error  *toolhost.ErrorInfo `json:"error,omitempty"`
}

// answerMsg is the host's answer to call ID: what it returns to the
// script.
type answerMsg struct {
	ID    int64           `json:"id"`
	Value json.RawMessage `json:"value"`
}

// In the runner process, this package's init runs the script and exits
// before anything else of the binary runs.
func init() {
	if v, ok := os.LookupEnv(runnerEnv); ok {
		os.Exit(runRunner(v, os.Stdin, os.Stdout, os.Stderr))
	}
}

// runRunner is the runner process: it bounds its own memory, reads the
// start message from in, runs the script, its calls and prints going out
// as lines to out and answers coming in, and ends with the end line.
func runRunner(memory string, in io.Reader, out, errs io.Writer) int {
	bound, err := strconv.ParseInt(memory, 10, 64)
	if err == nil {
		err = limitMemory(bound)
	}
	if err != nil {
		fmt.Fprintf(errs, "code runner: %v\n", err)
		return 2
	}
	r := bufio.NewReader(in)
	line, err := r.ReadBytes('\n')
	var start startMsg
	if err == nil {
		err = json.Unmarshal(line, &start)
	}
	if err != nil {
		fmt.Fprintf(errs, "code runner: the start message: %v\n", err)
		return 2
	}
	c := &conn{out: out, waiting: map[int64]chan json.RawMessage{}}
	go c.read(r, errs)
	result, err := interpret(c, &start)
	if err != nil {
		info := toolhost.InfoOf(err)
		c.send(&runnerMsg{End: true, Error: &toolhost.ErrorInfo{Code: info.Code, Message: info.Message}})
	} else {
		c.send(&runnerMsg{End: true, Result: json.RawMessage(result)})
	}
	return 0
}

// limitMemory holds the runner to bound: the kernel refuses it more
// address space than it held at its start, bound and runtimeMargin (a Go
// runtime refused memory dies: "fatal error: out of memory"), and the
// collector works to stay under bound. One thread runs Go code.
// RLIMIT_AS, not RLIMIT_DATA: the kernel does not count against
// RLIMIT_DATA the heap the Go runtime maps over the address space it
// reserved at its start, so a runner under it grew past it.
func limitMemory(bound int64) error {
	held, err := addressSpace()
	if err != nil {
		return err
	}
	limit := uint64(held + bound + runtimeMargin)
	if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		return fmt.Errorf("limiting its memory: %v", err)
	}
	debug.SetMemoryLimit(bound)
	runtime.GOMAXPROCS(1)
	return nil
}

// addressSpace is the size of the process's address space (VmSize: what
// RLIMIT_AS counts), in bytes.
func addressSpace() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmSize in /proc/self/status")
}

// conn is the runner's side of the pipes to the host.
type conn struct {
	out     io.Writer
	wmu     sync.Mutex
	mu      sync.Mutex
	next    int64
	waiting map[int64]chan json.RawMessage // answers awaited, by call id
}

// send writes m as one line to the host, "<", ">" and "&" as they are.
func (c *conn) send(m *runnerMsg) {
	var line bytes.Buffer
	enc := json.NewEncoder(&line)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // of strings, numbers and valid JSON; a line
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _ = c.out.Write(line.Bytes())
}

// call asks the host for a call of tool with args (JSON) and waits for
// its answer.
func (c *conn) call(tool, args string) json.RawMessage {
	answer := make(chan json.RawMessage, 1)
	c.mu.Lock()
	c.next++
	id := c.next
	c.waiting[id] = answer
	c.mu.Unlock()
	c.send(&runnerMsg{ID: id, Tool: tool, Args: json.RawMessage(args)})
	return <-answer
}

// read hands the host's answers to the calls awaiting them. The host
// gone, or an answer that makes no sense, ends the runner.
func (c *conn) read(r *bufio.Reader, errs io.Writer) {
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			os.Exit(1) // the host is gone: no one waits for the script
		}
		var a answerMsg
		if err := json.Unmarshal(line, &a); err != nil {
			fmt.Fprintf(errs, "code runner: an answer: %v\n", err)
			os.Exit(2)
		}
		c.mu.Lock()
		answer, ok := c.waiting[a.ID]
		delete(c.waiting, a.ID)
		c.mu.Unlock()
		if !ok {
			fmt.Fprintf(errs, "code runner: an answer to no call (%d)\n", a.ID)
			os.Exit(2)
		}
		answer <- a.Value
	}
}
