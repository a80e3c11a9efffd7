package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// The clients of TestStatelessClientsAnyHost: the TypeScript SDK v2
// (client_v2.mjs with its tasks extension) and the go-sdk, both pinned to
// 2026-07-28 and pointed at the balancer, each behind statelessClient.

// statelessClient is a sessionless MCP client (2026-07-28) of the
// developer role through the balancer, as runStateless drives it.
type statelessClient interface {
	// call calls a tool, accepting every elicitation meanwhile.
	call(t *testing.T, tool string, args map[string]any) statelessCall
	// tools lists the tools' names (one tools/list).
	tools(t *testing.T) []string
	// startTask calls run_command with command as a task of the tasks
	// extension and returns the task's id; the test fails unless the call
	// became a task.
	startTask(t *testing.T, command string) string
	// settleTask polls the task with tasks/get until it ends.
	settleTask(t *testing.T, id string) taskState
	// cancelTask cancels the task with tasks/cancel, then polls it until
	// it ends.
	cancelTask(t *testing.T, id string) taskState
	// getTask is one tasks/get of the task; the error is the server's
	// answer when it answered one.
	getTask(t *testing.T, id string) (taskState, error)
}

// statelessCall is how a call of a statelessClient ended.
type statelessCall struct {
	Text         string
	IsError      bool
	Err          string   // what the client raised in place of a result
	Elicitations []string // the messages of the elicitations it accepted meanwhile
}

// ok reports whether the call returned a result that is not an error.
func (c statelessCall) ok() bool {
	return c.Err == "" && !c.IsError
}

// String is the call's outcome in one line.
func (c statelessCall) String() string {
	if c.Err != "" {
		return "the client raised " + c.Err
	}
	return fmt.Sprintf("%q (isError %v)", clip(c.Text, 2000), c.IsError)
}

// taskState is what a client learnt of a task: its status, its status
// message (or, from the TypeScript SDK, its failure), and once completed
// its result's text.
type taskState struct {
	Status, Message, Text string
}

// tsStateless is client_v2.mjs pinned to 2026-07-28, over streamable HTTP
// through the balancer.
type tsStateless struct {
	c     *v2Client
	execs map[string]string // task id → the script's id of its execution
}

// newTSStateless starts client_v2.mjs, pinned to 2026-07-28, on the
// developer endpoint through hs's balancer with hs's token.
func newTSStateless(t *testing.T, hs *statelessHosts) *tsStateless {
	t.Helper()
	node, script := v2Script(t)
	c := &v2Client{http: true, nodeClient: startNodeClient(t, "the TypeScript SDK v2 client", node, hs.workspace,
		[]string{"TOOLHOST_TOKEN=" + hs.token}, script, "2026-07-28", "http", hs.endpoint())}
	var hello v2Hello
	if err := json.Unmarshal(c.hello, &hello); err != nil || hello.Era != "modern" || hello.ProtocolVersion != "2026-07-28" {
		t.Fatalf("the client connected in era %q version %q (%v), want 2026-07-28", hello.Era, hello.ProtocolVersion, err)
	}
	return &tsStateless{c: c, execs: map[string]string{}}
}

// call runs the script's call op.
func (d *tsStateless) call(t *testing.T, tool string, args map[string]any) statelessCall {
	t.Helper()
	var res v2Call
	d.c.ask(t, map[string]any{"op": "call", "name": tool, "arguments": args}, &res)
	out := statelessCall{Text: res.text(), Err: res.SDKError}
	switch {
	case res.Result != nil:
		out.IsError = res.Result.IsError
	case out.Err == "":
		out.Err = "no result"
	}
	for _, e := range res.Elicitations {
		out.Elicitations = append(out.Elicitations, e.Params.Message)
	}
	return out
}

