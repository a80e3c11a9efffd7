package host

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/output"
	"github.com/toolhost/toolhost/redact"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Call runs one tool call through the execution pipeline, the one every
// caller uses (CLI, HTTP, MCP, agent loop):
//
//  1. the caller's role decides: the role of Context.AgentID, else the role
//     named by Context.Role, else (no agent, no role: an operator) every
//     group under the global tools policy. A tool outside it fails with
//     tool_not_available naming the tool and the role; a tool no group
//     provides with unknown_tool;
//  2. a call id the caller chose runs once: a repeat returns the stored
//     result (also after a restart, within the idempotency window), the same
//     id with other arguments or from a caller of another role fails with
//     validation, concurrent repeats wait for the first;
//  3. a tool that needs the agent or the runtime gets them, or fails with
//     validation;
//  4. the arguments are validated against the tool's schema (validation,
//     naming the field and the rule);
//  5. the role's rules are evaluated in order, the first that matches
//     deciding: deny fails the call with policy, naming the rule; approve
//     sends it to the approver; allow ends the evaluation;
//  6. the role's call limits that count the tool each take a token from the
//     calling agent's bucket, all or none (rate_limited, saying when to
//     retry);
//  7. a tool that requires approval, or whose rule says approve, waits for
//     the [Approver] (approval_denied);
//  8. the tool runs, bounded by its timeout (timeout) and the caller's ctx
//     (cancelled); a plugin that dies fails it with plugin_exited;
//  9. secrets are redacted from the result, and its output cut to the
//     group's limits (a command's full output is saved under data_dir; an
//     MCP server's content blocks are cut in order: finishContent);
//  10. tool_call.started and exactly one tool_call.completed or
//     tool_call.failed are recorded as events, the terminal one with the
//     limits' verdicts and the rule that decided.
//
// A tool that fails is a Result with OK false; an error means the call could
// not be carried out. An empty call id is filled in and the role set.
func (h *Host) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	h.callGate.RLock()
	if h.closing.Err() != nil {
		h.callGate.RUnlock()
		return nil, toolhost.Errorf(toolhost.CodeCancelled, "the host is closed")
	}
	h.inflight.Add(1)
	h.callGate.RUnlock()
	defer h.inflight.Done()
	h.metrics.callStarted()
	c := &call{h: h, req: *req, start: time.Now(), chosenID: req.Context.CallID != ""}
	c.req.Tool = h.shownToolName(c.req.Tool)
	idErr := checkCallID(req.Context.CallID)
	if !c.chosenID || idErr != nil {
		// A refused id is not used: the refusal is recorded under a new one.
		c.chosenID, c.req.Context.CallID = false, newCallID()
	}
	if len(c.req.Arguments) == 0 {
		c.req.Arguments = json.RawMessage("{}")
	}
	if h.tracer != nil {
		var span trace.Span
		ctx, span = h.tracer.Start(ctx, "call "+c.req.Tool, trace.WithAttributes(attribute.String("gen_ai.tool.name", c.req.Tool)))
		c.traceID = span.SpanContext().TraceID().String()
		defer c.endCall(span)
	}
	_, span := c.stage(ctx, "policy")
	v, err := h.callerView(&c.req.Context)
	if err == nil {
		c.req.Context.Role = v.role
		switch {
		case toolhost.IsItemMethod(c.req.Tool): // a prompt's or a resource's (items.go)
			c.tool, err = c.item(v)
			c.found = err == nil
		default:
			if c.tool, c.found = v.tools[c.req.Tool]; !c.found {
				err = c.unavailable(v)
			}
		}
	}
	if err == nil {
		err = idErr
	}
	endStage(span, err)
	c.emitStarted()
	if err == nil && h.cfg.Audit.Mode == "strict" {
		// Nothing runs unaudited: the started event (and those before it,
		// in the same commit) is on disk before the call goes on.
		_, span := c.stage(ctx, "audit")
		if ferr := h.events.Flush(ctx); ferr != nil {
			err = toolhost.Errorf(toolhost.CodeInternal, "audit: the call's started event was not written, so it does not run: %w", ferr)
		}
		endStage(span, err)
	}
	if err == nil {
		c.res, err = c.run(ctx, v)
	}
	c.err = redactError(err)
	c.emitEnded()
	h.metrics.callEnded(c)
	return c.res, c.err
}

// maxToolNameShown is how much of a tool name longer than any tool's (at
// most 64 bytes: protocol.ValidToolName) a call keeps.
const maxToolNameShown = 64

