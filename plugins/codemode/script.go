package codemode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/rules"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// fileOptions let a script loop and branch at its top level (result = …
// is set there) and use sets; recursion stays off.
var fileOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}

// script is one run of run_script's interpreter, in the runner process:
// its calls and what it prints go to the host over conn.
type script struct {
	conn   *conn
	bounds rules.CodeBounds
	thread *starlark.Thread
	tools  map[string]bool   // the tools it may call, by name
	fns    map[string]string // its functions' names, to the tools'

	calls   atomic.Int64
	mu      sync.Mutex
	printed strings.Builder // what it printed, as the host keeps it too
	// stopped is why the script was stopped, the first reason only: a
	// *toolhost.Error naming the bound.
	stopped error
}

// interpret runs the script of start and returns the encoded value of its
// result ("" for none), or why it failed.
func interpret(c *conn, start *startMsg) (string, error) {
	s := &script{conn: c, bounds: start.Bounds, tools: map[string]bool{}, fns: start.Functions}
	for _, t := range start.Tools {
		s.tools[t] = true
	}
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
	globals, err := starlark.ExecFileOptions(fileOptions, s.thread, "script", start.Script, s.predeclared())
	if err == nil {
		err = s.stoppedErr() // a bound passed after its last step: a last print
	}
	if err != nil {
		return "", s.failed(err)
	}
	v, ok := globals["result"]
	if !ok || v == starlark.None {
		return "", nil
	}
	if err := tooDeep("output", "the result", v); err != nil {
		return "", err
	}
	enc, err := encode(v)
	if err != nil {
		return "", toolhost.Errorf(toolhost.CodeValidation, "code: result: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkReply(reply(json.RawMessage(enc), s.printed.String()), s.bounds.Output); err != nil {
		return "", err
	}
	return enc, nil
}

// bound is the error of a script that reached one of its bounds: policy,
// its message naming the bound.
func bound(name, format string, args ...any) error {
	return toolhost.Errorf(toolhost.CodePolicy, "code: %s: %s", name, fmt.Sprintf(format, args...))
}

// stop stops the script for err, unless it was stopped already: its
// thread ends at its next step.
func (s *script) stop(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped == nil {
		s.stopped = err
		s.thread.Cancel(err.Error())
	}
}

// stoppedErr is why the script was stopped, or nil.
func (s *script) stoppedErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// failed is the error of a script that fails: the bound it reached, or
// its own error (a syntax error is validation, a runtime one tool_exec).
func (s *script) failed(err error) error {
	if stop := s.stoppedErr(); stop != nil {
		return stop
	}
	var te *toolhost.Error
	var ev *starlark.EvalError
	switch {
	case errors.As(err, &te):
		return err
	case errors.As(err, &ev):
		return toolhost.Errorf(toolhost.CodeToolExec, "code: %s", ev.Backtrace())
	default: // it did not parse or resolve
		return toolhost.Errorf(toolhost.CodeValidation, "code: %v", err)
	}
}

// print sends what the script prints to the host, up to the output
// bound.
func (s *script) print(_ *starlark.Thread, msg string) {
	s.mu.Lock()
	over := s.printed.Len()+len(msg)+1 > s.bounds.Output
	if !over {
		s.printed.WriteString(msg)
		s.printed.WriteByte('\n')
	}
	s.mu.Unlock()
	if over {
		s.stop(printedTooMuch(s.bounds.Output))
		return
	}
	s.conn.send(&runnerMsg{Print: &msg})
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
