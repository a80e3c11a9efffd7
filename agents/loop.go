package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

// agent is an agent run here. rec, pending, busy, ended and cancel are
// guarded by the runtime's mu; msgs and stored by convMu.
type agent struct {
	id      string
	rec     store.Agent
	role    string
	cred    string // the credential it is of (rec.Credential, which never changes)
	wake    chan struct{}
	pending bool // mail arrived and is not yet taken
	busy    bool // the loop is working or about to look for work
	ended   bool // the loop has returned
	cancel  context.CancelCauseFunc
	saved   store.Agent // what the loop last stored (only the loop uses it)

	convMu sync.Mutex
	msgs   []model.Message
	stored int // how many of msgs are in the store
}

// loop is an agent's life: take the task or the unread mail, work until a
// final answer, wait for more mail, repeat, until it fails or is stopped.
func (rt *Runtime) loop(ctx context.Context, a *agent) {
	defer rt.wg.Done()
	if err := rt.load(ctx, a); err != nil {
		rt.finish(ctx, a, err)
		return
	}
	for {
		rt.mu.Lock()
		a.pending = false
		rt.mu.Unlock()
		work, err := rt.takeInput(ctx, a)
		if err != nil {
			rt.finish(ctx, a, err)
			return
		}
		if !work {
			if err := rt.save(ctx, a, store.StatusWaiting); err != nil {
				rt.finish(ctx, a, err)
				return
			}
			if !rt.sleep(ctx, a) {
				return
			}
			continue
		}
		if err := rt.save(ctx, a, store.StatusRunning); err != nil {
			rt.finish(ctx, a, err)
			return
		}
		rt.mu.Lock()
		turns := a.rec.Turns
		rt.mu.Unlock()
		a.convMu.Lock()
		msgs := len(a.msgs)
		a.convMu.Unlock()
		rt.h.Events().Emit(store.Event{Type: EventAgentStarted, AgentID: a.id, Role: a.role,
			Payload: map[string]any{"turns": turns, "messages": msgs, "credential": a.cred}})
		answer, err := rt.work(ctx, a)
		if err != nil {
			rt.finish(ctx, a, err)
			return
		}
		rt.mu.Lock()
		a.rec.Answer = answer
		rec := a.rec
		rt.mu.Unlock()
		payload := map[string]any{"answer": answer, "turns": rec.Turns, "tokens": rec.Tokens}
		var report []store.Mail
		if rec.ParentID != "" {
			err := rt.recipient(ctx, rec.ParentID)
			switch {
			case rt.st.Unavailable(err):
				rt.finish(ctx, a, err)
				return
			case err != nil:
				payload["reported_to"], payload["report_error"] = "", err.Error()
			default:
				payload["reported_to"] = rec.ParentID
				report = []store.Mail{{To: rec.ParentID, From: rec.ID, Body: answer}}
			}
		}
		// The answer, with the agent's state and its report.
		if err := rt.save(ctx, a, store.StatusWaiting, report...); err != nil {
			rt.finish(ctx, a, err)
			return
		}
		if report != nil {
			rt.wake(rec.ParentID)
		}
		rt.h.Events().Emit(store.Event{Type: EventAgentCompleted, AgentID: a.id, Role: a.role, Payload: payload})
	}
}

// sleep waits for mail; false when the loop must end.
func (rt *Runtime) sleep(ctx context.Context, a *agent) bool {
	rt.mu.Lock()
	if a.pending {
		rt.mu.Unlock()
		return true
	}
	a.busy = false
	rt.changed.Broadcast()
	rt.mu.Unlock()
	select {
	case <-a.wake:
	case <-ctx.Done():
		return false
	}
	rt.mu.Lock()
	a.busy = true
	rt.mu.Unlock()
	return true
}

