package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// TestTypeScriptSDKv2 drives the MCP front with the TypeScript SDK v2
// client (@modelcontextprotocol/client 2.4.0, e2e/tsclient/client_v2.mjs)
// and its tasks extension (@modelcontextprotocol/ext-tasks), over
// streamable HTTP (a real `toolhost serve`, the role's bearer token) and
// stdio (`toolhost mcp -role`), in each of the SDK's negotiation modes:
// auto (server/discover first) and pinned to 2026-07-28 must both reach the
// stateless 2026-07-28 era, legacy the 2025-11-25 session era. In each:
// connect, list, call, progress, cancel (the command stops on the machine),
// an approval through elicitation, and, in 2026-07-28, a run_command as a
// task of the tasks extension, polled to its end, and one cancelled.
func TestTypeScriptSDKv2(t *testing.T) {
	node, script := v2Script(t)
	srv := newServe(t, fmt.Sprintf(erasConfig, pluginDir))
	srv.start()
	token := srv.roleToken("developer", "ts-v2-client", "")
	prompt := rolePrompt(t, srv.cfg, "developer")

	for _, tr := range []struct {
		name string
		args []string // the script's, after the mode
		env  []string
	}{
		{"http", []string{"http", srv.base + "/mcp/developer"}, []string{"TOOLHOST_TOKEN=" + token}},
		{"stdio", []string{"stdio", srv.bin, "mcp", "-role", "developer", "-config", srv.cfg}, nil},
	} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []struct {
				name, era, version string // the SDK's mode; the era and version it must reach
			}{
				{"auto", "modern", "2026-07-28"},
				{"2026-07-28", "modern", "2026-07-28"},
				{"legacy", "legacy", "2025-11-25"},
			} {
				t.Run(mode.name, func(t *testing.T) {
					args := append([]string{script, mode.name}, tr.args...)
					c := &v2Client{nodeClient: startNodeClient(t, "the TypeScript SDK v2 client", node, srv.dir, tr.env, args...), http: tr.name == "http"}
					c.checkConnect(t, mode.era, mode.version, prompt)
					t.Run("wire", func(t *testing.T) { c.checkNegotiation(t, mode.era, mode.version) })
					t.Run("list", func(t *testing.T) { c.checkList(t, mode.era) })
					t.Run("call", func(t *testing.T) { c.checkCall(t, filepath.Join(srv.dir, "workspace")) })
					t.Run("progress", func(t *testing.T) { c.checkProgress(t) })
					t.Run("cancel", func(t *testing.T) { c.checkCancel(t) })
					t.Run("approval", func(t *testing.T) { c.checkApproval(t, mode.era, filepath.Join(srv.dir, "workspace")) })
					if mode.era == "modern" {
						t.Run("task", func(t *testing.T) { c.checkTask(t) })
						t.Run("task-cancel", func(t *testing.T) { c.checkTaskCancel(t) })
					}
					c.ask(t, map[string]any{"op": "alive"}, nil)
				})
			}
		})
	}
}

