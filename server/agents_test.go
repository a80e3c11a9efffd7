package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

// agentScript is the model of the "helper" role: print, answer, then
// answer every message.
const agentScript = `{"roles": {"helper": [
  {"tool_calls": [{"name": "console_print", "arguments": {"text": "working on {{.Task}}"}}]},
  {"final_answer": "done: {{.Task}}"},
  {"final_answer": "reply: {{.Last}}", "repeat": -1}
]}}`

// agentServer serves a host with a runtime whose model plays agentScript,
// and a stored role "helper" with the console group.
func agentServer(t *testing.T) (*httptest.Server, *host.Host, *agents.Runtime) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	if err := os.WriteFile(script, []byte(agentScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, "data_dir = %q\n", filepath.Join(dir, "data")), filepath.Join(dir, "config.hcl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := startHost(t, withTestToken(cfg))
	ctx := context.Background()
	provider, err := model.NewScripted(script)
	if err != nil {
		t.Fatal(err)
	}
	rt := agents.New(h, &agents.Options{Provider: provider, RunAgents: true, Adopt: true, Console: io.Discard, WatchEvery: 20 * time.Millisecond})
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: "helper", Description: "Helps.", ToolGroups: []string{"console"}}); err != nil {
		t.Fatal(err)
	}
	return newHTTPServer(t, h, &Options{Runtime: rt}), h, rt
}