// load reads the agent's conversation from the store. An agent's task,
// stored with the agent, opens a conversation not yet begun (the first save
// stores it). Tool calls left without a result (the host stopped during a
// turn) get one saying so.
func (rt *Runtime) load(ctx context.Context, a *agent) error {
	stored, err := rt.st.Messages(ctx, a.id)
	if err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	rt.mu.Lock()
	task := a.rec.Task
	rt.mu.Unlock()
	a.convMu.Lock()
	defer a.convMu.Unlock()
	for _, m := range stored {
		a.msgs = append(a.msgs, fromStored(m))
	}
	a.stored = len(a.msgs)
	if len(a.msgs) == 0 && task != "" {
		a.msgs = append(a.msgs, model.Message{Role: model.RoleUser, Content: task})
	}
	if n := len(a.msgs); n > 0 && a.msgs[n-1].Role == model.RoleAssistant {
		for _, c := range a.msgs[n-1].ToolCalls {
			a.msgs = append(a.msgs, model.Message{Role: model.RoleTool, ToolCallID: c.ID, Name: c.Name,
				Content: resultText(nil, toolhost.Errorf(toolhost.CodeCancelled, "the host stopped before this call finished; it may or may not have run"))})
		}
	}
	return nil
}

// takeInput adds the unread mail to the conversation, in the store in the
// transaction that takes it, and reports whether the agent has work: a
// conversation that does not end with an answer.
func (rt *Runtime) takeInput(ctx context.Context, a *agent) (bool, error) {
	var taken []model.Message
	if _, err := rt.st.TakeUnread(ctx, a.id, func(m store.Mail) store.AgentMessage {
		msg := model.Message{Role: model.RoleUser, Content: rt.mailText(m)}
		taken = append(taken, msg)
		return toStored(msg)
	}); err != nil {
		return false, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	a.convMu.Lock()
	defer a.convMu.Unlock()
	a.msgs = append(a.msgs, taken...)
	a.stored += len(taken)
	n := len(a.msgs)
	return n > 0 && (a.msgs[n-1].Role != model.RoleAssistant || len(a.msgs[n-1].ToolCalls) > 0), nil
}

// mailText is how a message reaches its recipient's model.
func (rt *Runtime) mailText(m store.Mail) string {
	if m.From == "" {
		return m.Body
	}
	from := m.From
	if rec, err := rt.st.Agent(context.Background(), m.From); err == nil {
		if r, err := rt.role(rec.RoleID); err == nil {
			from += " (role " + r.Name + ")"
		}
	}
	return fmt.Sprintf("Message from agent %s:\n%s", from, m.Body)
}

// persist appends the messages not yet stored.
func (rt *Runtime) persist(ctx context.Context, a *agent) error {
	a.convMu.Lock()
	defer a.convMu.Unlock()
	if a.stored == len(a.msgs) {
		return nil
	}
	if err := rt.st.AppendMessages(context.WithoutCancel(ctx), a.id, a.unsaved()); err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	a.stored = len(a.msgs)
	return nil
}

// unsaved returns the messages not yet stored, for the store; a.convMu is
// held.
func (a *agent) unsaved() []store.AgentMessage {
	out := make([]store.AgentMessage, 0, len(a.msgs)-a.stored)
	for _, m := range a.msgs[a.stored:] {
		out = append(out, toStored(m))
	}
	return out
}

// save stores the messages not yet stored and the agent's state with
// status, and sends mail, in one transaction, so that a crash or an outage
// never leaves the conversation ahead of the answer and counts, or a report
// unsent; then it shows the state to Wait. Its error is for finish: the
// context's once the loop must stop, one wrapping store.ErrFinal when
// another process ended the agent (which stopped records here too), the
// store's otherwise.
func (rt *Runtime) save(ctx context.Context, a *agent, status string, mail ...store.Mail) error {
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	rt.mu.Lock()
	rec := a.rec
	rt.mu.Unlock()
	rec.Status = status
	a.convMu.Lock()
	msgs := a.unsaved()
	if len(msgs) > 0 || len(mail) > 0 || !sameState(rec, a.saved) {
		stored, err := rt.st.SaveAgent(context.WithoutCancel(ctx), rec, msgs, mail...)
		if err != nil && !errors.Is(err, store.ErrFinal) {
			a.convMu.Unlock()
			return toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
		}
		a.stored = len(a.msgs)
		if err != nil {
			a.convMu.Unlock()
			rt.stopped(a.id, stored)
			return err
		}
		a.saved = rec
	}
	a.convMu.Unlock()
	rt.mu.Lock()
	a.rec.Status = status
	rt.changed.Broadcast()
	rt.mu.Unlock()
	return nil
}

// sameState reports whether saving a would change nothing in the store.
func sameState(a, b store.Agent) bool {
	return a.Status == b.Status && a.Answer == b.Answer && a.Turns == b.Turns && a.Tokens == b.Tokens
}

// finish ends a loop that stopped with err: a failure is recorded (final);
// a termination was recorded by Terminate; a closing runtime leaves the
// agent to be resumed.
func (rt *Runtime) finish(ctx context.Context, a *agent, err error) {
	if ctx.Err() != nil && (errors.Is(context.Cause(ctx), errTerminated) || rt.ctx.Err() != nil) {
		if perr := rt.persist(ctx, a); perr != nil {
			rt.log.Error("saving a conversation", "agent", a.id, "error", perr)
		}
		return
	}
	if rt.st.Unavailable(err) {
		// The database is away: the agent stops here without failing, as
		// when its lease is lost, and resumes once it is back.
		rt.loseIfHeld(a.id, "the store is unavailable", "error", err)
		return
	}
	code := toolhost.CodeOf(err)
	rt.mu.Lock()
	a.rec.ErrorCode, a.rec.Error = string(code), err.Error()
	rt.mu.Unlock()
	if serr := rt.save(context.WithoutCancel(ctx), a, store.StatusFailed); errors.Is(serr, store.ErrFinal) {
		return // ended elsewhere meanwhile: that stands
	} else if serr != nil {
		rt.log.Error("saving a failed agent", "agent", a.id, "error", serr)
	}
	// The event is recorded (an in-memory enqueue) before the loop ends,
	// which Wait waits for, so that Wait's flush of the events writes it.
	rt.mu.Lock()
	a.rec.Status = store.StatusFailed
	rt.h.Events().Emit(store.Event{Type: EventAgentFailed, AgentID: a.id, Role: a.role,
		Payload: map[string]any{"code": code, "error": err.Error(), "turns": a.rec.Turns, "tokens": a.rec.Tokens}})
	rt.changed.Broadcast()
	rt.mu.Unlock()
	rt.log.Warn("agent failed", "agent", a.id, "code", code, "error", err)
}

// task is the state of one piece of work, from input to final answer.
type task struct {
	turns, tokens int
	badStreak     int
	lastBad       string
	lastCalls     string // the previous turn's calls, to detect no progress
	sameCalls     int    // how many turns in a row made them
	overtime      error  // the max_wall_time error
}

// work runs turns until the model gives a final answer, within the limits.
func (rt *Runtime) work(ctx context.Context, a *agent) (string, error) {
	t := task{overtime: toolhost.Errorf(toolhost.CodeTimeout, "max_wall_time (%s) reached", rt.cfg.MaxWallTime)}
	ctx, cancel := context.WithTimeoutCause(ctx, rt.cfg.MaxWallTime, t.overtime)
	defer cancel()
	for {
		if t.turns >= rt.cfg.MaxTurns {
			return "", toolhost.Errorf(toolhost.CodePolicy, "max_turns (%d) reached without a final answer", rt.cfg.MaxTurns)
		}
		if err := ended(ctx, t.overtime); err != nil {
			return "", err
		}
		answer, done, err := rt.tracedTurn(ctx, a, &t)
		if err != nil || done { // the loop saves the answer, finish what a failure leaves
			return answer, err
		}
		if err := rt.save(ctx, a, store.StatusRunning); err != nil {
			return "", err
		}
		if t.tokens > rt.cfg.MaxTokens {
			return "", toolhost.Errorf(toolhost.CodePolicy, "max_tokens (%d) reached: this task used %d", rt.cfg.MaxTokens, t.tokens)
		}
		if t.badStreak >= rt.cfg.MaxBadOutputs {
			return "", toolhost.Errorf(toolhost.CodeValidation, "the model's output was unusable %d times in a row; the last: %s", t.badStreak, t.lastBad)
		}
	}
}

// ended returns the agent's error once ctx has ended or passed its deadline:
// a tool call may come back failed by the deadline (the plugin's side of a
// gRPC deadline can fire first) a moment before ctx's own timer marks it
// done, and the next turn must not start.
func ended(ctx context.Context, overtime error) error {
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return overtime
	}
	return nil
}