// cutToolName bounds a caller's tool name: one longer than maxToolNameShown
// names no tool, and is kept as its first bytes and its length, so that the
// call's error, events and span do not carry (and store) whatever a caller
// sends. The "…" keeps the cut name from naming a tool.
func cutToolName(name string) string {
	if len(name) <= maxToolNameShown {
		return name
	}
	n := maxToolNameShown
	for n > 0 && !utf8.RuneStart(name[n]) {
		n--
	}
	return name[:n] + "… (" + strconv.Itoa(len(name)) + " bytes)"
}

// shownToolName is the tool name a call keeps for its error, events, span
// and metrics: a registered tool's as it is; any other redacted (a caller
// may send a secret as a tool's name, and the name leaves the host in all
// of them), then cut (cutToolName).
func (h *Host) shownToolName(name string) string {
	if _, _, ok := h.mgr.lookup(name); !ok {
		name, _ = redact.String(name)
	}
	return cutToolName(name)
}

// maxCallIDLen is the longest call id a caller may choose, in bytes.
const maxCallIDLen = 256

// checkCallID refuses a caller-chosen call id that is too long or holds
// invalid UTF-8 or a control character: the id goes into the audit events,
// the stored results and the plugin's request, where such text breaks
// things or hides what it says. It refuses one that holds what the
// redactor takes for a secret too: the id is how its caller finds the call
// again, so it is not rewritten, and its refusal does not repeat it.
// Empty (the host chooses) is fine.
func checkCallID(id string) error {
	switch {
	case len(id) > maxCallIDLen:
		return toolhost.Errorf(toolhost.CodeValidation, "call_id: %d bytes; at most %d", len(id), maxCallIDLen)
	case !utf8.ValidString(id):
		return toolhost.Errorf(toolhost.CodeValidation, "call_id: not valid UTF-8")
	}
	for i, r := range id {
		if unicode.IsControl(r) {
			return toolhost.Errorf(toolhost.CodeValidation, "call_id: a control character (%U) at byte %d", r, i)
		}
	}
	if _, secret := redact.String(id); secret {
		return toolhost.Errorf(toolhost.CodeValidation, "call_id: holds what looks like a secret (a key, token or password); choose an id that does not")
	}
	return nil
}

// call is one call going through the pipeline.
type call struct {
	h        *Host
	req      toolhost.CallRequest // a copy: the pipeline fills in the id and role
	start    time.Time
	chosenID bool // the caller chose the call id, so it may repeat
	tool     viewTool
	found    bool
	res      *toolhost.Result
	err      error
	redacted bool
	replayed bool   // the outcome is an earlier run's: this call ran nothing
	traceID  string // the trace the call runs in, when traced

	// limits are the verdicts of the call limits that counted the call
	// (takeLimits), for its terminal event.
	limits []map[string]any
	// approval is what the approver decided, for the terminal event; nil
	// when the call asked none.
	approval map[string]any
	// rule is the role's rule that decided the call, if one matched.
	rule *rules.Compiled
	// args are the arguments as validation decoded them, for the rules.
	args map[string]any
	// spool takes the output of a tool that keeps its output's end as it
	// is written (spool.go); nil for other tools.
	spool *spool
}

// A claim on a call id (see flights.begin) is stale once the call's
// timeout and staleGrace have passed since it was made; for a tool without
// a timeout, defaultStale stands in for it.
const (
	staleGrace   = 30 * time.Second
	defaultStale = 10 * time.Minute
)

// unavailable is the error of a call of a tool outside the caller's view.
func (c *call) unavailable(v *view) error {
	if _, _, exists := c.h.mgr.lookup(c.req.Tool); !exists {
		return toolhost.Errorf(toolhost.CodeUnknownTool, "unknown tool %q: no group provides it", c.req.Tool)
	}
	if v.role == "" {
		return toolhost.Errorf(toolhost.CodeToolNotAvailable, "tool %q is not available: the tools policy hides it", c.req.Tool)
	}
	if i, ok := v.rules.hiddenBy(c.req.Tool); ok {
		return c.hiddenByRule(v.rules, i)
	}
	return toolhost.Errorf(toolhost.CodeToolNotAvailable, "tool %q is not available to role %q", c.req.Tool, v.role)
}

