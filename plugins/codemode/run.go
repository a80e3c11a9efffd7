package codemode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/codemode"
	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/redact"
	"github.com/toolhost/toolhost/rules"
)

// stderrKept is how much of a runner's stderr the host keeps, to say why
// it died.
const stderrKept = 8 << 10

// run runs src for the caller in a runner process and returns
// run_script's result. The host serves the runner's calls, each through
// the pipeline as the caller's, and holds the bounds that do not trust
// the runner: wall time, calls, parallel calls, output and the size of
// what the runner sends; the kernel holds its memory.
func run(ctx context.Context, svc Service, caller toolhost.CallContext, src string) *toolhost.Result {
	// Over the defaults again: a bound no one set would be no bound.
	bounds := svc.CodeBounds(caller.Role).Over(rules.DefaultCodeBounds())
	tools, err := listTools(svc, caller)
	if err != nil {
		return toolhost.ErrorResult(err)
	}
	ctx, cancel := context.WithTimeout(ctx, bounds.Timeout)
	defer cancel()
	h := &proc{svc: svc, caller: caller, bounds: bounds, ctx: ctx, cancel: cancel, tools: map[string]bool{}, sem: make(chan struct{}, bounds.Parallel)}
	for _, t := range tools {
		h.tools[t] = true
	}
	if err := h.start(); err != nil {
		// A time so short (the bound's least is 1ns) that it was up before
		// the runner started is the timeout still.
		if h.timedOut() {
			return toolhost.ErrorResult(h.timeout())
		}
		return toolhost.ErrorResult(toolhost.Errorf(toolhost.CodeInternal, "code: the script's runner did not start: %v", err))
	}
	defer h.stop()
	h.send(startMsg{Script: src, Functions: codemode.Functions(tools), Tools: tools, Bounds: bounds})
	return h.serve()
}

// proc is the host's side of one runner process.
type proc struct {
	svc    Service
	caller toolhost.CallContext
	bounds rules.CodeBounds
	ctx    context.Context // the script's, ended by its timeout
	cancel context.CancelFunc
	tools  map[string]bool

	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  *bufio.Reader
	stderr  capped
	wmu     sync.Mutex
	calls   int
	sem     chan struct{} // the parallel bound, held by each call in flight
	wg      sync.WaitGroup
	printed strings.Builder
}

// start starts the runner: this binary again, with runnerEnv its whole
// environment, in "/", in its own process group (so that a kill reaches
// all of it), killed when the host dies or the script's time is up.
func (h *proc) start() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	h.cmd = exec.CommandContext(h.ctx, exe)
	h.cmd.Env = []string{runnerEnv + "=" + strconv.FormatInt(h.bounds.Memory, 10)}
	h.cmd.Dir = "/"
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	h.cmd.Cancel = func() error { return syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL) }
	h.cmd.WaitDelay = time.Second
	h.cmd.Stderr = &h.stderr
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	h.stdout = bufio.NewReader(stdout)
	return h.cmd.Start()
}