// ctxErr turns a context's end into the agent's error: the wall-time limit,
// a termination, or the runtime closing.
func ctxErr(ctx context.Context) error {
	cause := context.Cause(ctx)
	if toolhost.CodeOf(cause) == toolhost.CodeInternal {
		return toolhost.Errorf(toolhost.CodeCancelled, "runtime: %w", cause)
	}
	return cause
}

// tracedTurn runs a turn, under its span when the host traces.
func (rt *Runtime) tracedTurn(ctx context.Context, a *agent, t *task) (string, bool, error) {
	if rt.tracer == nil {
		return rt.turn(ctx, a, t)
	}
	ctx, span := rt.startTurn(ctx, a, t.turns+1)
	answer, done, err := rt.turn(ctx, a, t)
	endSpan(span, err)
	return answer, done, err
}

// turn asks the model for the next step and carries it out. It returns the
// answer and done when the model gave one.
func (rt *Runtime) turn(ctx context.Context, a *agent, t *task) (string, bool, error) {
	req, turnID, err := rt.request(a)
	if err != nil {
		return "", false, err
	}
	rt.h.Events().Emit(store.Event{Type: EventTurnStarted, AgentID: a.id, Role: a.role, ParentID: a.id,
		Payload: map[string]any{"turn": req.Agent.Turn, "id": turnID, "tools": len(req.Tools), "messages": len(req.Messages)}})
	resp, err := rt.complete(ctx, req)
	t.turns++
	rt.mu.Lock()
	a.rec.Turns++
	if resp != nil {
		a.rec.Tokens += resp.Usage.Total()
	}
	rt.mu.Unlock()
	if resp != nil {
		rt.h.Metrics().ModelTokens(a.role, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	}
	if err != nil {
		if e := ended(ctx, t.overtime); e != nil {
			err = e
		} else {
			err = toolhost.Errorf(toolhost.CodeInternal, "model provider: %w", err)
		}
		// The turn ends without a reply, not left running in the tree.
		rt.h.Events().Emit(store.Event{Type: EventTurnCompleted, AgentID: a.id, Role: a.role, ParentID: a.id,
			Payload: map[string]any{"turn": req.Agent.Turn, "id": turnID, "outcome": "error", "reason": err.Error()}})
		return "", false, err
	}
	t.tokens += resp.Usage.Total()
	msg := resp.Message
	msg.Role = model.RoleAssistant
	outcome := map[string]any{"turn": req.Agent.Turn, "id": turnID, "tokens": resp.Usage.Total()}
	defer func() {
		rt.h.Events().Emit(store.Event{Type: EventTurnCompleted, AgentID: a.id, Role: a.role, ParentID: a.id, Payload: outcome})
	}()
	switch {
	case resp.Invalid != "":
		outcome["outcome"], outcome["reason"] = "bad_output", resp.Invalid
		rt.badOutput(a, t, msg, resp.Invalid)
	case len(msg.ToolCalls) > 0:
		outcome["outcome"], outcome["calls"] = "tool_calls", len(msg.ToolCalls)
		a.append(msg)
		failed, err := rt.toolCalls(ctx, a, t, turnID, msg.ToolCalls)
		if err != nil {
			return "", false, err
		}
		outcome["failed"] = failed
	case strings.TrimSpace(msg.Content) != "":
		outcome["outcome"] = "answer"
		a.append(msg)
		return msg.Content, true, nil
	default:
		outcome["outcome"] = "bad_output"
		outcome["reason"] = "neither tool calls nor an answer"
		rt.badOutput(a, t, msg, "the reply had neither tool calls nor a final answer")
	}
	return "", false, ended(ctx, t.overtime)
}

// request builds the model request of the agent's next turn: the role's
// prompt, the tools [host.Host.Tools] lists for it (its role's, but the
// deferred ones it has not loaded), and the conversation.
func (rt *Runtime) request(a *agent) (*model.Request, string, error) {
	system, err := rt.h.Roles().Prompt(a.role)
	if err != nil {
		return nil, "", err
	}
	list, err := rt.h.Tools(host.ToolQuery{Agent: a.id})
	if err != nil {
		return nil, "", err
	}
	tools := make([]model.Tool, len(list.Tools))
	for i, d := range list.Tools {
		tools[i] = model.Tool{Name: d.Function.Name, Description: d.Function.Description, Parameters: d.Function.Parameters}
	}
	rt.mu.Lock()
	turn := a.rec.Turns + 1
	info := model.Agent{ID: a.id, Role: a.role, ParentID: a.rec.ParentID, Turn: turn}
	rt.mu.Unlock()
	a.convMu.Lock()
	msgs := slices.Clone(a.msgs)
	a.convMu.Unlock()
	return &model.Request{Purpose: model.PurposeTurn, Agent: info, System: system, Messages: msgs, Tools: tools},
		fmt.Sprintf("%s.t%d", a.id, turn), nil
}

// badOutput reports an unusable reply back to the model.
func (rt *Runtime) badOutput(a *agent, t *task, msg model.Message, why string) {
	t.badStreak++
	t.lastBad = why
	if msg.Content != "" {
		a.append(msg)
	}
	a.append(model.Message{Role: model.RoleUser, Content: "Your last reply could not be used: " + why +
		". Reply with tool calls (only the tools you were given) or with your final answer."})
}

// toolCalls runs a turn's tool calls through the host's pipeline (as a
// batch, in the executor's mode), appends their results and returns how
// many failed. Calls the model should not have made (arguments that are
// not a JSON object, a tool it was not given, invalid arguments) are bad
// output, reported back to it.
func (rt *Runtime) toolCalls(ctx context.Context, a *agent, t *task, turnID string, calls []model.ToolCall) (int, error) {
	sig := callsSignature(calls)
	if sig == t.lastCalls {
		t.sameCalls++
	} else {
		t.lastCalls, t.sameCalls = sig, 1
	}
	if t.sameCalls >= rt.cfg.NoProgress {
		return 0, toolhost.Errorf(toolhost.CodePolicy, "no progress: the model made the same tool call%s %d times in a row (%s)",
			plural(len(calls)), t.sameCalls, sig)
	}
	results := make([]string, len(calls))
	var reqs []*toolhost.CallRequest
	var idx []int
	bad, failed := 0, 0
	for i, c := range calls {
		if !isObject(c.Arguments) {
			results[i] = resultText(nil, toolhost.Errorf(toolhost.CodeValidation, "arguments of %s are not a JSON object: %.200q", c.Name, c.Arguments))
			bad++
			failed++
			continue
		}
		reqs = append(reqs, &toolhost.CallRequest{Tool: c.Name, Arguments: json.RawMessage(c.Arguments), Context: toolhost.CallContext{
			AgentID: a.id, Role: a.role, Session: a.id, Channel: "agent", ParentID: turnID, Credential: a.cred,
		}})
		idx = append(idx, i)
	}
	// The agent's calls ask for progress, which the host records as
	// tool_call.progress events under the call: the turn's account of a
	// long command as it runs.
	ctx = toolhost.WithProgress(ctx, func(float64, float64, string) {})
	for j, out := range rt.h.CallBatch(ctx, reqs, nil) {
		results[idx[j]] = resultText(out.Result, out.Err)
		if out.Err != nil || !out.Result.OK {
			failed++
		}
		if out.Err != nil && slices.Contains(badCallCodes, toolhost.CodeOf(out.Err)) {
			bad++
			t.lastBad = out.Err.Error()
		}
	}
	for i, c := range calls {
		a.append(model.Message{Role: model.RoleTool, ToolCallID: c.ID, Name: c.Name, Content: results[i]})
	}
	if bad == len(calls) {
		t.badStreak++
	} else {
		t.badStreak = 0
	}
	return failed, nil
}

// badCallCodes are the refusals of a call the model should not have made:
// a tool it was not given, or arguments its schema refuses.
var badCallCodes = []toolhost.Code{toolhost.CodeUnknownTool, toolhost.CodeToolNotAvailable, toolhost.CodeValidation}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func isObject(s string) bool {
	var v map[string]any
	return json.Unmarshal([]byte(s), &v) == nil && v != nil
}

// callsSignature identifies a turn's calls, whatever the arguments' key
// order.
func callsSignature(calls []model.ToolCall) string {
	parts := make([]string, len(calls))
	for i, c := range calls {
		args := c.Arguments
		var v any
		if json.Unmarshal([]byte(args), &v) == nil {
			b, _ := json.Marshal(v)
			args = string(b)
		}
		parts[i] = c.Name + args
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// resultText is a call's outcome as the model sees it: the result envelope
// as JSON, attachments and binary content named but not inlined, text
// content blocks left to stdout.
func resultText(res *toolhost.Result, err error) string {
	if err != nil {
		res = toolhost.ErrorResult(err)
	}
	r := *res
	if _, ok := r.Meta[toolhost.MetaStructuredContent]; ok {
		// The model reads the same in stdout.
		r.Meta = maps.Clone(r.Meta)
		delete(r.Meta, toolhost.MetaStructuredContent)
	}
	var names []string
	for _, at := range r.Attachments {
		names = append(names, fmt.Sprintf("%s (%s, %d bytes)", at.Name, at.MimeType, len(at.Data)))
	}
	var blocks []toolhost.Content
	for i, c := range r.Content {
		// Text is in stdout; the other blocks stay, their binary data
		// named instead.
		if c.Type == toolhost.ContentText {
			continue
		}
		if c.Resource != nil {
			rc := *c.Resource
			if len(rc.Blob) > 0 {
				names = append(names, fmt.Sprintf("content-%d (%s, %d bytes)", i, rc.MimeType, len(rc.Blob)))
			}
			rc.Blob, rc.Text, c.Resource = nil, "", &rc
		}
		if len(c.Data) > 0 {
			names = append(names, fmt.Sprintf("content-%d (%s, %d bytes)", i, c.MimeType, len(c.Data)))
			c.Data = nil
		}
		blocks = append(blocks, c)
	}
	r.Attachments, r.Content = nil, blocks
	if len(names) > 0 {
		r.Meta = mapWith(r.Meta, "attachments", names)
	}
	b, _ := json.Marshal(&r)
	return string(b)
}

func mapWith(m map[string]any, k string, v any) map[string]any {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]any{}
	}
	out[k] = v
	return out
}

// append adds a message to the conversation.
func (a *agent) append(m model.Message) {
	a.convMu.Lock()
	defer a.convMu.Unlock()
	a.msgs = append(a.msgs, m)
}

func toStored(m model.Message) store.AgentMessage {
	out := store.AgentMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name, Time: time.Now()}
	if len(m.ToolCalls) > 0 {
		out.ToolCalls, _ = json.Marshal(m.ToolCalls)
	}
	return out
}

func fromStored(m store.AgentMessage) model.Message {
	out := model.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
	if len(m.ToolCalls) > 0 {
		_ = json.Unmarshal(m.ToolCalls, &out.ToolCalls)
	}
	return out
}
