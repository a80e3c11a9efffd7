package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"go.opentelemetry.io/otel/trace"
)

// Request is what a tool's handler receives.
type Request[In any] struct {
	// Args are the decoded, validated arguments.
	Args In
	// Call carries the call id, the agent, its role, session and workspace.
	Call CallContext
	// RawArgs are the arguments as the host sent them.
	RawArgs json.RawMessage

	progress toolhost.Progress
	output   *callOutput   // Stdout and Stderr
	traceID  trace.TraceID // the host's trace of a traced call
}

// Logger returns the plugin's logger (Logger) with the call's id on every
// line, and its trace id when the host traces it, so that the host's log
// ties the line to its call.
func (r *Request[In]) Logger() hclog.Logger { return callLogger(r.Call.CallID, r.traceID) }

// callLogger is Logger with a call's id, and its trace's when valid.
func callLogger(callID string, traceID trace.TraceID) hclog.Logger {
	if traceID.IsValid() {
		return Logger().With("call_id", callID, "trace_id", traceID.String())
	}
	return Logger().With("call_id", callID)
}

// progressEvery is the least time between two progress reports a handler
// sends; of the ones in between, the newest is sent when it has passed.
const progressEvery = 50 * time.Millisecond

// Progress reports how far the call is: done of total (total 0 when not
// known) and a message, such as the last line of a command's output. It
// costs nothing when the caller asked for no progress. At most one report
// goes per 50 ms: of reports coming sooner, the newest is sent when the
// interval ends; a final one (done ≥ total > 0) goes at once.
func (r *Request[In]) Progress(done, total float64, message string) {
	if r.progress != nil {
		r.progress(done, total, message)
	}
}

// Handler runs one call of a tool. It returns a [Result], or an error which
// fails the call (see [Errorf] for choosing its code).
type Handler[In any] func(ctx context.Context, req *Request[In]) (*Result, error)

// Tool is one tool of a group; build it with [NewTool].
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

// NeedsAgent declares that the tool must be called as an agent: the host
// refuses a call without an agent id it knows.
func NeedsAgent() ToolOption { return func(s *toolhost.ToolSpec) { s.NeedsAgent = true } }

// NeedsConversation declares that the tool works on the calling agent's
// conversation, which only agents the runtime runs have (see
// [toolhost.ToolSpec]).
func NeedsConversation() ToolOption { return func(s *toolhost.ToolSpec) { s.NeedsConversation = true } }

// Title gives the tool a human-readable name, which MCP clients show.
func Title(title string) ToolOption { return func(s *toolhost.ToolSpec) { s.Title = title } }

// ReadOnly says the tool changes nothing (MCP's readOnlyHint): clients may
// call it without asking.
func ReadOnly() ToolOption { return hint("readOnlyHint") }

// Destructive says the tool may change or delete what exists (MCP's
// destructiveHint), not only add.
func Destructive() ToolOption { return hint("destructiveHint") }

// Idempotent says calling the tool again with the same arguments changes
// nothing more (MCP's idempotentHint).
func Idempotent() ToolOption { return hint("idempotentHint") }

// OpenWorld says the tool reaches beyond the host, such as the web (MCP's
// openWorldHint).
func OpenWorld() ToolOption { return hint("openWorldHint") }

// Additive says the tool only adds (a record, a message, a file of its
// own): it is neither read-only nor destructive, and not open world.
func Additive() ToolOption { return hint("") }

// hint sets one of MCP's tool annotations. A tool with any of these options
// states all four hints, the ones not given false: a client then reads, say,
// a read-only tool that is not OpenWorld as working on the host alone
// (MCP's defaults, for a tool with no annotations, are destructive and open
// world).
func hint(name string) ToolOption {
	return func(s *toolhost.ToolSpec) {
		a := map[string]bool{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}
		_ = json.Unmarshal(s.Annotations, &a) // the hints set before, if any
		if name != "" {
			a[name] = true
		}
		s.Annotations, _ = json.Marshal(a)
	}
}

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
		out := &callOutput{to: toolhost.OutputFrom(ctx)}
		res, err := h(ctx, &Request[In]{Args: in, Call: req.Context, RawArgs: req.Arguments,
			progress: toolhost.ProgressFrom(ctx).Throttle(progressEvery), output: out, traceID: trace.SpanContextFromContext(ctx).TraceID()})
		if res != nil {
			out.into(res)
		}
		return res, err
	}
	return t
}

// StructuredHandler runs one call of a tool with structured output: it
// returns the output value, or an error which fails the call.
type StructuredHandler[In, Out any] func(ctx context.Context, req *Request[In]) (Out, error)

// NewStructuredTool makes a tool like [NewTool] whose output is a value of Out,
// a struct (or a map): Out's JSON schema is the tool's output schema (MCP's
// outputSchema), and each result carries the value as structured content
// ([toolhost.MetaStructuredContent]) and, for clients and models that read
// text, as indented JSON in its stdout.
func NewStructuredTool[In, Out any](name, description string, h StructuredHandler[In, Out], opts ...ToolOption) Tool {
	t := NewTool(name, description, func(ctx context.Context, req *Request[In]) (*Result, error) {
		out, err := h(ctx, req)
		if err != nil {
			return nil, err
		}
		return Structured(out)
	}, opts...)
	if t.err != nil {
		return t
	}
	schema, err := jsonschema.For[Out](nil)
	if err == nil && schema.Type != "object" {
		err = fmt.Errorf("the output type %T is not a struct or a map: MCP's outputSchema is an object", *new(Out))
	}
	if err == nil {
		t.spec.OutputSchema, err = json.Marshal(schema)
	}
	if err != nil {
		t.err = fmt.Errorf("sdk: tool %s: output schema: %w", name, err)
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
			callLogger(req.Context.CallID, trace.SpanContextFromContext(ctx).TraceID()).Error("tool panicked", "tool", t.spec.Name, "panic", p, "stack", string(debug.Stack()))
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