// run takes an available tool's call on: a chosen call id's replay,
// validation, rules, call limits, approval and dispatch.
func (c *call) run(ctx context.Context, v *view) (res *toolhost.Result, err error) {
	h := c.h
	if c.chosenID {
		f, leader, err := h.flights.begin(ctx, h, &c.req, v.role, cmp.Or(c.timeout(), defaultStale)+staleGrace)
		if !leader || err != nil {
			c.replayed = !leader && err == nil
			return f.outcome(err)
		}
		defer func() { h.flights.end(h, f, res, err) }()
	}
	if err = c.validate(ctx); err != nil {
		return nil, err
	}
	if err := c.checkRules(ctx, v.rules); err != nil {
		return nil, err
	}
	if len(v.limits) > 0 {
		if err := c.takeLimits(ctx, v.limits); err != nil {
			return nil, err
		}
	}
	if err := c.approve(ctx); err != nil {
		return nil, err
	}
	defer func() { c.spool.close() }() // dispatch makes it
	if res, err = c.dispatch(ctx); err != nil {
		return nil, err
	}
	return c.finish(ctx, res), nil
}

// validate refuses a call without what its tool needs and checks the
// arguments against its schema.
func (c *call) validate(ctx context.Context) (err error) {
	_, span := c.stage(ctx, "validation")
	defer func() { endStage(span, err) }()
	if err = c.needs(); err != nil {
		return err
	}
	c.args, err = c.tool.group.checks[c.tool.spec.Name].decode(c.req.Arguments)
	return err
}

// needs refuses a call that lacks what its tool needs: a calling agent, or
// a conversation.
func (c *call) needs() error {
	spec := c.tool.spec
	if spec.NeedsAgent {
		if _, ok := c.h.Agents().Get(c.req.Context.AgentID); !ok {
			return toolhost.Errorf(toolhost.CodeValidation, "tool %s needs the calling agent: call it as an agent (agent id)", spec.Name)
		}
	}
	if spec.NeedsConversation {
		if a, _ := c.h.Agents().Get(c.req.Context.AgentID); a.Kind != store.AgentRuntime {
			return toolhost.Errorf(toolhost.CodeToolNotAvailable, "tool %s works on a conversation, which only agents the runtime runs have; the caller is no such agent (an MCP client holds its own)", spec.Name)
		}
	}
	return nil
}

// approve asks the approver when the role's rule that matched says
// approve, or when the tool, its group's config or its own config requires
// approval, but for a read-only tool (trustedReadOnly) when the executor
// approves those (approve = "read_only"); a modification is validated
// again. A rule's allow does not waive the tool's own approval.
func (c *call) approve(ctx context.Context) (err error) {
	g, spec := c.tool.group, c.tool.spec
	need := spec.RequiresApproval
	if g.conf != nil {
		need = need || g.conf.RequiresApproval || g.conf.Tools[spec.Name].RequiresApproval
	}
	if !c.ruleAsks() && (!need || c.h.cfg.Executor.Approve == "read_only" && trustedReadOnly(g, spec)) {
		return nil
	}
	ctx, span := c.stage(ctx, "approval")
	defer func() { endStage(span, err) }()
	req := ApprovalRequest{
		CallID: c.req.Context.CallID, Tool: spec.Name, Group: g.Spec.ID, AgentID: c.req.Context.AgentID,
		Role: c.req.Context.Role, Credential: c.req.Context.Credential, Requested: time.Now(),
	}
	req.Arguments, req.ArgumentsSize, req.ArgumentsSHA256 = approvalArguments(c.req.Arguments)
	if c.ruleAsks() {
		req.Rule, req.RuleReason = c.rule.Name, c.rule.Reason
	}
	release, err := c.h.pending.hold(req.Credential, req.ArgumentsSize)
	if err != nil {
		return fmt.Errorf("call of %s%s refused: %w", spec.Name, c.sentBy(), err)
	}
	d, err := c.h.approver.Approve(ctx, req)
	release()
	if err == nil {
		c.approval = map[string]any{"decision": string(d.Kind), "reason": d.Reason}
		if d.By != "" {
			c.approval["by"] = d.By
		}
	}
	switch {
	case err != nil:
		return toolhost.Errorf(toolhost.CodeOf(err), "approval of %s%s failed: %w", spec.Name, c.sentBy(), err)
	case d.Kind == Approve:
		if argumentsDigest(c.req.Arguments) != req.ArgumentsSHA256 {
			return toolhost.Errorf(toolhost.CodeInternal, "call of %s: its arguments changed while it waited for its approval: not run", spec.Name)
		}
		return nil
	case d.Kind == Modify:
		if err := g.checks[spec.Name].check(d.Arguments); err != nil {
			return toolhost.Errorf(toolhost.CodeValidation, "modified by the approver: %w", err)
		}
		c.req.Arguments = d.Arguments
		return nil
	}
	reason := d.Reason
	if reason == "" {
		reason = "no reason given"
	}
	return toolhost.Errorf(toolhost.CodeApprovalDenied, "call of %s%s denied: %s", spec.Name, c.sentBy(), reason)
}

