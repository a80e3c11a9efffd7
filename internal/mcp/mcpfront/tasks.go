package mcpfront

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/store"
)

// Long calls as tasks: the tasks extension of the stateless era
// (mcpversion.Stateless; io.modelcontextprotocol/tasks, SEP-2663). The
// server decides which calls become tasks: a tools/call from a client that
// declares the extension runs as usual, and if it has not finished within
// taskAfter the client gets a task handle (resultType "task") in place of
// the result. The call runs on,
// no longer bound to the request; the client polls it with tasks/get, whose
// statusMessage follows the call (its latest progress, a wait for an
// approval), and ends it with tasks/cancel. A task belongs to the agent that
// made it (its credential or session, and its key): to another it does not
// exist. It is kept taskTTL after it ends, and the agents of one
// credential have at most maxTasks running between them (agents are free
// to make, so the bound is the credential's); a call past that runs without
// a task.

const (
	tasksExtension = "io.modelcontextprotocol/tasks"
	// taskAfter is how long a call runs before it becomes a task.
	taskAfter = time.Second
	// taskTTL is how long a task is kept after it ended.
	taskTTL = time.Hour
	// taskPoll is the poll interval the front suggests.
	taskPoll = 500 * time.Millisecond
	// maxTasks bounds the running tasks of a credential's agents.
	maxTasks = 64
	// maxKeptTasks bounds the tasks a credential's agents have kept, ended
	// ones included: past it the oldest ended ones are forgotten before
	// their TTL.
	maxKeptTasks = 256
)

// mcpTask is a call running, or run, as a task.
type mcpTask struct {
	id      string
	agent   *mcpAgent
	created time.Time
	cancel  context.CancelFunc

	mu      sync.Mutex
	status  string
	message string
	updated time.Time
	result  *mcp.CallToolResult // once completed
	forget  func()              // drops it from its role's tasks; nil until kept there
	expiry  *time.Timer         // calls forget taskTTL after it ended
	store   *store.Store        // where it is shared with the other hosts (shared.go)
	writes  *sync.WaitGroup     // its role's writes to the store, which Close waits for
	saved   bool                // it is in the store
	noted   time.Time           // when its status message last went to the store
}

// mcpTasks are a role's tasks, by id.
type mcpTasks struct {
	mu     sync.Mutex
	tasks  map[string]*mcpTask
	writes sync.WaitGroup // the tasks' writes to the store under way
	// calls counts, by credential, the calls that are or may become
	// working tasks: taken before the call starts, so that calls made at
	// once cannot all pass the bound before any is counted.
	calls map[string]int
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// taskResult is a task as tasks/get, and a task handle, answer it.
type taskResult struct {
	mcp.ResultBase
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *jsonrpc.Error  `json:"error,omitempty"` // a failed task's (failedTask)
}

// failedTask is the error of a task that failed for the reason: its host
// stopped (shared.go), the only way a task fails here; the call's own
// failures complete it with an error result.
func failedTask(reason string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpcServerError, Message: string(toolhost.CodeCancelled) + ": " + reason,
		Data: json.RawMessage(`{"code":"` + string(toolhost.CodeCancelled) + `","error_class":"host_exited"}`)}
}

// doneResult is the answer of tasks/cancel.
type doneResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskAgentKey is the context key of the agent that calls a tasks method.
type taskAgentKey struct{}

// addTaskMethods registers the extension's methods on r's server; the
// receiving middleware finds the calling agent (taskMethod).
func (r *mcpRole) addTaskMethods() {
	handle := func(method string, f func(*mcpAgent, *mcpTask) (mcp.Result, error)) func(context.Context, *mcp.ServerSession, *taskParams) (mcp.Result, error) {
		return func(ctx context.Context, _ *mcp.ServerSession, p *taskParams) (mcp.Result, error) {
			a, _ := ctx.Value(taskAgentKey{}).(*mcpAgent)
			t := r.tasks.get(p.TaskID, a)
			if t == nil {
				// Another host's (shared.go)?
				if v, err := r.sharedTask(ctx, a, p.TaskID, method == "tasks/cancel"); v != nil || err != nil {
					if v != nil && method == "tasks/cancel" {
						return &doneResult{ResultType: "complete"}, nil
					}
					return v, err
				}
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no task %q of this agent (it ended more than %s ago, or was never one)", p.TaskID, taskTTL)}
			}
			return f(a, t)
		}
	}
	must := func(err error) {
		if err != nil {
			panic(err) // the methods are not the SDK's own
		}
	}
	must(mcp.AddReceivingCustomMethod(r.srv, "tasks/get", handle("tasks/get", func(_ *mcpAgent, t *mcpTask) (mcp.Result, error) {
		return t.view(), nil
	})))
	must(mcp.AddReceivingCustomMethod(r.srv, "tasks/cancel", handle("tasks/cancel", func(_ *mcpAgent, t *mcpTask) (mcp.Result, error) {
		t.end(store.TaskCancelled, nil, "cancelled by the client")
		return &doneResult{ResultType: "complete"}, nil
	})))
	must(mcp.AddReceivingCustomMethod(r.srv, "tasks/update", handle("tasks/update", func(_ *mcpAgent, t *mcpTask) (mcp.Result, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %s asks for no input", t.id)}
	})))
}

