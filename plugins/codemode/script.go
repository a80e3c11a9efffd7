package codemode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/codemode"
	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/redact"
	"github.com/toolhost/toolhost/rules"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// fileOptions let a script loop and branch at its top level (result = …
// is set there) and use sets; recursion stays off.
var fileOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}

// memoryEvery is how often a script's memory bound is checked.
const memoryEvery = 5 * time.Millisecond

// script is one run of run_script.
type script struct {
	svc    Service
	caller toolhost.CallContext
	bounds rules.CodeBounds
	ctx    context.Context
	thread *starlark.Thread
	tools  map[string]bool   // the tools it may call, by name
	fns    map[string]string // its functions' names, to the tools'

	calls   atomic.Int64
	printed strings.Builder
	cancel  context.CancelFunc
	mu      sync.Mutex
	// stopped is why the script was stopped, the first reason only: a
	// *toolhost.Error naming the bound, the timeout or the cancellation.
	stopped error

	// deadline is done when the script's time is up or its call is
	// cancelled; ctx, under it, also when the script is stopped.
	deadline context.Context
}

// run runs src for the caller and returns run_script's result.
func run(ctx context.Context, svc Service, caller toolhost.CallContext, src string) *toolhost.Result {
	// Over the defaults again: a bound no one set would be no bound.
	s := &script{svc: svc, caller: caller, bounds: svc.CodeBounds(caller.Role).Over(rules.DefaultCodeBounds())}
	if err := s.listTools(); err != nil {
		return toolhost.ErrorResult(err)
	}
	var cancelTimeout context.CancelFunc
	s.deadline, cancelTimeout = context.WithTimeout(ctx, s.bounds.Timeout)
	defer cancelTimeout()
	s.ctx, s.cancel = context.WithCancel(s.deadline)
	defer s.cancel()
	s.thread = &starlark.Thread{
		Name:  "run_script",
		Print: s.print,
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, errors.New("load() is not available: a script has only its tools' functions, call, parallel, failed and json")
		},
		OnMaxSteps: func(*starlark.Thread) {
			s.stop(bound("steps", "the script ran more than %d steps", s.bounds.Steps))
		},
	}
	s.thread.SetMaxExecutionSteps(uint64(s.bounds.Steps))
	stopAfter := context.AfterFunc(s.ctx, s.ended)
	defer stopAfter()
	watched := make(chan struct{})
	defer close(watched)
	go s.watchMemory(watched)

	globals, err := starlark.ExecFileOptions(fileOptions, s.thread, "script", src, s.predeclared())
	if err == nil {
		err = s.stoppedErr() // a bound passed after its last step: the memory watchdog, a last print
	}
	if err != nil {
		return s.failed(err)
	}
	out := map[string]any{}
	if v, ok := globals["result"]; ok && v != starlark.None {
		if err := tooDeep("output", "the result", v); err != nil {
			return s.failed(err)
		}
		enc, err := encode(v)
		if err != nil {
			return s.failed(toolhost.Errorf(toolhost.CodeValidation, "code: result: %v", err))
		}
		out["result"] = json.RawMessage(enc)
	}
	if s.printed.Len() > 0 {
		out["printed"] = s.printed.String()
	}
	text := compactJSON(out)
	// As the host will return it too: redaction may make it longer.
	shown, _ := redact.String(string(text))
	if n := max(len(text), len(shown)); n > s.bounds.Output {
		return s.failed(bound("output", "the script returned %d bytes, more than %d", n, s.bounds.Output))
	}
	var structured map[string]any
	_ = json.Unmarshal(text, &structured)
	return &toolhost.Result{OK: true, Stdout: string(text), Meta: map[string]any{toolhost.MetaStructuredContent: structured}}
}

// compactJSON is v as JSON on one line, "<", ">" and "&" as they are: what
// the model reads, as short as it can be.
func compactJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a map of a RawMessage from Starlark's json.encode and a string
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// bound is the error of a script that reached one of its bounds: policy,
// its message naming the bound.
func bound(name, format string, args ...any) error {
	return toolhost.Errorf(toolhost.CodePolicy, "code: %s: %s", name, fmt.Sprintf(format, args...))
}

// stop stops the script for err, unless it was stopped already: its
// thread ends at its next step, its calls in flight are cancelled.
func (s *script) stop(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped == nil {
		s.stopped = err
		s.thread.Cancel(err.Error())
		s.cancel()
	}
}