// stop kills the runner, if it still runs, cancels and waits for the
// calls in flight, and reaps the runner. A runner reaped already is not
// killed: its process group's id may be another's by now.
func (h *proc) stop() {
	if h.cmd.ProcessState == nil {
		_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = h.stdin.Close()
	h.cancel()
	h.wg.Wait()
	_ = h.cmd.Wait()
}

// send writes v as one line to the runner. A runner gone is seen where
// its output ends.
func (h *proc) send(v any) {
	line, _ := json.Marshal(v) // of strings, numbers and valid JSON
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_, _ = h.stdin.Write(append(line, '\n'))
}

// serve serves the runner's lines until its end line, its death or a
// bound.
func (h *proc) serve() *toolhost.Result {
	// The longest line a runner that keeps its bounds sends: a call's
	// arguments, or a result or print within the output bound.
	maxLine := h.bounds.Output + maxArgs + 4096
	for {
		line, err := readLine(h.stdout, maxLine)
		if errors.Is(err, errLineTooLong) {
			return h.broken("a line longer than %d bytes", maxLine)
		}
		if err != nil {
			return h.died()
		}
		var m runnerMsg
		if err := json.Unmarshal(line, &m); err != nil {
			return h.broken("a line that is not a message: %v", err)
		}
		switch {
		case m.End:
			return h.end(&m)
		case m.Print != nil:
			if h.printed.Len()+len(*m.Print)+1 > h.bounds.Output {
				return h.failed(printedTooMuch(h.bounds.Output))
			}
			h.printed.WriteString(*m.Print)
			h.printed.WriteByte('\n')
		case m.Tool != "":
			if h.calls++; h.calls > h.bounds.Calls {
				return h.failed(bound("calls", "the script made more than %d tool calls", h.bounds.Calls))
			}
			if !h.tools[m.Tool] {
				return h.broken("a call of %q, not one of the caller's tools", m.Tool)
			}
			if len(m.Args) == 0 || m.Args[0] != '{' {
				return h.broken("a call of %s whose arguments are not an object", m.Tool)
			}
			h.wg.Go(func() { h.call(m.ID, m.Tool, m.Args) })
		default:
			return h.broken("a message that is neither a call, a print nor the end")
		}
	}
}

// call makes one call of the script through the pipeline as its caller,
// with the script's call as its parent, within the parallel bound, and
// answers the runner.
func (h *proc) call(id int64, tool string, args json.RawMessage) {
	select {
	case h.sem <- struct{}{}:
	case <-h.ctx.Done():
		return
	}
	defer func() { <-h.sem }()
	cc := h.caller
	cc.CallID, cc.ParentID = "", h.caller.CallID
	res, err := h.svc.Call(h.ctx, &toolhost.CallRequest{Tool: tool, Arguments: args, Context: cc})
	h.send(answerMsg{ID: id, Value: callValue(res, err)})
}

// end is run_script's result from the runner's end line, checked again:
// its error's code is one a script fails with, its result within the
// output bound.
func (h *proc) end(m *runnerMsg) *toolhost.Result {
	if h.timedOut() {
		// A call that returned because the time was up (its plugin's own
		// timer firing first), which the script returned or went on
		// from, is no success.
		return h.failed(h.timeout())
	}
	if m.Error != nil {
		switch m.Error.Code {
		case toolhost.CodeValidation, toolhost.CodeToolExec, toolhost.CodePolicy:
			return h.failed(toolhost.Errorf(m.Error.Code, "%s", m.Error.Message))
		}
		return h.broken("an error of code %q", m.Error.Code)
	}
	text := reply(m.Result, h.printed.String())
	if err := checkReply(text, h.bounds.Output); err != nil {
		return h.failed(err)
	}
	var structured map[string]any
	_ = json.Unmarshal(text, &structured)
	return &toolhost.Result{OK: true, Stdout: string(text), Meta: map[string]any{toolhost.MetaStructuredContent: structured}}
}

// died is run_script's result when the runner's output ended before its
// end line: the timeout or the cancellation that killed it, the memory
// bound when it ran out of memory (the Go runtime refused memory by the
// kernel, or the kernel's OOM killer), else what became of it.
func (h *proc) died() *toolhost.Result {
	_ = h.cmd.Wait()
	if h.timedOut() {
		return h.failed(h.timeout())
	}
	if h.ctx.Err() != nil {
		return h.failed(toolhost.Errorf(toolhost.CodeCancelled, "code: the script's call was cancelled"))
	}
	stderr := h.stderr.String()
	ws, _ := h.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if slices.ContainsFunc(outOfMemory, func(m string) bool { return strings.Contains(stderr, m) }) ||
		ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return h.failed(bound("memory", "the script needed more than %s", sizeText(h.bounds.Memory)))
	}
	first, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	return h.failed(toolhost.Errorf(toolhost.CodeInternal, "code: the script's runner ended (%v) before the script: %s", h.cmd.ProcessState, first))
}