// settle waits until the agent and its descendants are idle and their
// events are stored.
func settle(t *testing.T, h *host.Host, rt *agents.Runtime, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// findNode returns the first node of the tree (depth first) that ok accepts.
func findNode(n *agents.Node, ok func(*agents.Node) bool) *agents.Node {
	if ok(n) {
		return n
	}
	for _, c := range n.Children {
		if f := findNode(c, ok); f != nil {
			return f
		}
	}
	return nil
}

func TestAgentsAPI(t *testing.T) {
	srv, h, rt := agentServer(t)
	api := srv.URL + "/api/agents"

	var a agents.AgentSummary
	if code := do(t, "POST", api, spawnBody{Role: "helper", Task: "sum"}, &a); code != 201 {
		t.Fatalf("spawn = %d %+v", code, a)
	}
	if a.ID == "" || a.Role != "helper" || a.Kind != store.AgentRuntime || a.Task != "sum" {
		t.Fatalf("spawned %+v", a)
	}
	settle(t, h, rt, a.ID)

	var d agents.AgentDetail
	if code := do(t, "GET", api+"/"+a.ID, nil, &d); code != 200 {
		t.Fatalf("show = %d", code)
	}
	if d.Status != store.StatusWaiting || d.Answer != "done: sum" || d.Turns != 2 || d.Tokens <= 0 || d.Role != "helper" {
		t.Fatalf("after the task: %+v", d.Agent)
	}
	var roles []string
	for _, m := range d.Messages {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []string{"user", "assistant", "tool", "assistant"}) || d.Messages[0].Content != "sum" ||
		!strings.Contains(string(d.Messages[1].ToolCalls), "console_print") || d.Messages[3].Content != "done: sum" {
		t.Fatalf("messages = %+v", d.Messages)
	}

	var tree agents.Node
	if code := do(t, "GET", api+"/"+a.ID+"/tree", nil, &tree); code != 200 {
		t.Fatalf("tree = %d", code)
	}
	call := findNode(&tree, func(n *agents.Node) bool { return n.Kind == "call" && strings.HasPrefix(n.Title, "console_print") })
	if tree.Kind != "agent" || tree.ID != a.ID || call == nil || call.Status != "ok" {
		t.Fatalf("tree = %+v, console_print call %+v", tree, call)
	}

	// An agent without a task waits; it is listed before the first (the
	// newest first, down to the root agent every store holds).
	var child agents.AgentSummary
	if code := do(t, "POST", api, spawnBody{Role: "helper", ParentID: a.ID}, &child); code != 201 || child.ParentID != a.ID {
		t.Fatalf("spawn without a task = %d %+v", code, child)
	}
	settle(t, h, rt, child.ID)
	var list []agents.AgentSummary
	if code := do(t, "GET", api, nil, &list); code != 200 || len(list) != 3 || list[2].ID != "root" || list[1].ID != a.ID || list[0].ID != child.ID ||
		list[0].Status != store.StatusWaiting || list[0].Turns != 0 || list[1].Role != "helper" || list[1].Answer != "done: sum" {
		t.Fatalf("list = %d %+v", code, list)
	}

	// A message wakes the agent for one more turn.
	var mail store.Mail
	if code := do(t, "POST", api+"/"+a.ID+"/messages", messageBody{Message: "and twice"}, &mail); code != 201 ||
		mail.ID == 0 || mail.To != a.ID || mail.From != "" || mail.Body != "and twice" {
		t.Fatalf("send = %d %+v", code, mail)
	}
	settle(t, h, rt, a.ID)
	d = agents.AgentDetail{}
	do(t, "GET", api+"/"+a.ID, nil, &d)
	if d.Status != store.StatusWaiting || d.Turns != 3 || d.Answer != "reply: and twice" || len(d.Mailbox) != 1 ||
		d.Mailbox[0].Read.IsZero() || !slices.Equal(d.Children, []string{child.ID}) {
		t.Fatalf("after the message: %+v, mailbox %+v, children %v", d.Agent, d.Mailbox, d.Children)
	}

	// Terminating the agent ends its child too; it then takes no message.
	var term map[string][]string
	if code := do(t, "POST", api+"/"+a.ID+"/terminate", nil, &term); code != 200 || !slices.Equal(term["terminated"], []string{a.ID, child.ID}) {
		t.Fatalf("terminate = %d %v", code, term)
	}
	settle(t, h, rt, a.ID)
	d = agents.AgentDetail{}
	do(t, "GET", api+"/"+a.ID, nil, &d)
	if d.Status != store.StatusTerminated || d.Error != terminateReason {
		t.Errorf("after terminate: %+v", d.Agent)
	}
	var e apiError
	if code := do(t, "POST", api+"/"+a.ID+"/messages", messageBody{Message: "hello?"}, &e); code != 400 || e.Error.Code != toolhost.CodeValidation {
		t.Errorf("message to a terminated agent = %d %+v", code, e)
	}
	term = nil
	if code := do(t, "POST", api+"/"+a.ID+"/terminate", nil, &term); code != 200 || term["terminated"] == nil || len(term["terminated"]) != 0 {
		t.Errorf("terminate again = %d %v", code, term)
	}
}

func TestAgentsAPIErrors(t *testing.T) {
	srv, _, _ := agentServer(t)
	bare := newServer(t) // no runtime
	for _, c := range []struct {
		name, method, url string
		body              any
		status            int
		code              toolhost.Code
	}{
		{"unknown role", "POST", srv.URL + "/api/agents", spawnBody{Role: "nobody", Task: "x"}, 400, toolhost.CodeValidation},
		{"no role", "POST", srv.URL + "/api/agents", spawnBody{Task: "x"}, 400, toolhost.CodeValidation},
		{"unknown parent", "POST", srv.URL + "/api/agents", spawnBody{Role: "helper", ParentID: "nope"}, 400, toolhost.CodeValidation},
		{"bad JSON", "POST", srv.URL + "/api/agents", `{"role": `, 400, toolhost.CodeValidation},
		{"unknown agent", "GET", srv.URL + "/api/agents/nope", nil, 404, toolhost.CodeValidation},
		{"unknown tree", "GET", srv.URL + "/api/agents/nope/tree", nil, 404, toolhost.CodeValidation},
		{"message to nobody", "POST", srv.URL + "/api/agents/nope/messages", messageBody{Message: "hi"}, 404, toolhost.CodeValidation},
		{"empty message", "POST", srv.URL + "/api/agents/nope/messages", messageBody{}, 400, toolhost.CodeValidation},
		{"bad message JSON", "POST", srv.URL + "/api/agents/nope/messages", `[`, 400, toolhost.CodeValidation},
		{"terminate nobody", "POST", srv.URL + "/api/agents/nope/terminate", nil, 404, toolhost.CodeValidation},
		{"a page of none", "GET", srv.URL + "/api/agents?limit=0", nil, 400, toolhost.CodeValidation},
		{"a page too long", "GET", srv.URL + "/api/agents?limit=1001", nil, 400, toolhost.CodeValidation},
		{"a cursor not handed out", "GET", srv.URL + "/api/agents?cursor=nope", nil, 400, toolhost.CodeValidation},
		{"spawn without a runtime", "POST", bare.URL + "/api/agents", spawnBody{Role: "root", Task: "x"}, 503, toolhost.CodeInternal},
		{"message without a runtime", "POST", bare.URL + "/api/agents/a/messages", messageBody{Message: "hi"}, 503, toolhost.CodeInternal},
		{"terminate without a runtime", "POST", bare.URL + "/api/agents/a/terminate", nil, 503, toolhost.CodeInternal},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e apiError
			if code := do(t, c.method, c.url, c.body, &e); code != c.status || e.Error.Code != c.code || e.Error.Message == "" {
				t.Fatalf("%s %s = %d %+v, want %d %s", c.method, c.url, code, e, c.status, c.code)
			}
			if c.status == 503 && !strings.Contains(e.Error.Message, "no agent runtime") {
				t.Errorf("message = %q", e.Error.Message)
			}
		})
	}
	t.Run("list without a runtime", func(t *testing.T) {
		var list []agents.AgentSummary
		if code := get(t, bare.URL+"/api/agents", &list); code != 200 || len(list) != 1 || list[0].ID != "root" || list[0].Role != "root" {
			t.Fatalf("list = %d %v", code, list)
		}
	})
}