// timeout is the call's bound: the tool's config, else the tool's spec, else
// its group's config, else the global default.
func (c *call) timeout() time.Duration {
	g, spec := c.tool.group, c.tool.spec
	var group, tool time.Duration
	if g.conf != nil {
		group, tool = g.conf.Limits.Timeout, g.conf.Tools[spec.Name].Timeout
	}
	for _, d := range []time.Duration{tool, spec.Timeout, group} {
		if d > 0 {
			return d
		}
	}
	return c.h.cfg.Limits.Timeout
}

// dispatch sends the call to its group, bounded by the timeout, the caller's
// ctx and the host's life.
func (c *call) dispatch(ctx context.Context) (res *toolhost.Result, err error) {
	ctx, span := c.stage(ctx, "dispatch")
	defer func() { endStage(span, err) }()
	// The timeout cancels the call rather than setting a gRPC deadline: the
	// plugin's ctx ends all the same, without a deadline's cost on every call.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timeout := c.timeout()
	var due time.Time // when the timeout ends the call
	if timeout > 0 {
		due = time.Now().Add(timeout)
		t := time.AfterFunc(timeout, func() { cancel(c.timedOut(timeout)) })
		defer t.Stop()
	}
	defer context.AfterFunc(c.h.closing, func() { cancel(errHostClosing) })()
	var ended atomic.Bool
	defer ended.Store(true)
	if p := toolhost.ProgressFrom(ctx); p != nil {
		ctx = toolhost.WithProgress(ctx, c.progress(p, &ended))
	}
	if a := toolhost.AskerFrom(ctx); a != nil {
		ctx = toolhost.WithAsker(ctx, c.asker(a, &ended))
	}
	if w := toolhost.ResourceWatcherFrom(ctx); w != nil {
		ctx = toolhost.WithResourceWatcher(ctx, offeredWatcher{h: c.h, role: c.req.Context.Role, group: c.tool.group.Spec.ID, w: w})
	}
	if c.tool.spec.OutputTail {
		_, bytes := c.outputLimits()
		c.spool = newSpool(c.h.outputsDir(), bytes)
		ctx = toolhost.WithOutput(ctx, c.spool.write)
	}
	res, err = c.tool.group.Provider.Call(ctx, &c.req)
	// An answer that came after the caller's deadline or the timeout is
	// late, though the timer that ends ctx has yet to fire: the plugin, whose
	// ctx has the caller's deadline, may answer first.
	switch lateBy(ctx, time.Now(), due) {
	case pastDeadline:
		cancel(context.DeadlineExceeded)
	case pastTimeout:
		cancel(c.timedOut(timeout))
	}
	// A call whose context ended is a timeout or a cancellation, even when
	// the plugin's answer (to its own cancelled context) won the race.
	if ctx.Err() != nil && !errors.Is(err, toolhost.ErrPluginExited) {
		cause := context.Cause(ctx)
		return nil, toolhost.Errorf(toolhost.CodeOf(cause), "call %s: %w", c.req.Context.CallID, cause)
	}
	if err == nil && res == nil {
		err = toolhost.Errorf(toolhost.CodeInternal, "group %s returned no result", c.tool.group.Spec.ID)
	}
	if err == nil && !res.OK && res.Error == nil {
		// A failure must say what failed: the pipeline, its events and
		// every front read the error of a result that is not ok.
		r := *res
		r.Error = &toolhost.ErrorInfo{Code: toolhost.CodeToolExec, Message: fmt.Sprintf("tool %s failed without saying why (its result has ok false and no error)", c.req.Tool)}
		res = &r
	}
	return res, err
}

// timedOut is the error of the call ended by its timeout.
func (c *call) timedOut(timeout time.Duration) error {
	return toolhost.Errorf(toolhost.CodeTimeout, "tool %s timed out after %s", c.req.Tool, timeout)
}

// late says what a call answered too late passed first.
type late int

const (
	inTime       late = iota
	pastDeadline      // the caller's deadline (ctx's)
	pastTimeout       // the tool's timeout
)

// lateBy is what a call answered at now passed first: the caller's deadline
// (ctx's) or the timeout (due then; zero: none), or neither.
func lateBy(ctx context.Context, now, due time.Time) late {
	deadline, ok := ctx.Deadline()
	if ok && now.Before(deadline) {
		ok = false
	}
	switch {
	case !due.IsZero() && !now.Before(due) && (!ok || due.Before(deadline)):
		return pastTimeout
	case ok:
		return pastDeadline
	}
	return inTime
}