// timedOut reports whether the script's time is up: by the clock, though
// its deadline's timer may not have fired yet.
func (h *proc) timedOut() bool {
	dl, ok := h.ctx.Deadline()
	return errors.Is(h.ctx.Err(), context.DeadlineExceeded) || ok && !time.Now().Before(dl)
}

// timeout is the timeout bound's error.
func (h *proc) timeout() error {
	return toolhost.Errorf(toolhost.CodeTimeout, "code: timeout: the script ran longer than %v", h.bounds.Timeout)
}

// broken is run_script's result when the runner sent what a runner does
// not: the host stops it and trusts nothing of it.
func (h *proc) broken(format string, args ...any) *toolhost.Result {
	return h.failed(toolhost.Errorf(toolhost.CodeInternal, "code: the script's runner sent %s", fmt.Sprintf(format, args...)))
}

// failed is run_script's result when the script fails for err, with what
// it printed so far, its message cut to the output bound (cutMessage).
func (h *proc) failed(err error) *toolhost.Result {
	res := toolhost.ErrorResult(err)
	res.Error.Message = cutMessage(res.Error.Message, h.bounds.Output)
	res.Stdout = h.printed.String()
	return res
}

// cutMessage keeps the beginning of an error message, at most n bytes of
// it, saying so when it cuts it: a script's own error (fail's text,
// Starlark's naming a value the script made) is as long as the script
// makes it.
func cutMessage(msg string, n int) string {
	if len(msg) <= n {
		return msg
	}
	return fmt.Sprintf("%s … (cut: the message had %d bytes, more than the output bound of %d)", output.Limit(msg, 0, n, false).Text, len(msg), n)
}

// outOfMemory are what a runner refused address space writes as it dies:
// the Go runtime ("fatal error: out of memory", "runtime: cannot allocate
// memory"), and in a -race build the race detector's runtime and the Go
// runtime looking for room for the heap elsewhere.
var outOfMemory = []string{"out of memory", "cannot allocate memory", "failed to allocate", "too many address space collisions"}

// errLineTooLong is readLine's error for a line longer than its bound.
var errLineTooLong = errors.New("line too long")

// readLine reads one line of at most max bytes from r, without its
// newline.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		if len(line)+len(part) > max+1 {
			return nil, errLineTooLong
		}
		line = append(line, part...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return nil, err
		}
	}
}

// capped keeps the first stderrKept bytes written to it.
type capped struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write keeps what fits of p and reports all of it written.
func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := stderrKept - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// String is what was kept.
func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// reply is what the model gets of a script: its result (nil: none) and
// what it printed, as one compact JSON object, empty fields left out,
// "<", ">" and "&" as they are.
func reply(result json.RawMessage, printed string) []byte {
	out := map[string]any{}
	if result != nil {
		out["result"] = result
	}
	if printed != "" {
		out["printed"] = printed
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(out) // a map of valid JSON and a string
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// checkReply is the output bound's error when text is longer than it, as
// the host returns it: redacted, which can make it longer.
func checkReply(text []byte, output int) error {
	shown, _ := redact.String(string(text))
	if n := max(len(text), len(shown)); n > output {
		return bound("output", "the script returned %d bytes, more than %d", n, output)
	}
	return nil
}

// printedTooMuch is the output bound's error of a script that printed
// more than it.
func printedTooMuch(output int) error {
	return bound("output", "the script printed more than %d bytes", output)
}

// sizeText is n bytes as the config writes them: 256MiB, 1GiB, 1000
// bytes.
func sizeText(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// listTools is the tools the caller may call, those of its role's
// deferred groups included, but the code group's.
func listTools(svc Service, caller toolhost.CallContext) ([]string, error) {
	q := host.ToolQuery{Agent: caller.AgentID, Unloaded: true}
	if q.Agent == "" {
		q.Role = caller.Role
	}
	list, err := svc.Tools(q)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range list.Tools {
		if list.Meta[d.Function.Name].Group != host.CodeGroup {
			names = append(names, d.Function.Name)
		}
	}
	return names, nil
}
