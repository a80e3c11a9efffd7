package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolhost/toolhost"
)

// Request is what a tool's handler receives.
type Request[In any] struct {
	// Args are the decoded, validated arguments.
	Args In
	// Call carries the call id, the agent, its role, session and workspace.
	Call CallContext
	// RawArgs are the arguments as the host sent them.
	RawArgs json.RawMessage
}

// Handler runs one call of a tool. It returns a Result, or an error which
// fails the call (see Errorf for choosing its code).
type Handler[In any] func(ctx context.Context, req *Request[In]) (*Result, error)

// Tool is one tool of a group; build it with NewTool.
type Tool struct {
	spec       toolhost.ToolSpec
	resolved   *jsonschema.Resolved
	emptyValid bool // {} satisfies the schema, so a call without arguments skips validation
	run        func(ctx context.Context, req *toolhost.CallRequest) (*Result, error)
	err        error // set when the input schema could not be derived
}

// ToolOption sets one of a tool's optional properties.
type ToolOption func(*toolhost.ToolSpec)

// Optional marks the tool visible only when an allowlist names it.
func Optional() ToolOption { return func(s *toolhost.ToolSpec) { s.Optional = true } }

// RequiresApproval asks the host for an approval before each call.
func RequiresApproval() ToolOption { return func(s *toolhost.ToolSpec) { s.RequiresApproval = true } }

// Timeout bounds each call of the tool, in place of the host's default.
func Timeout(d time.Duration) ToolOption { return func(s *toolhost.ToolSpec) { s.Timeout = d } }

// NeedsAgent declares that the tool needs the calling agent in its context.
func NeedsAgent() ToolOption { return func(s *toolhost.ToolSpec) { s.NeedsAgent = true } }

// NeedsRuntime declares that the tool needs the agent runtime in its context.
func NeedsRuntime() ToolOption { return func(s *toolhost.ToolSpec) { s.NeedsRuntime = true } }

// KeepTail asks the host, when it cuts the tool's output to its limits, to
// keep the end rather than the beginning, as suits command output.
func KeepTail() ToolOption { return func(s *toolhost.ToolSpec) { s.OutputTail = true } }

// NewTool makes a tool whose input schema is derived from In, which should be
// a struct (use struct{} for a tool without arguments).
func NewTool[In any](name, description string, h Handler[In], opts ...ToolOption) Tool {
	t := Tool{spec: toolhost.ToolSpec{Name: name, Description: description}}
	for _, o := range opts {
		o(&t.spec)
	}
	schema, err := jsonschema.For[In](nil)
	if err == nil {
		t.spec.InputSchema, err = json.Marshal(schema)
	}
	if err == nil {
		t.resolved, err = schema.Resolve(nil)
	}
	if err != nil {
		t.err = fmt.Errorf("sdk: tool %s: input schema: %w", name, err)
		return t
	}
	t.emptyValid = t.resolved.Validate(map[string]any{}) == nil
	t.run = func(ctx context.Context, req *toolhost.CallRequest) (*Result, error) {
		var in In
		if err := json.Unmarshal(req.Arguments, &in); err != nil {
			return nil, toolhost.Errorf(toolhost.CodeValidation, "arguments: %v", err)
		}
		return h(ctx, &Request[In]{Args: in, Call: req.Context, RawArgs: req.Arguments})
	}
	return t
}

// Spec returns the tool's spec as the host sees it.
func (t Tool) Spec() toolhost.ToolSpec { return t.spec }

var emptyObject = []byte("{}")

// call validates the arguments against the input schema, runs the handler
// and turns whatever it returns, a panic included, into a Result.
func (t Tool) call(ctx context.Context, req *toolhost.CallRequest) (res *Result) {
	args := bytes.TrimSpace(req.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = emptyObject
	}
	if !t.emptyValid || !bytes.Equal(args, emptyObject) {
		var v any
		if err := json.Unmarshal(args, &v); err != nil {
			return toolhost.ErrorResult(toolhost.Errorf(toolhost.CodeValidation, "arguments are not JSON: %v", err))
		}
		if err := t.resolved.Validate(v); err != nil {
			return toolhost.ErrorResult(toolhost.Errorf(toolhost.CodeValidation, "arguments: %v", err))
		}
	}
	defer func() {
		if p := recover(); p != nil {
			Logger().Error("tool panicked", "tool", t.spec.Name, "panic", p, "stack", string(debug.Stack()))
			res = toolhost.ErrorResult(toolhost.Errorf(toolhost.CodeToolExec, "tool %s panicked: %v", t.spec.Name, p))
		}
	}()
	r := *req
	r.Arguments = args
	out, err := t.run(ctx, &r)
	switch {
	case err != nil && ctx.Err() != nil:
		return toolhost.ErrorResult(ctx.Err())
	case err != nil:
		if toolhost.CodeOf(err) == toolhost.CodeInternal {
			err = &toolhost.Error{Code: toolhost.CodeToolExec, Message: err.Error(), Err: err}
		}
		return toolhost.ErrorResult(err)
	case out == nil:
		return &Result{OK: true}
	}
	return out
}