// tools runs the script's tools op.
func (d *tsStateless) tools(t *testing.T) []string {
	t.Helper()
	var list struct{ Tools []struct{ Name string } }
	d.c.ask(t, map[string]any{"op": "tools"}, &list)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// startTask runs the script's task op (ext-tasks, the task required).
func (d *tsStateless) startTask(t *testing.T, command string) string {
	t.Helper()
	exec := fmt.Sprintf("task-%d", len(d.execs)+1)
	task := d.c.startTask(t, exec, command, d.c.mark(t))
	d.execs[task.TaskID] = exec
	return task.TaskID
}

// settleTask runs the script's settle op: ext-tasks polls the task.
func (d *tsStateless) settleTask(t *testing.T, id string) taskState {
	t.Helper()
	var done v2Task
	d.c.ask(t, map[string]any{"op": "settle", "id": d.execs[id], "timeoutMs": scriptTimeout.Milliseconds()}, &done)
	return done.state()
}

// cancelTask runs the script's cancel op: ext-tasks sends tasks/cancel,
// then polls the task.
func (d *tsStateless) cancelTask(t *testing.T, id string) taskState {
	t.Helper()
	var done v2Task
	d.c.ask(t, map[string]any{"op": "cancel", "id": d.execs[id], "timeoutMs": scriptTimeout.Milliseconds()}, &done)
	return done.state()
}

// getTask runs the script's snapshot op: one tasks/get.
func (d *tsStateless) getTask(t *testing.T, id string) (taskState, error) {
	t.Helper()
	var snap struct {
		Task struct {
			Status, StatusMessage string
		}
		SnapshotError string
	}
	d.c.ask(t, map[string]any{"op": "snapshot", "id": d.execs[id]}, &snap)
	if snap.SnapshotError != "" {
		return taskState{}, fmt.Errorf("%s", snap.SnapshotError)
	}
	return taskState{Status: snap.Task.Status, Message: snap.Task.StatusMessage}, nil
}

// state is the task's outcome as a taskState.
func (v v2Task) state() taskState {
	o := v.Outcome
	s := taskState{Status: o.Status, Message: o.Error}
	if o.Task != nil && s.Message == "" {
		s.Message = o.Task.StatusMessage
	}
	if o.Result != nil {
		var texts []string
		for _, part := range o.Result.Content {
			texts = append(texts, part.Text)
		}
		s.Text = strings.Join(texts, "\n")
	}
	return s
}

// goStateless is a go-sdk client session of 2026-07-28 through the
// balancer. The go-sdk has no tasks extension: its tasks are driven with
// raw 2026-07-28 JSON-RPC requests through the balancer, with the
// session's credential and no agent key, which makes them its agent's.
type goStateless struct {
	cs       *mcp.ClientSession
	endpoint string
	token    string
	lastID   int // of the raw requests

	mu           sync.Mutex
	elicitations []*mcp.ElicitParams
}

// newGoStateless connects a go-sdk client asking for 2026-07-28 to the
// developer endpoint through hs's balancer with hs's token; it accepts
// every elicitation.
func newGoStateless(t *testing.T, hs *statelessHosts) *goStateless {
	t.Helper()
	d := &goStateless{endpoint: hs.endpoint(), token: hs.token}
	d.cs = connectGo(t, "e2e-stateless-go", &mcp.ClientOptions{ElicitationHandler: approving(&d.mu, &d.elicitations)},
		&mcp.StreamableClientTransport{Endpoint: d.endpoint, HTTPClient: &http.Client{Transport: bearerTransport(d.token)}}, "2026-07-28")
	if v := d.cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the go-sdk client negotiated %q, want 2026-07-28", v)
	}
	return d
}

