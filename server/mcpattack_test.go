package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// What a client of one credential, or of another agent key, must not reach
// of another agent's: its tasks (tasks/get, tasks/cancel) and its calls
// held for an approval (the retry with their requestState).

// The client capabilities of the tests' requests: the tasks extension, and
// form elicitation.
const (
	tasksCaps  = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	elicitCaps = `{"elicitation":{"form":{}}}`
)

// metaCaps is the _meta of a sessionless request whose client declares
// caps (a JSON object), with more members when extra is not "".
func metaCaps(caps, extra string) string {
	m := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps +
		`,"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}`
	if extra != "" {
		m += "," + extra
	}
	return m
}

// roleToken returns the secret of a new token of the worker role.
func roleToken(t *testing.T, h *host.Host, name string) string {
	t.Helper()
	secret, _, err := h.Store().CreateToken(context.Background(), name, "worker", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// rpc sends one sessionless request as the token ("": the admin's) and
// returns its response, which must be the only message (with 200, or
// with the HTTP status the SDK gives a JSON-RPC error).
func rpc(t *testing.T, url, token, msg string, header map[string]string) rpcResponse {
	t.Helper()
	status, msgs, err := post2026(t, context.Background(), url, token, msg, header)
	if err != nil || len(msgs) != 1 || status != http.StatusOK && msgs[0].Error == nil {
		t.Fatalf("%s: %d %+v %v", msg, status, msgs, err)
	}
	return msgs[0]
}

// rpcError is a JSON-RPC error as the tests read it.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// taskView is a task handle, or a task as tasks/get answers it.
type taskView struct {
	ResultType    string          `json:"resultType"`
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	Result        json.RawMessage `json:"result"`
}

// taskOf decodes a response that must be a result holding a task.
func taskOf(t *testing.T, m rpcResponse) taskView {
	t.Helper()
	var v taskView
	if m.Error != nil || json.Unmarshal(m.Result, &v) != nil || v.TaskID == "" {
		t.Fatalf("want a task: result %s, error %s", m.Result, m.Error)
	}
	return v
}

// startTask calls the gate's hold tool as the token, declaring the tasks
// extension, and returns the id of the task the call became (it holds past
// taskAfter); the call has started.
func startTask(t *testing.T, g *gate, url, token string) string {
	t.Helper()
	v := taskOf(t, rpc(t, url, token, request(1, "tools/call", `{"name":"hold","arguments":{}}`, metaCaps(tasksCaps, "")), nil))
	if v.ResultType != "task" || v.Status != "working" || !strings.HasPrefix(v.TaskID, "task_") {
		t.Fatalf("the hold call: %+v, want a working task handle (resultType task)", v)
	}
	select {
	case <-g.started:
	case <-time.After(proctest.Patience):
		t.Fatalf("the hold call did not start within %s", proctest.Patience)
	}
	return v.TaskID
}

// taskRequest is a tasks method's request for the task, of the agent with
// the key in _meta ("": none).
func taskRequest(id int, method, taskID, key string) string {
	extra := ""
	if key != "" {
		extra = fmt.Sprintf(`"toolhost/agent":%q`, key)
	}
	return request(id, method, fmt.Sprintf(`{"taskId":%q}`, taskID), metaCaps(tasksCaps, extra))
}

// stillRunning fails the test if the gate's hold call has ended.
func stillRunning(t *testing.T, g *gate, when string) {
	t.Helper()
	select {
	case err := <-g.ended:
		t.Fatalf("%s: the hold call ended (%v)", when, err)
	default:
	}
}

// TestMCPTaskBelongsToItsAgent: a task is its agent's alone. Another
// credential (a role token, the admin), and the same credential with
// another agent key (in _meta or the Toolhost-Agent header), get invalid
// params for tasks/get and tasks/cancel of its id, and the task runs on
// untouched; its own agent sees it working, cancels it (the call's context
// is cancelled) and then sees it cancelled.
func TestMCPTaskBelongsToItsAgent(t *testing.T) {
	g := newGate()
	srv, h := serve(t, gateConfig, g.group(), group("console", "console_print"))
	url := srv.URL + "/mcp/worker"
	alice, mallory := roleToken(t, h, "alice"), roleToken(t, h, "mallory")
	id := startTask(t, g, url, alice)

	others := []struct {
		name, token, key string
		header           map[string]string
	}{
		{name: "another role token", token: mallory},
		{name: "another role token, its own key", token: mallory, key: "alice"},
		{name: "the admin", token: ""},
		{name: "the same token, another key in _meta", token: alice, key: "other"},
		{name: "the same token, another key in the header", token: alice, header: map[string]string{"Toolhost-Agent": "other"}},
	}
	for i, o := range others {
		for _, method := range []string{"tasks/get", "tasks/cancel"} {
			m := rpc(t, url, o.token, taskRequest(10+i, method, id, o.key), o.header)
			var e rpcError
			if m.Result != nil || json.Unmarshal(m.Error, &e) != nil || e.Code != -32602 || !strings.Contains(e.Message, id) {
				t.Errorf("%s of alice's task by %s: result %s, error %s; want invalid params (-32602) naming the task", method, o.name, m.Result, m.Error)
			}
		}
	}
	stillRunning(t, g, "after the others' requests")
	if v := taskOf(t, rpc(t, url, alice, taskRequest(20, "tasks/get", id, ""), nil)); v.Status != "working" || v.TaskID != id || v.ResultType != "complete" {
		t.Fatalf("alice's tasks/get after the others': %+v, want her task working", v)
	}

	m := rpc(t, url, alice, taskRequest(21, "tasks/cancel", id, ""), nil)
	if m.Error != nil || !strings.Contains(string(m.Result), `"resultType":"complete"`) {
		t.Fatalf("alice's tasks/cancel: result %s, error %s", m.Result, m.Error)
	}
	if err := g.awaitEnd(t); err == nil {
		t.Error("the cancelled task's call ran to its end: its context was not cancelled")
	}
	if v := taskOf(t, rpc(t, url, alice, taskRequest(22, "tasks/get", id, ""), nil)); v.Status != "cancelled" || v.Result != nil {
		t.Errorf("alice's tasks/get after her tasks/cancel: %+v, want cancelled without a result", v)
	}
}

// TestMCPTaskOutlivesItsRequest: the call of a task runs on once the POST
// that made it has been answered with the task's handle; when it ends,
// tasks/get says completed and carries its result (with its resultType).
func TestMCPTaskOutlivesItsRequest(t *testing.T) {
	g := newGate()
	srv, h := serve(t, gateConfig, g.group(), group("console", "console_print"))
	url := srv.URL + "/mcp/worker"
	alice := roleToken(t, h, "alice")
	id := startTask(t, g, url, alice) // its POST has returned
	if v := taskOf(t, rpc(t, url, alice, taskRequest(2, "tasks/get", id, ""), nil)); v.Status != "working" {
		t.Fatalf("tasks/get once the POST returned: %+v, want working", v)
	}
	stillRunning(t, g, "once the POST returned")
	close(g.open)
	if err := g.awaitEnd(t); err != nil {
		t.Fatalf("the task's call was cancelled (%v), not let run until the gate opened", err)
	}
	var v taskView
	proctest.Eventually(t, "the task is completed", func() bool {
		v = taskOf(t, rpc(t, url, alice, taskRequest(3, "tasks/get", id, ""), nil))
		return v.Status != "working"
	})
	var res struct {
		ResultType string `json:"resultType"`
		IsError    bool   `json:"isError"`
		Content    []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if v.Status != "completed" || json.Unmarshal(v.Result, &res) != nil || res.ResultType != "complete" || res.IsError ||
		len(res.Content) != 1 || res.Content[0].Text != "held" {
		t.Errorf("the ended task: %+v, result %s; want completed with the call's result (held, resultType complete)", v, v.Result)
	}
}

// TestMCPQuickCallNotATask: a call of a client that takes tasks, that
// finishes within taskAfter, is answered with its result, not a task.
func TestMCPQuickCallNotATask(t *testing.T) {
	g := newGate()
	srv, h := serve(t, gateConfig, g.group(), group("console", "console_print"))
	alice := roleToken(t, h, "alice")
	m := rpc(t, srv.URL+"/mcp/worker", alice, request(1, "tools/call", `{"name":"console_print","arguments":{"text":"quick"}}`, metaCaps(tasksCaps, "")), nil)
	var res struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
		Content    []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.ResultType != "complete" || res.TaskID != "" ||
		len(res.Content) != 1 || res.Content[0].Text != "console_print:quick" {
		t.Errorf("a quick call: result %s, error %s; want its result (resultType complete), no task", m.Result, m.Error)
	}
}

// approvalFront serves a worker role whose guarded tool needs an approval
// from the host's queue, with the mcp block m (whose client_approvals may
// let the role's MCP clients decide them).
func approvalFront(t *testing.T, m config.MCP) (string, *host.Host) {
	t.Helper()
	g := group("console", "console_print")
	g.Tools = append(g.Tools, sdk.NewTool("guarded", "Needs approval.", func(_ context.Context, r *sdk.Request[textArgs]) (*sdk.Result, error) {
		return sdk.Text("guarded:" + r.Args.Text), nil
	}, sdk.RequiresApproval()))
	cfg := &config.Config{Roles: []config.Role{{Name: "worker", ToolGroups: []string{"console"}, Pos: "config.hcl:1,1"}},
		Executor: config.Executor{Approver: "queue", ApprovalTimeout: 10 * time.Minute, IdempotencyWindow: time.Hour},
		MCP:      m}
	srv, h := serve(t, cfg, g)
	// The host closes once its calls have returned: one left waiting for
	// an approval (a test failed) is denied first, not waited for until
	// its deadline.
	t.Cleanup(func() {
		for _, ar := range h.Approvals().Pending() {
			_ = h.Approvals().Decide(ar.ID, host.Decision{Kind: host.Deny, Reason: "the test ended"})
		}
	})
	return srv.URL + "/mcp/worker", h
}

// callResult is a tools/call result as the tests read it.
type callResult struct {
	ResultType    string `json:"resultType"`
	IsError       bool   `json:"isError"`
	RequestState  string `json:"requestState"`
	InputRequests map[string]struct {
		Method string `json:"method"`
		Params struct {
			Mode    string `json:"mode"`
			Message string `json:"message"`
		} `json:"params"`
	} `json:"inputRequests"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// text is the result's text content.
func (r callResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// resultOf decodes a response that must be a tools/call result.
func resultOf(t *testing.T, m rpcResponse) callResult {
	t.Helper()
	var r callResult
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		t.Fatalf("want a tools/call result: result %s, error %s", m.Result, m.Error)
	}
	return r
}

// refusedState checks that a response is the protocol's invalid-params
// error naming the requestState: a retry whose state names no call of its
// agent waiting for its client.
func refusedState(t *testing.T, who string, m rpcResponse) {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if m.Error == nil || json.Unmarshal(m.Error, &e) != nil || e.Code != -32602 || !strings.Contains(e.Message, "requestState") {
		t.Errorf("%s: result %s, error %s; want error -32602 naming requestState", who, m.Result, m.Error)
	}
}

// pendingApproval returns the queue's pending approval of the guarded
// tool with the text, waiting for it.
func pendingApproval(t *testing.T, h *host.Host, text string) host.ApprovalRequest {
	t.Helper()
	var found host.ApprovalRequest
	proctest.Eventually(t, "the call of guarded with "+text+" is pending", func() bool {
		for _, ar := range h.Approvals().Pending() {
			var args textArgs
			if ar.Tool == "guarded" && json.Unmarshal(ar.Arguments, &args) == nil && args.Text == text {
				found = ar
				return true
			}
		}
		return false
	})
	return found
}

// askApproval calls guarded with the text as the token, from a client that
// can elicit, and returns the input-required result asking for the
// approval, and the approval pending in the queue.
func askApproval(t *testing.T, url string, h *host.Host, token, text string) (callResult, host.ApprovalRequest) {
	t.Helper()
	r := resultOf(t, rpc(t, url, token, request(1, "tools/call", fmt.Sprintf(`{"name":"guarded","arguments":{"text":%q}}`, text), metaCaps(elicitCaps, "")), nil))
	ask, ok := r.InputRequests["approval"]
	if r.ResultType != "input_required" || r.RequestState == "" || !ok || ask.Method != "elicitation/create" || ask.Params.Mode != "form" {
		t.Fatalf("a call of guarded from a client that can elicit: %+v, want input_required with an approval elicitation and a requestState", r)
	}
	for _, want := range []string{"guarded", fmt.Sprintf(`{"text":%q}`, text), `role "worker"`} {
		if !strings.Contains(ask.Params.Message, want) {
			t.Errorf("the approval's message %q does not name %s", ask.Params.Message, want)
		}
	}
	return r, pendingApproval(t, h, text)
}

// retry is the retry of a call of guarded with the text, the request state
// and the client's answer (a JSON ElicitResult).
func retry(id int, text, state, answer, extra string) string {
	return request(id, "tools/call", fmt.Sprintf(`{"name":"guarded","arguments":{"text":%q},"requestState":%q,"inputResponses":{"approval":%s}}`, text, state, answer),
		metaCaps(elicitCaps, extra))
}

const (
	acceptAnswer  = `{"action":"accept","content":{"approve":true}}`
	declineAnswer = `{"action":"decline"}`
)

// approvalStatus returns the status of the approval's record in the store.
func approvalStatus(t *testing.T, h *host.Host, id string) string {
	t.Helper()
	a, err := h.Store().Approval(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a.Status
}

// TestMCPApprovalBoundToAgent: a call held for its client's approval is
// its agent's alone: another credential, or the same one with another
// agent key, retrying with its requestState and an accepting answer gets
// the protocol's invalid-params error naming the requestState, the call does not run, and its
// approval stays pending. Its own agent's decline denies it
// (approval_denied, recorded denied); a fresh call its agent accepts runs,
// recorded approved.
func TestMCPApprovalBoundToAgent(t *testing.T) {
	url, h := approvalFront(t, config.MCP{ClientApprovals: []string{"worker"}})
	alice, mallory := roleToken(t, h, "alice"), roleToken(t, h, "mallory")
	asked, ar := askApproval(t, url, h, alice, "first")

	for i, o := range []struct {
		name, token, extra string
	}{
		{name: "another role token", token: mallory},
		{name: "the admin", token: ""},
		{name: "the same token, another key", token: alice, extra: `"toolhost/agent":"other"`},
	} {
		refusedState(t, o.name+" retrying alice's call with its requestState", rpc(t, url, o.token, retry(10+i, "first", asked.RequestState, acceptAnswer, o.extra), nil))
	}
	pending := false
	for _, p := range h.Approvals().Pending() {
		pending = pending || p.ID == ar.ID
	}
	if !pending || approvalStatus(t, h, ar.ID) != store.ApprovalPending {
		t.Fatalf("alice's approval after the others' answers: pending in the queue %v, recorded %s; want it pending", pending, approvalStatus(t, h, ar.ID))
	}

	r := resultOf(t, rpc(t, url, alice, retry(20, "first", asked.RequestState, declineAnswer, ""), nil))
	if !r.IsError || !strings.Contains(r.text(), "approval_denied") || r.ResultType != "complete" {
		t.Errorf("alice declining: %+v, want approval_denied", r)
	}
	if s := approvalStatus(t, h, ar.ID); s != store.ApprovalDenied {
		t.Errorf("the declined approval is recorded %s, want %s", s, store.ApprovalDenied)
	}

	asked, ar = askApproval(t, url, h, alice, "second")
	r = resultOf(t, rpc(t, url, alice, retry(21, "second", asked.RequestState, acceptAnswer, ""), nil))
	if r.IsError || r.text() != "guarded:second" || r.ResultType != "complete" {
		t.Errorf("alice accepting: %+v, want the call's result", r)
	}
	if s := approvalStatus(t, h, ar.ID); s != store.ApprovalApproved {
		t.Errorf("the accepted approval is recorded %s, want %s", s, store.ApprovalApproved)
	}
	if a, _ := h.Store().Approval(context.Background(), ar.ID); !strings.HasPrefix(a.DecidedBy, "the MCP client of token/alice/") {
		t.Errorf("the accepted approval records it was decided by %q, want alice's client", a.DecidedBy)
	}
}

// TestMCPHeldCallEndsWithItsAgent: a call held for its client's approval
// ends when its agent does (here the session cap ends it, idle, to make
// room for another key of its credential): its approval is cancelled, not
// left for the operator to approve and run for nobody.
func TestMCPHeldCallEndsWithItsAgent(t *testing.T) {
	url, h := approvalFront(t, config.MCP{ClientApprovals: []string{"worker"}, MaxSessionsPerCredential: 1})
	alice := roleToken(t, h, "alice")
	_, ar := askApproval(t, url, h, alice, "orphan")
	if r := resultOf(t, rpc(t, url, alice, request(2, "tools/list", `{}`, metaCaps(elicitCaps, `"toolhost/agent":"next"`)), nil)); r.IsError {
		t.Fatalf("another key of alice: %+v", r)
	}
	proctest.Eventually(t, "the orphaned call's approval is cancelled", func() bool {
		return approvalStatus(t, h, ar.ID) == store.ApprovalCancelled
	})
	if err := h.Approvals().Decide(ar.ID, host.Decision{Kind: host.Approve, By: "admin"}); err == nil {
		t.Error("the operator approved the call of an agent that had ended")
	}
}

// TestMCPApprovalQueueOnly: the caller never judges itself. A client that
// cannot elicit, and one that can whose role the operator has not named in
// mcp { client_approvals } (the attack: an agent's own client answering
// its approval), is not asked: its call waits in the queue, sessionless or
// in a 2025 session, no elicitation reaches it, an answer it makes up is
// refused, and the call is answered with its result once the queue
// decides, the record naming the operator's credential.
func TestMCPApprovalQueueOnly(t *testing.T) {
	url, h := approvalFront(t, config.MCP{})
	token := roleToken(t, h, "alice")
	for _, caps := range []string{"{}", elicitCaps} {
		t.Run("caps "+caps, func(t *testing.T) { approvalQueueOnly(t, url, h, token, caps) })
	}
}

func approvalQueueOnly(t *testing.T, url string, h *host.Host, token, caps string) {
	for _, tt := range []struct {
		name string
		call func(t *testing.T, text string) func() string // makes the client; its call, returning the response
	}{
		{"sessionless", func(t *testing.T, text string) func() string {
			return func() string {
				_, msgs, err := post2026(t, context.Background(), url, token, request(1, "tools/call", fmt.Sprintf(`{"name":"guarded","arguments":{"text":%q}}`, text), metaCaps(caps, "")), nil)
				if err != nil || len(msgs) != 1 {
					return fmt.Sprintf("%+v %v", msgs, err)
				}
				return string(msgs[0].Result)
			}
		}},
		{"2025 session", func(t *testing.T, text string) func() string {
			s := &httpSession{url: url, version: "2025-11-25", token: token}
			s.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"raw","version":"1"}}}`)
			s.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			// A request that a server asking the client (which cannot
			// answer) would hold open ends with the session, before the
			// server's Close waits for it.
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(func() {
				if resp, err := http.DefaultClient.Do(s.request(context.Background(), "DELETE", "")); err == nil {
					resp.Body.Close()
				}
				cancel()
			})
			return func() string {
				resp, err := http.DefaultClient.Do(s.request(ctx, "POST", call(1, "guarded", fmt.Sprintf(`{"text":%q}`, text), "")))
				if err != nil {
					return err.Error()
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				return fmt.Sprintf("%s %s %v", resp.Status, body, err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := fmt.Sprintf("%s-%d", strings.ReplaceAll(tt.name, " ", "-"), strings.Count(caps, "form"))
			done := make(chan string, 1)
			send := tt.call(t, text)
			go func() { done <- send() }()
			ar := pendingApproval(t, h, text)
			select {
			case got := <-done:
				t.Fatalf("the call was answered before the queue decided: %s", got)
			default:
			}
			// An answer the client makes up for its own call is refused.
			refusedState(t, "the client approving its own call", rpc(t, url, token, retry(5, text, strings.Repeat("0", 32), acceptAnswer, ""), nil))
			if s := approvalStatus(t, h, ar.ID); s != store.ApprovalPending {
				t.Fatalf("the approval after the client's answer is %s, want pending", s)
			}
			if err := h.Approvals().Decide(ar.ID, host.Decision{Kind: host.Approve, Reason: "the test", By: "admin"}); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-done:
				if !strings.Contains(got, `"text":"guarded:`+text+`"`) || strings.Contains(got, "input_required") || strings.Contains(got, "elicitation") {
					t.Errorf("the call once approved: %s, want its result", got)
				}
			case <-time.After(proctest.Patience):
				t.Fatalf("the call was not answered within %s of its approval", proctest.Patience)
			}
			if a, _ := h.Store().Approval(context.Background(), ar.ID); a.Status != store.ApprovalApproved || a.DecidedBy != "admin" || !strings.HasPrefix(a.Credential, "token/alice/") {
				t.Errorf("the approval is recorded %s by %q for %q, want %s by admin for alice's token", a.Status, a.DecidedBy, a.Credential, store.ApprovalApproved)
			}
		})
	}
}

// TestMCPCloseEndsHeldWork: the server's Close cancels the calls running as
// tasks and those held for their clients' approvals: the host's Close does
// not wait for them (a held call would keep it until the approval's
// deadline, ten minutes here).
func TestMCPCloseEndsHeldWork(t *testing.T) {
	g := newGate()
	guarded := group("console", "console_print")
	guarded.Tools = append(guarded.Tools, sdk.NewTool("guarded", "Needs approval.", func(_ context.Context, r *sdk.Request[textArgs]) (*sdk.Result, error) {
		return sdk.Text("guarded:" + r.Args.Text), nil
	}, sdk.RequiresApproval()))
	cfg := &config.Config{Roles: []config.Role{{Name: "worker", ToolGroups: []string{"gate", "console"}, Pos: "config.hcl:1,1"}},
		Executor: config.Executor{Approver: "queue", ApprovalTimeout: 10 * time.Minute, IdempotencyWindow: time.Hour},
		MCP:      config.MCP{ClientApprovals: []string{"worker"}}}
	h := startHost(t, withTestToken(cfg))
	for _, grp := range []*sdk.Group{g.group(), guarded} {
		if err := h.Modules().Register(context.Background(), grp); err != nil {
			t.Fatal(err)
		}
	}
	handler, err := New(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	url := srv.URL + "/mcp/worker"
	startTask(t, g, url, "")
	askApproval(t, url, h, "", "held")

	handler.Close()
	if err := g.awaitEnd(t); err == nil {
		t.Error("the task's call ran on after Close")
	}
	proctest.Eventually(t, "the held call to leave the approval queue", func() bool { return len(h.Approvals().Pending()) == 0 })
}

// TestMCPIdentityHeadersIgnored: a client cannot name its own identity. The
// front once passed the caller's credential and principal to its handlers
// in the Toolhost-Credential and Toolhost-Principal request headers (and
// stripped the client's); it now passes them in the request's context, and
// a client that sends those headers, naming another token's credential, the
// admin's, or a principal, gets nothing from them: not another credential's
// task, nor an agent of another credential, nor events naming the principal
// it claims, sessionless or in a session.
func TestMCPIdentityHeadersIgnored(t *testing.T) {
	g := newGate()
	srv, h := serve(t, gateConfig, g.group(), group("console", "console_print"))
	url := srv.URL + "/mcp/worker"
	alice, bob := roleToken(t, h, "alice"), roleToken(t, h, "bob")
	bobTask := startTask(t, g, url, bob)
	bobAgents := roleAgents(t, h, "worker")
	if len(bobAgents) != 1 || !strings.HasPrefix(bobAgents[0].Credential, "token/bob/") {
		t.Fatalf("bob's task's agent: %+v", bobAgents)
	}
	for _, claimed := range []string{bobAgents[0].Credential, store.CredentialAdmin} {
		spoof := map[string]string{"Toolhost-Credential": claimed, "Toolhost-Principal": "mallory"}
		m := rpc(t, url, alice, taskRequest(2, "tasks/get", bobTask, ""), spoof)
		var e rpcError
		if m.Result != nil || json.Unmarshal(m.Error, &e) != nil || e.Code != -32602 {
			t.Errorf("alice's tasks/get of bob's task claiming %s: result %s, error %s; want invalid params", claimed, m.Result, m.Error)
		}
		m = rpc(t, url, alice, request(3, "tools/call", `{"name":"console_print","arguments":{"text":"s"}}`, meta2026("")), spoof)
		if m.Error != nil || !strings.Contains(string(m.Result), "console_print:s") {
			t.Errorf("alice's sessionless call claiming %s: result %s, error %s", claimed, m.Result, m.Error)
		}

		// In a session: the initialize and every request after it claim.
		cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+alice)
			for k, v := range spoof {
				r.Header.Set(k, v)
			}
			return plainTransport.RoundTrip(r)
		})}})
		if text, isErr := mcptest.CallText(t, cs, "console_print", map[string]any{"text": "in a session"}); isErr {
			t.Errorf("alice's call in a session claiming %s: %s", claimed, text)
		}
		_ = cs.Close()
	}
	stillRunning(t, g, "after alice's requests")

	agents := roleAgents(t, h, "worker")
	alices := 0
	for _, a := range agents {
		switch {
		case a.ID == bobAgents[0].ID:
		case strings.HasPrefix(a.Credential, "token/alice/"):
			alices++
		default:
			t.Errorf("an agent of credential %q: alice's requests made it, or the headers reached it", a.Credential)
		}
	}
	if alices != 3 { // sessionless (one for both claims: her credential's), and a session each
		t.Errorf("alice's requests made %d agents of hers, want 3: %+v", alices, agents)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, err := h.Store().Events(context.Background(), store.EventFilter{Type: "tool_call."})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if p, ok := e.Payload["principal"]; ok && p != "" {
			t.Errorf("event %s of %s names principal %v: a role token's calls name none", e.Type, e.Tool, p)
		}
	}
}