// errTasksUndeclared answers a tasks method from a client that did not
// declare the extension: the extension's missing required capability
// error, naming it as a client capability.
var errTasksUndeclared = &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
	Message: "the client did not declare the " + tasksExtension + " extension",
	Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + tasksExtension + `":{}}}}`)}

// taskMethod runs a tasks method as the calling agent, once its client
// declared the extension (errTasksUndeclared).
func (r *mcpRole) taskMethod(ctx context.Context, method string, req *mcp.ServerRequest[*taskParams], next mcp.MethodHandler) (mcp.Result, error) {
	if !declaresTasks(req) {
		return nil, errTasksUndeclared
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	a, err := r.agent(ctx, ss, req.GetExtra(), req.GetParams().GetMeta())
	if err != nil {
		return nil, err
	}
	defer a.done()
	return next(context.WithValue(ctx, taskAgentKey{}, a), method, req)
}

// wantsTask reports whether a call may become a task: its client speaks
// the stateless era and declared the tasks extension.
func wantsTask(req *mcp.CallToolRequest) bool {
	return req.ProtocolVersion() >= mcpversion.Stateless && declaresTasks(req)
}

// declaresTasks reports whether a request's client declared the tasks
// extension: in the request's _meta, else in its session's initialize.
func declaresTasks[P mcp.Params](req *mcp.ServerRequest[P]) bool {
	if raw, ok := statedCapabilities(req.Params.GetMeta()); ok {
		exts, _ := raw["extensions"].(map[string]any)
		_, ok := exts[tasksExtension]
		return ok
	}
	caps := req.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[tasksExtension]
	return ok
}

// callAsTask runs a call of a client that takes tasks: its result, if it
// finishes within taskAfter, else a task handle. A call that asks its
// client (an approval it may decide, a module's request) within taskAfter
// is held (approval.go) and stays so, never a task; once it is a task, its
// approval waits for the queue, and its module's requests are refused.
func (r *mcpRole) callAsTask(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	a, err := r.agent(ctx, req.Session, req.Extra, req.Params.Meta)
	if err != nil {
		return completed(errorResult(err)), nil
	}
	if !r.offers(req.Params.Name) {
		defer a.done()
		res, err := r.callUnoffered(ctx, a, req)
		if err != nil {
			return nil, err
		}
		return completed(res), nil
	}
	if !r.tasks.reserve(a) {
		defer a.done()
		res, err := r.callTool(ctx, a, req)
		if err != nil {
			return nil, err
		}
		return typed(res), nil
	}
	now := time.Now()
	t := &mcpTask{id: newTaskID(), agent: a, created: now, updated: now, status: store.TaskWorking, store: r.h.Store(), writes: &r.tasks.writes}
	ask := newClientAsker(ctx, roundRequestOf("tools/call", req, req.Params.InputResponses, req.Params.RequestState))
	ended := func() {
		a.done()
		r.tasks.release(a)
	}
	if c := r.start(ctx, a, ask, t, ended, r.runTool(a, req)); c != nil {
		t.cancel = c.cancel
		if res, _ := r.wait(ctx, c, req.Session, time.After(taskAfter)); res != nil {
			return typed(res.(*mcp.CallToolResult)), nil
		}
		close(c.tasked)
		go func() {
			out := <-c.done
			res, _ := out.res.(*mcp.CallToolResult)
			t.end(store.TaskCompleted, res, "")
		}()
		r.tasks.add(t)
		r.saveTask(t)
		v := t.view()
		v.ResultType = "task"
		return v, nil
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.cancel = cancel
	bg = toolhost.WithProgress(bg, t.progress)
	bg = host.WithApprovalPending(bg, t.waitsFor)
	bg = toolhost.WithAsker(bg, ask)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		defer ended()
		res, err := r.run(bg, a, req.Params.Name, req.Params.Arguments)
		if err != nil { // the module's protocol error, which a task's result can only say
			res = errorResult(err)
		}
		ask.end()
		done <- res
		t.end(store.TaskCompleted, res, "")
	}()
	select {
	case res := <-done:
		return completed(res), nil
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	case <-time.After(taskAfter):
	}
	ask.detach() // its log messages had the request that ends now alone
	r.tasks.add(t)
	r.saveTask(t)
	v := t.view()
	v.ResultType = "task"
	return v, nil
}

// progress notes a task's progress as its status message.
func (t *mcpTask) progress(progress, total float64, message string) {
	if message == "" {
		message = fmt.Sprintf("%g of %g", progress, total)
	}
	t.note(message)
}

// waitsFor notes that a task waits for the approval ar.
func (t *mcpTask) waitsFor(ar host.ApprovalRequest) {
	t.note(fmt.Sprintf("waiting for an approval (%s) until %s", ar.ID, ar.Expires.Format(time.RFC3339)))
}

// newTaskID returns a task id no client can guess.
func newTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "task_" + hex.EncodeToString(b[:])
}