// call calls the tool through the session; its multi-round-trip
// middleware answers an input_required result and retries.
func (d *goStateless) call(t *testing.T, tool string, args map[string]any) statelessCall {
	t.Helper()
	d.mu.Lock()
	d.elicitations = nil
	d.mu.Unlock()
	res, err := d.cs.CallTool(patient(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	var out statelessCall
	if err != nil {
		out.Err = err.Error()
	} else {
		out.Text, out.IsError = textOf(res), res.IsError
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.elicitations {
		out.Elicitations = append(out.Elicitations, e.Message)
	}
	return out
}

// tools lists the tools through the session (which keeps no list: the
// server's ttlMs is 0).
func (d *goStateless) tools(t *testing.T) []string {
	t.Helper()
	res, err := d.cs.ListTools(patient(t), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// raw sends one sessionless request of method with params (its _meta
// set: 2026-07-28, a client declaring the tasks extension) through the
// balancer with the session's token, and returns its result, or the
// JSON-RPC error the server answered.
func (d *goStateless) raw(t *testing.T, method string, params map[string]any) (json.RawMessage, error) {
	t.Helper()
	d.lastID++
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e-stateless-go", "version": "1.0.0"},
	}
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": d.lastID, "method": method, "params": params})
	r, err := mcpPostURL(patient(t), d.endpoint, d.token, "", "-", string(msg))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	for _, m := range jsonrpcMessages(r.header.Get("Content-Type"), []byte(r.body)) {
		var reply mcptest.Reply
		b, _ := json.Marshal(m)
		if json.Unmarshal(b, &reply) != nil || string(reply.ID) != fmt.Sprint(d.lastID) {
			continue
		}
		if reply.Error != nil {
			return nil, reply.Error
		}
		return reply.Result, nil
	}
	t.Fatalf("%s: %d with no answer to it: %s", method, r.status, clip(r.body, 2000))
	return nil, nil
}

// startTask sends the tools/call of run_command raw, as a client of the
// tasks extension, and returns the task handle's id.
func (d *goStateless) startTask(t *testing.T, command string) string {
	t.Helper()
	res, err := d.raw(t, "tools/call", map[string]any{"name": "run_command",
		"arguments": map[string]any{"command": command, "timeout_seconds": 120}})
	var handle struct {
		ResultType string
		TaskID     string `json:"taskId"`
	}
	if err != nil || json.Unmarshal(res, &handle) != nil || handle.ResultType != "task" || handle.TaskID == "" {
		t.Fatalf("run_command %q as a task: %s, %v; want a task handle", command, res, err)
	}
	return handle.TaskID
}

// getTask sends one tasks/get raw.
func (d *goStateless) getTask(t *testing.T, id string) (taskState, error) {
	t.Helper()
	s, _, err := d.poll(t, id)
	return s, err
}

// poll sends one tasks/get raw, and returns the task and the poll
// interval it suggests.
func (d *goStateless) poll(t *testing.T, id string) (taskState, time.Duration, error) {
	t.Helper()
	res, err := d.raw(t, "tasks/get", map[string]any{"taskId": id})
	if err != nil {
		return taskState{}, 0, err
	}
	var v struct {
		Status, StatusMessage string
		PollIntervalMs        int64
		Result                struct{ Content []struct{ Text string } }
	}
	if err := json.Unmarshal(res, &v); err != nil {
		t.Fatalf("tasks/get %s: %s: %v", id, res, err)
	}
	s := taskState{Status: v.Status, Message: v.StatusMessage}
	var texts []string
	for _, part := range v.Result.Content {
		texts = append(texts, part.Text)
	}
	s.Text = strings.Join(texts, "\n")
	return s, time.Duration(v.PollIntervalMs) * time.Millisecond, nil
}

// settleTask polls the task raw, at the interval the server suggests,
// until it ends; the test fails on an error, or if it has not ended
// within proctest.Patience.
func (d *goStateless) settleTask(t *testing.T, id string) taskState {
	t.Helper()
	for deadline := time.Now().Add(proctest.Patience); ; {
		s, interval, err := d.poll(t, id)
		switch {
		case err != nil:
			t.Fatalf("tasks/get %s: %v", id, err)
		case s.Status != "working":
			return s
		case time.Now().After(deadline):
			t.Fatalf("task %s still working after %s: %+v", id, proctest.Patience, s)
		}
		time.Sleep(max(interval, 10*time.Millisecond)) // the client's poll interval
	}
}

// cancelTask sends tasks/cancel raw, then settles the task.
func (d *goStateless) cancelTask(t *testing.T, id string) taskState {
	t.Helper()
	if _, err := d.raw(t, "tasks/cancel", map[string]any{"taskId": id}); err != nil {
		t.Fatalf("tasks/cancel %s: %v", id, err)
	}
	return d.settleTask(t, id)
}