var errHostClosing = toolhost.Errorf(toolhost.CodeCancelled, "the host is closing")

const (
	// progressEvery is the least time between two progress reports of a
	// call that the host passes on; a module reporting more often is
	// thinned, whatever its SDK does.
	progressEvery = 50 * time.Millisecond
	// maxProgressMessage bounds a progress message, in bytes.
	maxProgressMessage = 1024
)

// progress wraps the caller's Progress for one call. Reports are thinned
// to one per progressEvery (Progress.Throttle) and dropped after the call
// ended; each message is redacted and cut to maxProgressMessage (keeping the end),
// recorded as a tool_call.progress event, and passed on.
func (c *call) progress(p toolhost.Progress, ended *atomic.Bool) toolhost.Progress {
	return toolhost.Progress(func(done, total float64, message string) {
		if ended.Load() {
			return
		}
		message, redacted := redact.String(message)
		message = output.Limit(message, 0, maxProgressMessage, true).Text
		payload := map[string]any{"progress": done, "message": message}
		if total > 0 {
			payload["total"] = total
		}
		if redacted {
			payload["redacted"] = true
		}
		c.h.events.Emit(c.event(store.EventCallProgress, payload))
		p(done, total, message)
	}).Throttle(progressEvery)
}

// finish redacts secrets from a result and cuts its output to the group's
// limits, working on a copy; a result with content blocks has them
// redacted and cut in order, its stdout made from them (finishContent).
// Redaction comes first, so that no cut can leave
// part of a secret visible; a command's output cut short is saved whole
// (redacted) under data_dir, its path in meta.full_output, within the
// storage quotas: when it cannot be kept, meta.full_output_not_kept says
// why, and the call succeeds all the same.
func (c *call) finish(ctx context.Context, in *toolhost.Result) *toolhost.Result {
	res := *in
	var spoolCut bool // the spool kept only the output's end: it saves the output
	if c.spool != nil {
		// The result's own output follows what the tool streamed.
		_ = c.spool.write(false, []byte(res.Stdout))
		_ = c.spool.write(true, []byte(res.Stderr))
		res.Stdout, res.Stderr, spoolCut = c.spool.text()
	}
	lines, bytes := c.outputLimits()
	var changed [3]bool
	var contentCut contentCut
	if len(res.Content) > 0 {
		// The content is the output, its text blocks stdout: redacted and
		// cut block by block, stdout made from them again.
		res.Content, res.Stdout, changed[0], contentCut = finishContent(res.Content, lines, bytes)
	} else {
		res.Stdout, changed[0] = redact.String(res.Stdout)
	}
	res.Stderr, changed[1] = redact.String(res.Stderr)
	if res.Error != nil {
		e := *res.Error
		e.Message, changed[2] = redact.String(e.Message)
		res.Error = &e
	}
	c.redacted = changed[0] || changed[1] || changed[2]
	if len(res.Meta) > 0 {
		m, mc := redact.Value(map[string]any(res.Meta))
		if mc {
			res.Meta, c.redacted = m.(map[string]any), true
		}
	}
	tail := c.tool.spec.OutputTail
	out, errs := output.Cut{Text: res.Stdout}, output.Limit(res.Stderr, lines, bytes, tail)
	if len(res.Content) == 0 { // else finishContent cut it
		out = output.Limit(res.Stdout, lines, bytes, tail)
	}
	cut := out.Text != res.Stdout || errs.Text != res.Stderr || spoolCut
	var saved, notKept string
	switch {
	case cut && spoolCut:
		saved, notKept = c.saveSpooled(ctx)
	case cut && tail:
		saved, notKept = c.saveFullOutput(ctx, res.Stdout, res.Stderr)
	}
	res.Stdout, res.Stderr = out.Text, errs.Text
	res.TruncatedLines = res.TruncatedLines || out.Lines || errs.Lines || contentCut.lines
	res.TruncatedBytes = res.TruncatedBytes || out.Bytes || errs.Bytes || spoolCut || contentCut.bytes
	if sc, ok := res.Meta[toolhost.MetaStructuredContent]; ok && bytes > 0 {
		// Structured content is held to the byte limit too: past it, the
		// result keeps the cut text alone.
		if b, err := json.Marshal(sc); err != nil || len(b) > bytes {
			res.Meta = maps.Clone(res.Meta)
			delete(res.Meta, toolhost.MetaStructuredContent)
			res.Meta[toolhost.MetaStructuredContentCut] = true
			res.TruncatedBytes = true
		}
	}
	if c.redacted || saved != "" || notKept != "" {
		res.Meta = maps.Clone(res.Meta)
		if res.Meta == nil {
			res.Meta = map[string]any{}
		}
		if c.redacted {
			res.Meta["redacted"] = true
		}
		if saved != "" {
			res.Meta["full_output"] = saved
		}
		if notKept != "" {
			res.Meta["full_output_not_kept"] = notKept
		}
	}
	return &res
}

