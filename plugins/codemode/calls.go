package codemode

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/toolhost/toolhost"
	starjson "go.starlark.net/lib/json"
	"go.starlark.net/starlark"
)

// called is one tool call a script asked for: its tool and its arguments
// as JSON.
type called struct {
	tool string
	args string
}

// callOne makes one call of tool with the keyword arguments kwargs.
func (s *script) callOne(tool string, kwargs []starlark.Tuple) (starlark.Value, error) {
	c, err := s.prepare(tool, kwargs)
	if err != nil {
		return nil, err
	}
	if err := s.count(1); err != nil {
		return nil, err
	}
	return s.value(s.do(c))
}

// callBuiltin is call("tool", name = value, …): a call of any tool the
// caller may call, whatever its function's name.
func (s *script) callBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var tool string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, nil, 1, &tool); err != nil {
		return nil, err
	}
	return s.callOne(tool, kwargs)
}

// parallel is parallel([(tool, {name: value, …}), …]): the calls run at
// once, at most the parallel bound of them at a time, each through the
// pipeline as any other; their results come back in order. A tool is
// named by its name or given as its function.
func (s *script) parallel(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var list starlark.Iterable
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &list); err != nil {
		return nil, err
	}
	var calls []called
	it := list.Iterate()
	defer it.Done()
	var x starlark.Value
	for i := 0; it.Next(&x); i++ {
		pair, ok := x.(starlark.Indexable)
		if !ok || pair.Len() != 2 {
			return nil, fmt.Errorf("parallel: item %d: want a pair (tool, {arguments}), not %s", i, x.Type())
		}
		tool, err := s.toolOf(pair.Index(0))
		if err != nil {
			return nil, fmt.Errorf("parallel: item %d: %v", i, err)
		}
		d, ok := pair.Index(1).(*starlark.Dict)
		if !ok {
			return nil, fmt.Errorf("parallel: item %d: the arguments are a dict, not %s", i, pair.Index(1).Type())
		}
		var kw []starlark.Tuple
		for _, item := range d.Items() {
			kw = append(kw, item)
		}
		c, err := s.prepare(tool, kw)
		if err != nil {
			return nil, fmt.Errorf("parallel: item %d: %v", i, err)
		}
		calls = append(calls, c)
	}
	if err := s.count(len(calls)); err != nil {
		return nil, err
	}
	results := make([]json.RawMessage, len(calls))
	sem := make(chan struct{}, s.bounds.Parallel)
	var wg sync.WaitGroup
	for i, c := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i] = s.do(c)
		})
	}
	wg.Wait()
	out := make([]starlark.Value, len(calls))
	for i := range calls {
		v, err := s.value(results[i])
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return starlark.NewList(out), nil
}

// toolOf is the tool a parallel() item names: by its name (a string) or
// its function.
func (s *script) toolOf(v starlark.Value) (string, error) {
	switch v := v.(type) {
	case starlark.String:
		return string(v), nil
	case *starlark.Builtin:
		if t, ok := s.fns[v.Name()]; ok {
			return t, nil
		}
	}
	return "", fmt.Errorf("%s is not a tool: name one by its name or its function", v)
}

// prepare checks that tool is the caller's and encodes its arguments. A
// tool outside the caller's tools is a script error, as a function that
// does not exist would be.
func (s *script) prepare(tool string, kwargs []starlark.Tuple) (called, error) {
	if !s.tools[tool] {
		return called{}, fmt.Errorf("%q is not one of your tools", tool)
	}
	d := starlark.NewDict(len(kwargs))
	for _, kv := range kwargs {
		if _, ok := kv[0].(starlark.String); !ok {
			return called{}, fmt.Errorf("%s: argument names are strings, not %s", tool, kv[0].Type())
		}
		if err := d.SetKey(kv[0], kv[1]); err != nil {
			return called{}, err
		}
	}
	args, err := encode(d)
	if err != nil {
		return called{}, fmt.Errorf("%s: arguments: %v", tool, err)
	}
	if len(args) > maxArgs {
		return called{}, fmt.Errorf("%s: arguments: %d bytes as JSON, more than %d", tool, len(args), maxArgs)
	}
	return called{tool: tool, args: args}, nil
}

// count takes n calls from the script's calls bound, or stops the script
// when they are more than it has left. The host counts them again.
func (s *script) count(n int) error {
	if used := s.calls.Add(int64(n)); used > int64(s.bounds.Calls) {
		err := bound("calls", "the script made more than %d tool calls", s.bounds.Calls)
		s.stop(err)
		return err
	}
	return nil
}

// do asks the host to make a call, and waits for what it returns to the
// script.
func (s *script) do(c called) json.RawMessage {
	return s.conn.call(c.tool, c.args)
}

// value is what a call returns to the script, decoded from the host's
// JSON. A script stopped meanwhile stops here.
func (s *script) value(v json.RawMessage) (starlark.Value, error) {
	if stop := s.stoppedErr(); stop != nil {
		return nil, stop
	}
	return decode(v)
}

// callValue is what a call returns to a script, as JSON: the structured
// content of a result that has it, else its text; the error of a call
// that failed, refused or not, as {"error": {"code", "message"}}, and
// "output" when the tool wrote some (a command that exited non-zero).
func callValue(res *toolhost.Result, err error) json.RawMessage {
	type failure struct {
		Error  toolhost.ErrorInfo `json:"error"`
		Output string             `json:"output,omitempty"`
	}
	var v any
	switch {
	case err != nil:
		info := toolhost.InfoOf(err)
		v = failure{Error: toolhost.ErrorInfo{Code: info.Code, Message: info.Message}}
	case !res.OK:
		info := res.Error
		if info == nil {
			info = &toolhost.ErrorInfo{Code: toolhost.CodeToolExec, Message: "the tool failed"}
		}
		v = failure{Error: toolhost.ErrorInfo{Code: info.Code, Message: info.Message}, Output: res.Stdout}
	default:
		v = res.Stdout
		if sc, ok := res.Meta[toolhost.MetaStructuredContent]; ok {
			v = sc
		}
	}
	out, merr := json.Marshal(v)
	if merr != nil {
		out, _ = json.Marshal(failure{Error: toolhost.ErrorInfo{Code: toolhost.CodeInternal, Message: "the result is not JSON: " + merr.Error()}})
	}
	return out
}

// failedBuiltin is failed(value): whether value is a failed call's
// ({"error": {"code": …, "message": …}}).
func failedBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return starlark.False, nil
	}
	e, found, _ := d.Get(starlark.String("error"))
	if !found {
		return starlark.False, nil
	}
	ed, ok := e.(*starlark.Dict)
	if !ok {
		return starlark.False, nil
	}
	_, found, _ = ed.Get(starlark.String("code"))
	return starlark.Bool(found), nil
}

// encode is a Starlark value as JSON (Starlark's json.encode).
func encode(v starlark.Value) (string, error) {
	out, err := starlark.Call(&starlark.Thread{Name: "encode"}, starjson.Module.Members["encode"], starlark.Tuple{v}, nil)
	if err != nil {
		return "", err
	}
	return string(out.(starlark.String)), nil
}

// decode is a JSON text as a Starlark value (Starlark's json.decode).
func decode(text json.RawMessage) (starlark.Value, error) {
	return starlark.Call(&starlark.Thread{Name: "decode"}, starjson.Module.Members["decode"], starlark.Tuple{starlark.String(text)}, nil)
}