// makeAgents makes n agents of root, every other one (the first among them)
// terminated at once, and returns the ids of those left live and of those
// ended, in the order made.
func makeAgents(t *testing.T, h *host.Host, n int) (live, ended []string) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		a, err := h.Agents().Create(ctx, "root", store.Agent{})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			live = append(live, a.ID)
			continue
		}
		if _, err := h.Store().TerminateAgent(ctx, a.ID, "the MCP session ended"); err != nil {
			t.Fatal(err)
		}
		ended = append(ended, a.ID)
	}
	return live, ended
}

// TestAgentsAPIPages: GET /api/agents answers pages, the agents not ended
// first, newest first, then the ended ones, the most recently ended first;
// each page's Link header names the next, and the last has none.
func TestAgentsAPIPages(t *testing.T) {
	srv, h := serve(t, &config.Config{})
	live, ended := makeAgents(t, h, 7)
	slices.Reverse(live)
	slices.Reverse(ended)
	want := append(append(live, "root"), ended...)

	var got []string
	var sizes []int
	next := "/api/agents?limit=3"
	for next != "" {
		req, _ := http.NewRequest("GET", srv.URL+next, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page []agents.AgentSummary
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", next, resp.StatusCode, err)
		}
		for _, a := range page {
			got = append(got, a.ID)
		}
		sizes = append(sizes, len(page))
		next = ""
		if link := resp.Header.Get("Link"); link != "" {
			m := regexp.MustCompile(`^<(/api/agents\?[^>]+)>; rel="next"$`).FindStringSubmatch(link)
			if m == nil {
				t.Fatalf("Link: %s", link)
			}
			next = m[1]
		}
		if len(sizes) > len(want) {
			t.Fatal("the pages do not end")
		}
	}
	if !slices.Equal(got, want) || !slices.Equal(sizes, []int{3, 3, 2}) {
		t.Errorf("pages of %v list %v, want %v", sizes, got, want)
	}
}