// outputLimits are the lines and bytes a result of the call keeps of its
// stdout and of its stderr each: the group's, else the host's.
func (c *call) outputLimits() (lines, bytes int) {
	lines, bytes = c.h.cfg.Limits.MaxOutputLines, c.h.cfg.Limits.MaxOutputBytes
	if conf := c.tool.group.conf; conf != nil {
		lines, bytes = cmp.Or(conf.Limits.MaxOutputLines, lines), cmp.Or(conf.Limits.MaxOutputBytes, bytes)
	}
	return lines, bytes
}

// saveFullOutput keeps a cut output whole under data_dir/outputs, within
// the storage quotas (Host.saveOutput), and returns the file's path, or ""
// and why it was not kept.
func (c *call) saveFullOutput(ctx context.Context, stdout, stderr string) (path, notKept string) {
	data := stdout
	if stderr != "" {
		data += "\n--- stderr ---\n" + stderr
	}
	return c.keepOutput(ctx, data)
}

// keepOutput saves data, redacted, as the call's saved output.
func (c *call) keepOutput(ctx context.Context, data string) (path, notKept string) {
	path, notKept = c.h.saveOutput(ctx, c.req.Context.Role, outputName(c.req.Context.CallID), []byte(data))
	if notKept != "" {
		c.h.log.Warn("a full output was not kept", c.logIDs("reason", notKept)...)
	}
	return path, notKept
}

// outputName is the name of the file a call's cut output is saved in: a
// hash of the call id, which a caller may choose and which is data, never
// a path ("../../tmp/x" names a file in the outputs directory like any
// other id).
func outputName(callID string) string {
	sum := sha256.Sum256([]byte(callID))
	return hex.EncodeToString(sum[:16]) + ".log"
}

// redactError redacts an error's message, keeping its code.
func redactError(err error) error {
	if err == nil {
		return nil
	}
	if msg, changed := redact.String(err.Error()); changed {
		return &toolhost.Error{Code: toolhost.CodeOf(err), Message: msg, RetryAfter: toolhost.RetryAfter(err)}
	}
	return err
}

// maxEventText bounds the arguments recorded in a tool_call.started event
// and the error message in a tool_call.failed one.
const maxEventText = 4 << 10

func (c *call) event(typ string, payload map[string]any) store.Event {
	e := store.Event{Type: typ, CallID: c.req.Context.CallID, AgentID: c.req.Context.AgentID, Role: c.req.Context.Role,
		Tool: c.req.Tool, ParentID: c.req.Context.ParentID, Payload: payload}
	if c.found {
		e.Group = c.tool.group.Spec.ID
	}
	if p := c.req.Context.Principal; p != "" {
		payload["principal"] = p
	}
	if cr := c.req.Context.Credential; cr != "" {
		payload["credential"] = cr
	}
	return e
}

func (c *call) emitStarted() {
	args, redacted := redact.JSON(c.req.Arguments)
	cut := output.Limit(string(args), 0, maxEventText, false)
	payload := map[string]any{"arguments": cut.Text, "channel": c.req.Context.Channel, "run": c.h.runID, "host": c.h.hostID}
	if c.traceID != "" {
		payload["trace_id"] = c.traceID
	}
	if cut.Bytes {
		payload["arguments_truncated"] = true
	}
	if redacted {
		payload["redacted"] = true
	}
	c.h.events.Emit(c.event(store.EventCallStarted, payload))
}