// ended stops the script if its deadline is done: for the timeout if
// its time is up, else for the cancellation of its call. Its time is up
// when the clock says so, though the deadline's timer may not have fired
// yet: a call whose own timer fired first (a plugin's) returns at the
// deadline.
func (s *script) ended() {
	dl, _ := s.deadline.Deadline()
	switch {
	case errors.Is(s.deadline.Err(), context.DeadlineExceeded) || !time.Now().Before(dl):
		s.stop(toolhost.Errorf(toolhost.CodeTimeout, "code: timeout: the script ran longer than %v", s.bounds.Timeout))
	case s.deadline.Err() != nil:
		s.stop(toolhost.Errorf(toolhost.CodeCancelled, "code: the script's call was cancelled"))
	}
}

// stoppedErr is why the script was stopped, or nil. A deadline done
// stops it here too, the function that watches for it may not have run
// yet: a call that returned because the time was up, or a script that
// ended after it, is never a success.
func (s *script) stoppedErr() error {
	s.ended()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// failed is run_script's result when the script fails: the bound it
// reached, or its own error (a syntax error is validation, a runtime one
// tool_exec), with what it printed.
func (s *script) failed(err error) *toolhost.Result {
	if stop := s.stoppedErr(); stop != nil {
		err = stop
	}
	var te *toolhost.Error
	var ev *starlark.EvalError
	switch {
	case errors.As(err, &te):
	case errors.As(err, &ev):
		err = toolhost.Errorf(toolhost.CodeToolExec, "code: %s", ev.Backtrace())
	default: // it did not parse or resolve
		err = toolhost.Errorf(toolhost.CodeValidation, "code: %v", err)
	}
	res := toolhost.ErrorResult(err)
	res.Error.Message = cutMessage(res.Error.Message, s.bounds.Output)
	res.Stdout = s.printed.String()
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

// print keeps what the script prints, up to the output bound.
func (s *script) print(_ *starlark.Thread, msg string) {
	if s.printed.Len()+len(msg)+1 > s.bounds.Output {
		s.stop(bound("output", "the script printed more than %d bytes", s.bounds.Output))
		return
	}
	s.printed.WriteString(msg)
	s.printed.WriteByte('\n')
}

// watchMemory stops the script when the host's heap has grown by more
// than the memory bound since the script started, until done is closed.
// Starlark counts no allocations, so this is what bounds a script's
// memory: coarse (it sees the whole process, and what one step allocates
// before the next check), but it stops a script that keeps growing.
func (s *script) watchMemory(done <-chan struct{}) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	t := time.NewTicker(memoryEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if grown := int64(sample[0].Value.Uint64()) - int64(base); grown > s.bounds.Memory {
			s.stop(bound("memory", "the script grew the heap by more than %d bytes", s.bounds.Memory))
			return
		}
	}
}

// listTools finds the tools the caller may call, those of its role's
// deferred groups included, but the code group's.
func (s *script) listTools() error {
	q := host.ToolQuery{Agent: s.caller.AgentID, Unloaded: true}
	if q.Agent == "" {
		q.Role = s.caller.Role
	}
	list, err := s.svc.Tools(q)
	if err != nil {
		return err
	}
	s.tools = map[string]bool{}
	var names []string
	for _, d := range list.Tools {
		if list.Meta[d.Function.Name].Group != host.CodeGroup {
			s.tools[d.Function.Name] = true
			names = append(names, d.Function.Name)
		}
	}
	s.fns = codemode.Functions(names)
	return nil
}

// predeclared are the script's globals: a function per tool, call,
// parallel, failed, json, and str, repr and print bounded in depth.
func (s *script) predeclared() starlark.StringDict {
	d := shallowBuiltins()
	for fn, tool := range s.fns {
		d[fn] = starlark.NewBuiltin(fn, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) > 0 {
				return nil, fmt.Errorf("%s: takes its arguments by name, as %s(name = value)", b.Name(), b.Name())
			}
			return s.callOne(tool, kwargs)
		})
	}
	d["call"] = starlark.NewBuiltin("call", s.callBuiltin)
	d["parallel"] = starlark.NewBuiltin("parallel", s.parallel)
	d["failed"] = starlark.NewBuiltin("failed", failedBuiltin)
	return d
}