// note sets a working task's status message.
func (t *mcpTask) note(message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == store.TaskWorking {
		t.message, t.updated = message, time.Now()
		t.storeNote()
	}
}

// end ends a working task with the status and result (cancelling its call),
// and forgets it taskTTL later; a task ended already stays as it is.
func (t *mcpTask) end(status string, res *mcp.CallToolResult, message string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status != store.TaskWorking {
		return
	}
	t.status, t.result, t.message, t.updated = status, res, message, time.Now()
	t.storeEnd()
	t.cancel()
	if t.forget != nil {
		t.expiry = time.AfterFunc(taskTTL, t.forget)
	}
}

// view is the task as tasks/get answers it.
func (t *mcpTask) view() *taskResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	var result json.RawMessage
	if t.result != nil {
		result = completeResult(t.result)
	}
	return taskView(t.id, t.status, t.message, t.created, t.updated, result)
}

// taskView is a task as tasks/get answers it, a failed one with its error.
func taskView(id, status, message string, created, updated time.Time, result json.RawMessage) *taskResult {
	v := &taskResult{ResultType: "complete", TaskID: id, Status: status, StatusMessage: message,
		CreatedAt: created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: updated.UTC().Format(time.RFC3339Nano),
		TTLMs: taskTTL.Milliseconds(), PollIntervalMs: taskPoll.Milliseconds(), Result: result}
	if status == store.TaskFailed {
		v.Error = failedTask(message)
	}
	return v
}

// completeResult encodes a call's result as a task carries it: with its
// resultType.
func completeResult(res *mcp.CallToolResult) json.RawMessage {
	b, err := json.Marshal(res)
	var m map[string]any
	if err != nil || json.Unmarshal(b, &m) != nil {
		b, _ = json.Marshal(errorResult(fmt.Errorf("the result does not encode: %v", err)))
		_ = json.Unmarshal(b, &m)
	}
	if m["content"] == nil {
		m["content"] = []any{}
	}
	m["resultType"] = "complete"
	out, _ := json.Marshal(m)
	return out
}

// completed is a call's result as the SDK's tool handler answers it: its
// resultType "complete" set (which the SDK sets on the results of its own
// handler alone).
func completed(res *mcp.CallToolResult) *mcp.CallToolResult {
	var out mcp.CallToolResult
	if json.Unmarshal(completeResult(res), &out) != nil {
		return res
	}
	return &out
}

// add keeps t until taskTTL after it ended, or until its credential's
// agents hold maxKeptTasks newer ones.
func (ts *mcpTasks) add(t *mcpTask) {
	ts.mu.Lock()
	if ts.tasks == nil {
		ts.tasks = map[string]*mcpTask{}
	}
	ts.tasks[t.id] = t
	ts.trim(t.agent)
	ts.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget = func() {
		ts.mu.Lock()
		delete(ts.tasks, t.id)
		ts.mu.Unlock()
	}
	if t.status != store.TaskWorking {
		t.expiry = time.AfterFunc(taskTTL, t.forget)
	}
}

// trim forgets the oldest ended tasks of agent a's credential while its
// agents hold more than maxKeptTasks. ts.mu is held.
func (ts *mcpTasks) trim(a *mcpAgent) {
	var ended []*mcpTask
	kept := 0
	for _, t := range ts.tasks {
		if t.agent.cred != a.cred {
			continue
		}
		kept++
		t.mu.Lock()
		if t.status != store.TaskWorking {
			ended = append(ended, t)
		}
		t.mu.Unlock()
	}
	if kept <= maxKeptTasks {
		return
	}
	slices.SortFunc(ended, func(x, y *mcpTask) int { return x.created.Compare(y.created) })
	for _, t := range ended[:min(kept-maxKeptTasks, len(ended))] {
		delete(ts.tasks, t.id)
		t.mu.Lock()
		if t.expiry != nil {
			t.expiry.Stop()
		}
		t.mu.Unlock()
	}
}

// get returns the task with the id, if it is agent a's.
func (ts *mcpTasks) get(id string, a *mcpAgent) *mcpTask {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.tasks[id]; t != nil && a != nil && t.agent.key == a.key {
		return t
	}
	return nil
}

// reserve counts in a call of agent a that may become a task, unless its
// credential's agents have maxTasks such calls running already.
func (ts *mcpTasks) reserve(a *mcpAgent) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.calls[a.cred] >= maxTasks {
		return false
	}
	if ts.calls == nil {
		ts.calls = map[string]int{}
	}
	ts.calls[a.cred]++
	return true
}

// release counts out a call reserve counted in, once it has ended.
func (ts *mcpTasks) release(a *mcpAgent) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.calls[a.cred]--; ts.calls[a.cred] <= 0 {
		delete(ts.calls, a.cred)
	}
}

// cancelAll cancels every working task, when the role's server stops.
func (ts *mcpTasks) cancelAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.tasks {
		t.end(store.TaskCancelled, nil, "the MCP server stopped")
	}
}