// emitEnded records the call's one terminal event. A replay's says so, and
// names the call whose outcome it repeated.
func (c *call) emitEnded() {
	latency := float64(time.Since(c.start).Microseconds()) / 1e3
	if c.err == nil && c.res.OK {
		payload := map[string]any{
			"latency_ms": latency, "exit_code": c.res.ExitCode, "truncated_lines": c.res.TruncatedLines,
			"truncated_bytes": c.res.TruncatedBytes, "redacted": c.redacted,
		}
		c.markReplay(payload)
		c.markLimits(payload)
		c.markRule(payload)
		c.markApproval(payload)
		c.h.events.Emit(c.event(store.EventCallCompleted, payload))
		return
	}
	payload := map[string]any{"latency_ms": latency, "redacted": c.redacted}
	c.markReplay(payload)
	c.markLimits(payload)
	c.markRule(payload)
	c.markApproval(payload)
	code, msg := toolhost.CodeOf(c.err), ""
	if c.err != nil {
		msg = c.err.Error()
	} else {
		code, msg = c.res.Error.Code, c.res.Error.Message
		payload["exit_code"] = c.res.ExitCode
	}
	cut := output.Limit(msg, 0, maxEventText, false)
	if cut.Bytes || cut.Lines {
		payload["error_truncated"] = true
	}
	payload["error"], payload["code"], payload["error_class"] = cut.Text, code, errorClass(code)
	c.h.events.Emit(c.event(store.EventCallFailed, payload))
}

// markApproval puts the approver's decision, and who made it, into the
// terminal event's payload, when the call asked for one.
func (c *call) markApproval(payload map[string]any) {
	if c.approval != nil {
		payload["approval"] = c.approval
	}
}

// markReplay marks a replay's terminal event: replayed, and the id of the
// call that ran (the same id, chosen by the caller).
func (c *call) markReplay(payload map[string]any) {
	if c.replayed {
		payload["replayed"], payload["replay_of"] = true, c.req.Context.CallID
	}
}

// errorClass maps a code to a tool_call.failed event's error_class:
// validation, policy (rate_limited too: a call limit is the role's policy),
// the code itself for a call that failed in running
// (tool_exec, timeout, cancelled, plugin_exited, approval_denied), else
// unknown.
func errorClass(code toolhost.Code) string {
	switch code {
	case toolhost.CodeValidation, toolhost.CodeUnknownTool:
		return "validation"
	case toolhost.CodeToolNotAvailable, toolhost.CodePolicy, toolhost.CodeRateLimited:
		return "policy"
	case toolhost.CodeToolExec, toolhost.CodeTimeout, toolhost.CodeCancelled, toolhost.CodePluginExited, toolhost.CodeApprovalDenied:
		return string(code)
	}
	return "unknown"
}

// flights makes a call id the caller chose run once: concurrent repeats wait
// for the first, later ones replay its stored result.
type flights struct {
	m     sync.Map // call id → *flight
	saves chan *flight
	done  chan struct{}
}

type flight struct {
	id, hash string
	done     chan struct{}
	res      *toolhost.Result
	err      error
}

// outcome is what a repeat of the flight's call returns.
func (f *flight) outcome(err error) (*toolhost.Result, error) {
	if err != nil {
		return nil, err
	}
	if f.res == nil {
		return nil, f.err
	}
	res := *f.res
	res.Meta = maps.Clone(res.Meta)
	if res.Meta == nil {
		res.Meta = map[string]any{}
	}
	res.Meta["replayed"] = true
	return &res, nil
}

// argsHash identifies a call: its caller's role and credential, its tool
// and its arguments, whatever their key order. With the role and the
// credential in it, a call id is a credential's own: another role, or
// another token of the same role, repeating it gets a validation error,
// never the first caller's result.
func argsHash(req *toolhost.CallRequest, role string) string {
	var v any
	canon := []byte(req.Arguments)
	if json.Unmarshal(req.Arguments, &v) == nil {
		canon, _ = json.Marshal(v)
	}
	sum := sha256.Sum256(append([]byte(role+"\x00"+req.Context.Credential+"\x00"+req.Tool+"\x00"), canon...))
	return hex.EncodeToString(sum[:])
}

// begin joins the flight of the request's call id, made by a caller of role
// ("" for none). The leader runs the call; the others get its outcome once
// done (or the stored one, when the id ran before). Across hosts sharing
// the store, the leader claims the id in the store first (store.ClaimCall):
// while another host runs it, it waits for that host's result, polling,
// unless the claim is older than stale (that host died mid-call), when it
// runs the call itself.
func (fs *flights) begin(ctx context.Context, h *Host, req *toolhost.CallRequest, role string, stale time.Duration) (*flight, bool, error) {
	f := &flight{id: req.Context.CallID, hash: argsHash(req, role), done: make(chan struct{})}
	if x, loaded := fs.m.LoadOrStore(f.id, f); loaded {
		prev := x.(*flight)
		if prev.hash != f.hash {
			return prev, false, sameIDOtherArgs(f.id)
		}
		select {
		case <-prev.done:
			return prev, false, nil
		case <-ctx.Done():
			return prev, false, toolhost.Errorf(toolhost.CodeOf(ctx.Err()), "waiting for the first call %s: %w", f.id, ctx.Err())
		}
	}
	err := f.claim(ctx, h, stale)
	if err == nil && f.res == nil {
		return f, true, nil
	}
	f.err = err
	fs.m.Delete(f.id)
	close(f.done)
	return f, false, err
}