// TestMCPReinitializeRefused: an initialize inside a session that has one
// already, or one without params, is answered with an error and the host
// keeps serving: the SDK answers such a request with a typed nil result,
// which the front's middleware once dereferenced, on a goroutine of the
// SDK's where the panic ended the whole process (any role token could stop
// the host with two requests).
func TestMCPReinitializeRefused(t *testing.T) {
	init := func(id int, version string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, id, version)
	}
	srv, h := serve(t, frontConfig, group("console", "console_print"))
	for _, version := range []string{"2024-11-05", "2025-06-18", "2025-11-25"} {
		t.Run("http "+version, func(t *testing.T) {
			s := &httpSession{url: srv.URL + "/mcp/worker", version: version}
			s.post(t, init(0, version))
			s.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			for i, msg := range []string{init(1, version), `{"jsonrpc":"2.0","id":2,"method":"initialize"}`} {
				resp, err := http.DefaultClient.Do(s.request(context.Background(), "POST", msg))
				if err != nil {
					t.Fatalf("initialize %d in the session: %v (the host is gone?)", i+1, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 4 && !strings.Contains(string(body), `"error"`) {
					t.Errorf("initialize %d in the session: %s %s, want a refusal", i+1, resp.Status, body)
				}
			}
			if _, msgs := s.post(t, call(3, "console_print", `{"text":"still"}`, "")); len(msgs) != 1 || !strings.Contains(string(msgs[0].Result), "console_print:still") {
				t.Errorf("the session after: %+v", msgs)
			}
		})
	}
	t.Run("stdio", func(t *testing.T) {
		c := newLineClient(t, func(tr mcp.Transport) error { return ServeMCP(context.Background(), h, "worker", tr) })
		c.roundTrip(t, init(0, "2025-11-25"), 0)
		c.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if msgs := c.roundTrip(t, init(1, "2025-11-25"), 1); msgs[len(msgs)-1].Error == nil {
			t.Errorf("a second initialize: %+v, want an error", msgs)
		}
		if msgs := c.roundTrip(t, call(2, "console_print", `{"text":"still"}`, ""), 2); !strings.Contains(string(msgs[len(msgs)-1].Result), "console_print:still") {
			t.Errorf("the connection after: %+v", msgs)
		}
	})
}