// v2Script returns the Node.js that runs the TypeScript SDK v2 client and
// the client's script, e2e/tsclient/client_v2.mjs, once the SDK and its
// tasks extension are installed.
func v2Script(t *testing.T) (node, script string) {
	t.Helper()
	node = npmNode(t)
	mcptest.NPMPackage(t, "@modelcontextprotocol/client")
	mcptest.NPMPackage(t, "@modelcontextprotocol/ext-tasks")
	script, err := filepath.Abs(filepath.Join("tsclient", "client_v2.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	return node, script
}

// v2Client is client_v2.mjs running, connected.
type v2Client struct {
	*nodeClient
	http bool
}

// v2Hello is what the client reports of its connection.
type v2Hello struct {
	Instructions       string
	ServerVersion      struct{ Name, Version string }
	Era                string
	ProtocolVersion    string
	ServerCapabilities map[string]any
	Discovered         bool // the connection adopted a server/discover result
}

// v2Wire is one entry of the client's record of the wire: a JSON-RPC
// message it sent (out) or received (in), or an HTTP request it made.
type v2Wire struct {
	Dir             string
	Msg             map[string]any
	Method          string
	Headers         map[string]string
	Body            any
	Status          int
	ResponseType    string
	ResponseSession string
}

// String is the entry in one line.
func (w v2Wire) String() string {
	if w.Dir == "http" {
		b, _ := json.Marshal(w.Body)
		return fmt.Sprintf("HTTP %s %v → %d %s session %q: %s", w.Method, w.Headers, w.Status, w.ResponseType, w.ResponseSession, clip(string(b), 400))
	}
	b, _ := json.Marshal(w.Msg)
	return w.Dir + " " + clip(string(b), 1200)
}

// method is the JSON-RPC method of a message or an HTTP request's body.
func (w v2Wire) method() string {
	msg := w.Msg
	if w.Dir == "http" {
		msg, _ = w.Body.(map[string]any)
	}
	m, _ := msg["method"].(string)
	return m
}

// wire returns the client's record of the wire from entry since, and where
// it ends.
func (c *v2Client) wire(t *testing.T, since int) ([]v2Wire, int) {
	t.Helper()
	var reply struct {
		Wire []v2Wire
		Next int
	}
	c.ask(t, map[string]any{"op": "wire", "since": since}, &reply)
	return reply.Wire, reply.Next
}

// mark is where the client's record of the wire ends now.
func (c *v2Client) mark(t *testing.T) int {
	t.Helper()
	_, next := c.wire(t, 1<<30)
	return next
}

// dump is the record of the wire from since, for a failure's message.
func (c *v2Client) dump(t *testing.T, since int) string {
	t.Helper()
	entries, _ := c.wire(t, since)
	var lines []string
	for _, e := range entries {
		lines = append(lines, "  "+e.String())
	}
	return "the wire:\n" + strings.Join(lines, "\n")
}

// checkConnect: the connection reached the era and version wanted, with
// the role's prompt as instructions and toolhost as the server.
func (c *v2Client) checkConnect(t *testing.T, era, version, prompt string) {
	t.Helper()
	var hello v2Hello
	if err := json.Unmarshal(c.hello, &hello); err != nil {
		t.Fatal(err)
	}
	if hello.Era != era || hello.ProtocolVersion != version {
		t.Errorf("negotiated era %q version %q, want %q %q\n%s", hello.Era, hello.ProtocolVersion, era, version, c.dump(t, 0))
	}
	if hello.Instructions != prompt {
		t.Errorf("instructions:\n%s\nwant the role's prompt:\n%s", hello.Instructions, prompt)
	}
	if v := hello.ServerVersion; v.Name != "toolhost" || v.Version == "" {
		t.Errorf("serverInfo %+v, want toolhost and its version", v)
	}
}

// checkNegotiation: what went over the wire to connect, and the shape of
// every request since. In 2026-07-28: server/discover and no initialize
// (over stdio the SDK probes on a sibling process it then ends, so the
// connection's own pipe shows neither), every request carrying the
// protocol version in its _meta and, over HTTP, the Mcp-Protocol-Version
// and Mcp-Method headers and no session. In 2025-11-25: initialize, and
// over HTTP a session.
func (c *v2Client) checkNegotiation(t *testing.T, era, version string) {
	var hello v2Hello
	_ = json.Unmarshal(c.hello, &hello)
	entries, _ := c.wire(t, 0)
	var methods []string
	for _, e := range entries {
		if e.Dir == "out" && e.method() != "" {
			methods = append(methods, e.method())
		}
	}
	switch era {
	case "modern":
		if !hello.Discovered {
			t.Errorf("the connection has no server/discover result")
		}
		if c.http && (len(methods) == 0 || methods[0] != "server/discover") || slices.Contains(methods, "initialize") {
			t.Errorf("requests %q: want server/discover first and no initialize\n%s", methods, c.dump(t, 0))
		}
		for _, e := range entries {
			if e.Dir == "out" && e.Msg["id"] != nil && e.method() != "" {
				params, _ := e.Msg["params"].(map[string]any)
				meta, _ := params["_meta"].(map[string]any)
				if meta["io.modelcontextprotocol/protocolVersion"] != version {
					t.Errorf("a request without the protocol version in its _meta: %s", e)
				}
			}
			if e.Dir == "http" && e.Method == "POST" && e.method() != "" {
				if e.Headers["mcp-protocol-version"] != version || e.Headers["mcp-method"] != e.method() {
					t.Errorf("HTTP request without Mcp-Protocol-Version %s and Mcp-Method: %s", version, e)
				}
				if e.Headers["mcp-session-id"] != "" || e.ResponseSession != "" {
					t.Errorf("a session in the stateless era: %s", e)
				}
			}
		}
	case "legacy":
		if len(methods) == 0 || methods[0] != "initialize" || slices.Contains(methods, "server/discover") {
			t.Errorf("requests %q: want initialize first and no server/discover\n%s", methods, c.dump(t, 0))
		}
		if c.http {
			sessions := 0
			for _, e := range entries {
				if e.Dir == "http" && e.ResponseSession != "" {
					sessions++
				}
			}
			if sessions == 0 {
				t.Errorf("no Mcp-Session-Id in the 2025-11-25 session era\n%s", c.dump(t, 0))
			}
		}
	}
	for _, e := range entries {
		if e.Dir == "http" && e.Status >= 400 {
			t.Errorf("HTTP %d: %s", e.Status, e)
		}
	}
}

// checkList: the role's tools are listed, each with a title, in the same
// order twice.
func (c *v2Client) checkList(t *testing.T, era string) {
	mark := c.mark(t)
	var first, second struct {
		Tools []struct {
			Name, Title string
			InputSchema map[string]any
		}
	}
	c.ask(t, map[string]any{"op": "tools"}, &first)
	c.ask(t, map[string]any{"op": "tools"}, &second)
	var names, again []string
	for _, tool := range first.Tools {
		names = append(names, tool.Name)
		if tool.Title == "" {
			t.Errorf("%s has no title", tool.Name)
		}
		if tool.InputSchema["type"] != "object" {
			t.Errorf("%s: inputSchema %v", tool.Name, tool.InputSchema)
		}
	}
	for _, tool := range second.Tools {
		again = append(again, tool.Name)
	}
	sorted := slices.Sorted(slices.Values(names))
	if !slices.Equal(sorted, developerTools) {
		t.Errorf("tools %q, want %q\n%s", names, developerTools, c.dump(t, mark))
	}
	if !slices.Equal(names, again) {
		t.Errorf("tools/list in another order the second time: %q then %q", names, again)
	}
}

// v2Call is the script's answer to a call.
type v2Call struct {
	Result *struct {
		Content []struct {
			Type, Text string
		}
		StructuredContent json.RawMessage
		IsError           bool
	}
	SDKError string `json:"sdkError"`
	Progress []struct {
		Progress, Total float64
		Message         string
	}
	Elicitations []struct {
		Params struct {
			Mode            string
			Message         string
			RequestedSchema json.RawMessage
		}
		Answer json.RawMessage
	}
	Errors    []string
	CallError string `json:"callError"`
}

// text joins the result's text content.
func (r v2Call) text() string {
	var texts []string
	if r.Result != nil {
		for _, part := range r.Result.Content {
			texts = append(texts, part.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// call calls a tool and fails the test unless it returns a result that is
// not an error.
func (c *v2Client) call(t *testing.T, req map[string]any) v2Call {
	t.Helper()
	mark := c.mark(t)
	req["op"] = "call"
	var res v2Call
	c.ask(t, req, &res)
	switch {
	case res.SDKError != "":
		t.Fatalf("%s: the SDK threw: %s\n%s", req["name"], res.SDKError, c.dump(t, mark))
	case res.Result == nil:
		t.Fatalf("%s: no result", req["name"])
	case res.Result.IsError:
		t.Fatalf("%s: isError: %s", req["name"], res.text())
	}
	return res
}

// checkCall: get_workspace_info's structured result (the SDK validates it
// against the outputSchema) and a run_command's output.
func (c *v2Client) checkCall(t *testing.T, workspace string) {
	res := c.call(t, map[string]any{"name": "get_workspace_info"})
	if !strings.Contains(string(res.Result.StructuredContent), workspace) {
		t.Errorf("structuredContent %s does not name the workspace %s", res.Result.StructuredContent, workspace)
	}
	marker := proctest.Marker()
	res = c.call(t, map[string]any{"name": "run_command", "arguments": map[string]any{"command": "echo called " + marker}})
	if !strings.Contains(res.text(), "called "+marker) {
		t.Errorf("run_command: %q", res.text())
	}
}

// checkProgress: run_command's lines come as progress notifications.
func (c *v2Client) checkProgress(t *testing.T) {
	res := c.call(t, map[string]any{"name": "run_command", "progress": true, "arguments": map[string]any{
		"command": "echo one; sleep 0.3; echo two; sleep 0.3; echo three; sleep 0.3"}})
	var messages []string
	for i, p := range res.Progress {
		if i > 0 && p.Progress <= res.Progress[i-1].Progress {
			t.Errorf("progress did not increase: %+v", res.Progress)
		}
		messages = append(messages, p.Message)
	}
	if !slices.Equal(messages, []string{"one", "two", "three"}) {
		t.Errorf("progress messages %q, want one, two, three (the SDK's errors: %q)", messages, res.Errors)
	}
}

// checkCancel: a run_command sleeping for long, aborted by the client, no
// longer runs on the machine, and the connection goes on.
func (c *v2Client) checkCancel(t *testing.T) {
	marker := proctest.Marker()
	mark := c.mark(t)
	c.ask(t, map[string]any{"op": "start", "id": "sleeper", "name": "run_command",
		"arguments": map[string]any{"command": "sleep " + marker, "timeout_seconds": 600}}, nil)
	for deadline := time.Now().Add(proctest.Patience); proctest.Running("sleep", marker) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			var res v2Call
			c.ask(t, map[string]any{"op": "abort", "id": "sleeper"}, &res)
			t.Fatalf("sleep %s did not start in %s: %q %s\n%s", marker, proctest.Patience, res.text(), res.CallError, c.dump(t, mark))
		}
	}
	var res v2Call
	c.ask(t, map[string]any{"op": "abort", "id": "sleeper"}, &res)
	if res.CallError == "" {
		t.Errorf("the aborted call ended with a result: %q", res.text())
	}
	aborted := time.Now()
	for deadline := time.Now().Add(proctest.Patience); proctest.Running("sleep", marker) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the aborted call's sleep still runs %s later\n%s", proctest.Patience, c.dump(t, mark))
		}
	}
	t.Logf("sleep gone %s after the abort", time.Since(aborted).Round(time.Millisecond))
	c.ask(t, map[string]any{"op": "alive"}, nil)
}

// checkApproval: write_file requires an approval; the client, which can
// elicit, is asked once (through an input_required result in 2026-07-28,
// an elicitation/create request in 2025-11-25) with a message naming the
// tool, its arguments and the role; it accepts, and the file is written.
func (c *v2Client) checkApproval(t *testing.T, era, workspace string) {
	marker := proctest.Marker()
	name := "approved-" + marker + ".txt"
	mark := c.mark(t)
	var res v2Call
	c.ask(t, map[string]any{"op": "call", "name": "write_file", "arguments": map[string]any{"path": name, "content": "content " + marker}}, &res)
	if len(res.Elicitations) != 1 {
		t.Fatalf("%d elicitations, want 1 naming write_file; the call ended with %q %s\n%s",
			len(res.Elicitations), res.text(), res.SDKError, c.dump(t, mark))
	}
	e := res.Elicitations[0].Params
	for _, want := range []string{"write_file", name, "developer"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("the elicitation's message does not name %q: %q (schema %s)", want, e.Message, e.RequestedSchema)
		}
	}
	if res.SDKError != "" || res.Result == nil || res.Result.IsError {
		t.Fatalf("the approved call: %q %s\n%s", res.text(), res.SDKError, c.dump(t, mark))
	}
	if b, err := os.ReadFile(filepath.Join(workspace, name)); err != nil || string(b) != "content "+marker {
		t.Errorf("the approved write: %q, %v", b, err)
	}
	// How the request for input came.
	entries, _ := c.wire(t, mark)
	var inputRequired, elicitRequest, retried bool
	for _, w := range entries {
		if w.Dir == "in" && w.method() == "elicitation/create" {
			elicitRequest = true
		}
		if result, _ := w.Msg["result"].(map[string]any); w.Dir == "in" && result["resultType"] == "input_required" {
			inputRequired = true
		}
		if params, _ := w.Msg["params"].(map[string]any); w.Dir == "out" && w.method() == "tools/call" && params["inputResponses"] != nil {
			retried = true
		}
	}
	switch {
	case era == "modern" && (!inputRequired || !retried || elicitRequest):
		t.Errorf("2026-07-28: input_required %v, the call retried with inputResponses %v, an elicitation/create request %v; want an input_required result, then the retry\n%s",
			inputRequired, retried, elicitRequest, c.dump(t, mark))
	case era == "legacy" && !elicitRequest:
		t.Errorf("2025-11-25: no elicitation/create request from the server\n%s", c.dump(t, mark))
	}
}

// v2Task is the script's answer about a task.
type v2Task struct {
	Kind    string
	TaskID  string `json:"taskId"`
	Outcome struct {
		Status string
		Result *struct {
			Content []struct{ Type, Text string }
			IsError bool
		}
		Error string
		Task  *struct { // the task as last seen
			TaskID        string `json:"taskId"`
			Status        string
			StatusMessage string
		}
	}
}

// scriptTimeout bounds the script's waits on the server (a task's end, a
// call made as a task), so that it answers, if only that it gave up,
// before the test stops reading its answers.
const scriptTimeout = proctest.Patience - 10*time.Second

// startTask calls run_command with command as a task of the tasks
// extension and fails the test unless the server made it one.
func (c *v2Client) startTask(t *testing.T, id, command string, mark int) v2Task {
	t.Helper()
	var task v2Task
	c.ask(t, map[string]any{"op": "task", "id": id, "name": "run_command", "timeoutMs": scriptTimeout.Milliseconds(),
		"arguments": map[string]any{"command": command, "timeout_seconds": 120}}, &task)
	if task.Kind != "task" || task.TaskID == "" {
		t.Fatalf("run_command ran as %q (task %q), want a task\n%s", task.Kind, task.TaskID, c.dump(t, mark))
	}
	return task
}

// sent counts the requests of method the client sent from mark on.
func (c *v2Client) sent(t *testing.T, mark int, method string) int {
	t.Helper()
	entries, _ := c.wire(t, mark)
	n := 0
	for _, e := range entries {
		if e.Dir == "out" && e.method() == method {
			n++
		}
	}
	return n
}

// checkTask: a run_command of a few seconds, asked to run as a task, is
// created as one (resultType "task"), polled with tasks/get and completes
// with the command's output.
func (c *v2Client) checkTask(t *testing.T) {
	if caps, _ := json.Marshal(c.hello); !strings.Contains(string(caps), "io.modelcontextprotocol/tasks") {
		t.Errorf("the server's capabilities do not name the tasks extension: %s", caps)
	}
	marker := proctest.Marker()
	mark := c.mark(t)
	c.startTask(t, "short", "sleep 2; echo task done "+marker, mark)
	var done v2Task
	c.ask(t, map[string]any{"op": "settle", "id": "short"}, &done)
	if done.Outcome.Status != "completed" || done.Outcome.Result == nil {
		t.Fatalf("the task ended %+v\n%s", done.Outcome, c.dump(t, mark))
	}
	var texts []string
	for _, part := range done.Outcome.Result.Content {
		texts = append(texts, part.Text)
	}
	if !strings.Contains(strings.Join(texts, "\n"), "task done "+marker) || done.Outcome.Result.IsError {
		t.Errorf("the task's result: %+v", done.Outcome.Result)
	}
	if n := c.sent(t, mark, "tasks/get"); n == 0 {
		t.Errorf("the task completed without a tasks/get\n%s", c.dump(t, mark))
	}
}

// checkTaskCancel: a task cancelled with tasks/cancel ends cancelled, and
// its command no longer runs on the machine.
func (c *v2Client) checkTaskCancel(t *testing.T) {
	marker := proctest.Marker()
	mark := c.mark(t)
	c.startTask(t, "long", "sleep "+marker, mark)
	proctest.Eventually(t, "the task's sleep runs", func() bool { return proctest.Running("sleep", marker) > 0 })
	var done v2Task
	c.ask(t, map[string]any{"op": "cancel", "id": "long"}, &done)
	if done.Outcome.Status != "cancelled" {
		t.Errorf("the cancelled task ended %+v", done.Outcome)
	}
	if n := c.sent(t, mark, "tasks/cancel"); n != 1 {
		t.Errorf("%d tasks/cancel requests, want 1\n%s", n, c.dump(t, mark))
	}
	proctest.Eventually(t, "the cancelled task's sleep is gone", func() bool { return proctest.Running("sleep", marker) == 0 })
}