// The waits between two looks at a call another host runs: from the
// first, doubling up to the last.
const (
	claimPollFirst = 5 * time.Millisecond
	claimPollMax   = 200 * time.Millisecond
)

// claim claims the flight's call id in the store, waiting while another
// host runs it: nil with f.res nil when this host is to run the call, the
// stored result in f.res when it ran before.
func (f *flight) claim(ctx context.Context, h *Host, stale time.Duration) error {
	for wait := claimPollFirst; ; wait = min(2*wait, claimPollMax) {
		now := time.Now()
		claimed, stored, err := h.store.ClaimCall(ctx, f.id, f.hash, now.Add(-h.cfg.Executor.IdempotencyWindow), now.Add(-stale))
		switch {
		case ctx.Err() != nil:
			return toolhost.Errorf(toolhost.CodeOf(ctx.Err()), "call %s: %w", f.id, ctx.Err())
		case err != nil:
			return toolhost.Errorf(toolhost.CodeInternal, "call %s: %w", f.id, err)
		case claimed:
			return nil
		case stored.ArgsHash != f.hash:
			return sameIDOtherArgs(f.id)
		case stored.Result != nil:
			var res toolhost.Result
			if err := json.Unmarshal(stored.Result, &res); err != nil {
				return toolhost.Errorf(toolhost.CodeInternal, "call %s: its stored result: %w", f.id, err)
			}
			f.res = &res
			return nil
		}
		select { // another host runs it
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

func sameIDOtherArgs(id string) error {
	return toolhost.Errorf(toolhost.CodeValidation, "call id %s was already used for a different call (tool, arguments, or caller's role or credential)", id)
}

// end records the leader's outcome. A result is saved for replays (the
// flight stays until then); an error is not, and the id's claim is
// released, so the call may be retried.
func (fs *flights) end(h *Host, f *flight, res *toolhost.Result, err error) {
	f.res, f.err = res, err
	if res == nil {
		if rerr := h.store.ReleaseCall(context.Background(), f.id); rerr != nil {
			h.log.Error("releasing a call id", "call_id", f.id, "error", rerr)
		}
	}
	close(f.done)
	if res == nil {
		fs.m.CompareAndDelete(f.id, f)
		return
	}
	fs.saves <- f
}

// saveLoop writes finished flights' results to the store, off the calls'
// path, until saves is closed.
func (fs *flights) saveLoop(h *Host) {
	defer close(fs.done)
	for f := range fs.saves {
		b, err := json.Marshal(f.res)
		if err == nil {
			err = h.store.SaveCallResult(context.Background(), store.CallResult{CallID: f.id, ArgsHash: f.hash, Result: b, Created: time.Now()})
		}
		if err != nil {
			h.log.Error("saving a call result", "call_id", f.id, "error", err)
		}
		fs.m.CompareAndDelete(f.id, f)
	}
}

// BatchOptions say how [Host.CallBatch] runs its calls; nil means the executor
// block's settings.
type BatchOptions struct {
	// Mode is "sequential" or "concurrent".
	Mode string
	// MaxParallel bounds a concurrent batch.
	MaxParallel int
}

// BatchResult is the outcome of one call of a batch.
type BatchResult struct {
	Result *toolhost.Result
	Err    error
}

// CallBatch runs calls one after the other or concurrently (at most
// MaxParallel at once), each through [Host.Call], and returns their outcomes
// in the calls' order. Calls sharing a call id run once.
func (h *Host) CallBatch(ctx context.Context, reqs []*toolhost.CallRequest, opts *BatchOptions) []BatchResult {
	o := BatchOptions{Mode: h.cfg.Executor.Mode, MaxParallel: h.cfg.Executor.MaxParallel}
	if opts != nil {
		o = *opts
	}
	out := make([]BatchResult, len(reqs))
	if o.Mode != "concurrent" {
		for i, r := range reqs {
			out[i].Result, out[i].Err = h.Call(ctx, r)
		}
		return out
	}
	sem := make(chan struct{}, max(1, o.MaxParallel))
	var wg sync.WaitGroup
	for i, r := range reqs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i].Result, out[i].Err = h.Call(ctx, r)
		})
	}
	wg.Wait()
	return out
}
