package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/plugins/contextgroup"
	"github.com/toolhost/toolhost/store"
	"pgregory.net/rapid"
)

// call runs a tool as an agent (or an operator: agentID "").
func (e *env) call(agentID, tool string, args any) (*toolhost.Result, error) {
	b, _ := json.Marshal(args)
	return e.h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: b, Context: toolhost.CallContext{AgentID: agentID}})
}

// TestArtifacts: the artifact group as the runtime serves it, on the
// host's storage: random ids, files read in the runtime block's workspace,
// bytes kept private under data_dir. plugins/artifact tests the group's
// own checks.
func TestArtifacts(t *testing.T) {
	e := start(t, `{"roles": {}}`, "", "", "")
	if err := os.WriteFile(filepath.Join(e.ws, "report.md"), []byte("# Report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.ws, "pixel.bin"), []byte{0x89, 'P', 'N', 'G', 0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	put := func(args map[string]any) store.Artifact {
		t.Helper()
		res, err := e.call("", "put_artifact", args)
		if err != nil || !res.OK {
			t.Fatalf("put_artifact %v: %+v %v", args, res, err)
		}
		var a store.Artifact
		if err := json.Unmarshal([]byte(res.Stdout), &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	text := put(map[string]any{"name": "note.txt", "content": "hello"})
	if len(text.ID) != 64 || text.ID == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" || text.Size != 5 || !strings.HasPrefix(text.MIME, "text/plain") {
		t.Fatalf("text artifact: %+v (want a random id, not the SHA-256 of the bytes)", text)
	}
	if again := put(map[string]any{"name": "other.txt", "content": "hello"}); again.ID == text.ID || again.Name != "other.txt" {
		t.Errorf("the same bytes again: %+v (a new artifact, with its own id and name)", again)
	}
	file := put(map[string]any{"path": "report.md"})
	if file.Name != "report.md" || file.Size != 9 {
		t.Errorf("file artifact: %+v", file)
	}
	bin := put(map[string]any{"path": filepath.Join(e.ws, "pixel.bin"), "mime": "image/png"})

	res, err := e.call("", "get_artifact", map[string]string{"id": text.ID})
	if err != nil || !res.OK || res.Stdout != "hello" || res.Meta["name"] != "note.txt" {
		t.Fatalf("get text: %+v %v", res, err)
	}
	res, err = e.call("", "get_artifact", map[string]string{"id": bin.ID})
	if err != nil || !res.OK || len(res.Attachments) != 1 || res.Attachments[0].MimeType != "image/png" || len(res.Attachments[0].Data) != 7 {
		t.Fatalf("get binary: %+v %v", res, err)
	}
	for name, want := range map[string]os.FileMode{ // private, as the rest of data_dir
		"artifacts":                                      0o700 | os.ModeDir,
		filepath.Join("artifacts", text.ID[:2]):          0o700 | os.ModeDir,
		filepath.Join("artifacts", text.ID[:2], text.ID): 0o600,
	} {
		if info, err := os.Stat(filepath.Join(e.data, name)); err != nil || info.Mode() != want {
			t.Errorf("data_dir/%s: %v, %v; want mode %v", name, info.Mode(), err, want)
		}
	}
}

func TestContextStatusAndCompression(t *testing.T) {
	e := start(t, `{"roles": {"thinker": [
	  {"tool_calls": [{"name": "get_context_status", "arguments": {}}], "repeat": 1},
	  {"tool_calls": [{"name": "console_print", "arguments": {"text": "step {{.Turn}}"}}], "repeat": 4},
	  {"tool_calls": [{"name": "compress_context", "arguments": {"keep": 3}}]},
	  {"tool_calls": [{"name": "get_context_status", "arguments": {}}]},
	  {"final_answer": "done"}
	]}, "summary": "{{.Count}} messages summarised"}`, "context_budget = 10000", "", "")
	e.createRole("thinker", "context", "console")
	a := e.spawn("thinker", "think")
	if a.Status != store.StatusWaiting || a.Answer != "done" {
		t.Fatalf("agent: %+v", a)
	}
	reqs := e.requests(a.ID)
	var first contextgroup.Status
	if err := json.Unmarshal([]byte(resultStdout(t, lastToolResult(reqs[1]))), &first); err != nil {
		t.Fatal(err)
	}
	if first.Messages != 2 || first.Budget != 10000 || first.Tokens <= 0 || first.Turns != 1 {
		t.Errorf("first status: %+v", first)
	}
	// Before compressing: task + 5 × (call, result) + the compress call = 12
	// messages; keep 3 leaves the task, the summary and the last 3.
	compressed := reqs[6]
	if len(compressed.Messages) != 6 {
		t.Fatalf("after compress_context the model got %d messages: %+v", len(compressed.Messages), compressed.Messages)
	}
	if m := compressed.Messages; m[0].Content != "think" || !strings.Contains(m[1].Content, "Summary of the earlier conversation:\n8 messages summarised") {
		t.Errorf("compressed conversation starts %+v", m[:2])
	}
	if m := compressed.Messages[5]; m.Role != model.RoleTool || m.Name != "compress_context" || !strings.Contains(m.Content, `\"summarised\": 8`) {
		t.Errorf("compress result %+v", m)
	}
	var after contextgroup.Status
	if err := json.Unmarshal([]byte(resultStdout(t, lastToolResult(reqs[7]))), &after); err != nil {
		t.Fatal(err)
	}
	if after.Messages != 7 || after.Turns != 7 {
		t.Errorf("status after compressing: %+v", after)
	}
	stored, _ := e.h.Store().Messages(context.Background(), a.ID)
	if len(stored) != 9 || stored[1].Seq != 2 || !strings.HasPrefix(stored[1].Content, "Summary of") {
		t.Errorf("stored conversation after compression: %d messages, %+v", len(stored), stored[:2])
	}
	if res, err := e.call("", "get_context_status", map[string]any{}); toolhost.CodeOf(err) != toolhost.CodeValidation {
		t.Errorf("get_context_status without an agent: %+v %v", res, err)
	}
}

// resultStdout is the stdout of a result envelope as the model saw it.
func resultStdout(t *testing.T, envelope string) string {
	t.Helper()
	var r toolhost.Result
	if err := json.Unmarshal([]byte(envelope), &r); err != nil || !r.OK {
		t.Fatalf("result %s: %v", envelope, err)
	}
	return r.Stdout
}

func TestOrgManagementRefusals(t *testing.T) {
	e := start(t, `{"roles": {}}`, "", "", "")
	for _, tt := range []struct {
		tool string
		args any
		msg  string
	}{
		{"create_role", map[string]any{"name": "x", "rolePrompt": "p", "toolGroups": []string{"nope"}}, "unknown tool group(s) nope"},
		{"create_role", map[string]any{"name": "root", "rolePrompt": "p"}, "already exists"},
		{"find_role_by_name", map[string]any{"name": "ghost"}, `no role named "ghost"; the roles are: root`},
		{"spawn_agent", map[string]any{"roleId": "ghost"}, `no role named "ghost"`},
		{"spawn_agent_with_task", map[string]any{"roleId": "root", "task": " "}, "task: must not be empty"},
		{"terminate_agent", map[string]any{"agentId": "agent_ghost"}, `no agent "agent_ghost"`},
		{"send_message", map[string]any{"to": "agent_ghost", "message": "hi"}, `no agent "agent_ghost"`},
	} {
		res, err := e.call("", tt.tool, tt.args)
		if err != nil || res.OK || res.Error.Code != toolhost.CodeValidation || !strings.Contains(res.Error.Message, tt.msg) {
			t.Errorf("%s %v: %+v %v, want validation %q", tt.tool, tt.args, res, err, tt.msg)
		}
	}
	// A role found by name shows its groups; an agent spawned by id of role.
	res, err := e.call("", "find_role_by_name", map[string]string{"name": "root"})
	if err != nil || !strings.Contains(res.Stdout, `"toolGroups": [`) || !strings.Contains(res.Stdout, "org_management") {
		t.Fatalf("find root: %+v %v", res, err)
	}
	r, _ := e.h.Roles().Get("root")
	if res, err := e.call("", "spawn_agent", map[string]string{"roleId": r.ID}); err != nil || !res.OK || !strings.Contains(res.Stdout, `"role": "root"`) {
		t.Errorf("spawn by role id: %+v %v", res, err)
	}
}

// TestJSONProtocol runs an agent whose model writes a {"tool_calls",
// "final_answer"} JSON object in its text instead of native tool calls.
func TestJSONProtocol(t *testing.T) {
	e := start(t, `{"roles": {"jsonner": [
	  {"content": "Sure.\n`+"```json"+`\n{\"tool_calls\": [{\"name\": \"console_print\", \"arguments\": {\"text\": \"via json\"}}], \"final_answer\": \"\"}\n`+"```"+`"},
	  {"content": "not json at all"},
	  {"content": "{\"tool_calls\": [], \"final_answer\": \"finished\"}"}
	]}}`, "", "", "")
	e.createRole("jsonner", "console")
	e.rt.Close()
	e.rt = agents.New(e.h, &agents.Options{Provider: model.JSONProtocol(e.model), RunAgents: true, Console: e.console})
	if err := e.rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := e.spawn("jsonner", "go")
	if a.Answer != "finished" || a.Turns != 3 {
		t.Fatalf("agent: %+v", a)
	}
	if !strings.Contains(e.console.String(), "via json") {
		t.Errorf("console: %q", e.console.String())
	}
	reqs := e.requests(a.ID)
	if len(reqs[0].Tools) != 0 || !strings.Contains(reqs[0].System, "console_print") || !strings.Contains(reqs[0].System, `"tool_calls"`) {
		t.Errorf("the JSON protocol's first request: tools %v, system %q", reqs[0].Tools, reqs[0].System)
	}
	if got := reqs[2].Messages[len(reqs[2].Messages)-1].Content; !strings.Contains(got, "could not be used") || !strings.Contains(got, "JSON object") {
		t.Errorf("after prose the model was told %q", got)
	}
}

// TestOpenAICompatibleModel runs an agent against an httptest server that
// speaks the chat-completions wire format.
func TestOpenAICompatibleModel(t *testing.T) {
	var n atomic.Int32
	var second map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "bad request "+r.URL.Path, http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch n.Add(1) {
		case 1:
			fmt.Fprint(w, `{"choices":[{"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
			  {"id":"call_a","type":"function","function":{"name":"console_print","arguments":"{\"text\":\"from openai\"}"}}]}}],
			  "usage":{"prompt_tokens":100,"completion_tokens":20}}`)
		default:
			_ = json.Unmarshal(body, &second)
			fmt.Fprint(w, `{"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"all done"}}],"usage":{"prompt_tokens":150,"completion_tokens":5}}`)
		}
	}))
	t.Cleanup(srv.Close)
	e := start(t, `{"roles": {}}`, "", "", "")
	e.createRole("remote", "console")
	e.rt.Close()
	p, err := model.NewOpenAI(model.OpenAIOptions{BaseURL: srv.URL + "/v1", Model: "m", APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	e.rt = agents.New(e.h, &agents.Options{Provider: p, RunAgents: true, Console: e.console})
	if err := e.rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := e.spawn("remote", "print something")
	if a.Answer != "all done" || a.Tokens != 275 || a.Turns != 2 {
		t.Fatalf("agent: %+v", a)
	}
	msgs, _ := second["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("second request messages: %v", second["messages"])
	}
	tool := msgs[3].(map[string]any)
	if tool["role"] != "tool" || tool["tool_call_id"] != "call_a" || !strings.Contains(tool["content"].(string), `"stdout":"printed"`) {
		t.Errorf("tool message: %v", tool)
	}
	tools, _ := second["tools"].([]any)
	if len(tools) != 1 || !strings.Contains(fmt.Sprint(tools[0]), "console_print") {
		t.Errorf("tools sent: %v", tools)
	}
}

// TestModelSeesExactlyItsRolesTools: for random roles over the built-in
// groups, every model request offers exactly what Host.Tools lists.
func TestModelSeesExactlyItsRolesTools(t *testing.T) {
	e := start(t, `{"roles": {"*": [{"final_answer": "ok", "repeat": -1}]}}`, "", "", "")
	groups := []string{"org_management", "artifact", "context", "console", "workspace", "command"}
	i := 0
	rapid.Check(t, func(rt *rapid.T) {
		chosen := rapid.SliceOfDistinct(rapid.SampledFrom(groups), rapid.ID[string]).Draw(rt, "groups")
		i++
		role := fmt.Sprintf("r%d", i)
		if _, err := e.h.Roles().Create(context.Background(), host.RoleSpec{Name: role, ToolGroups: chosen}); err != nil {
			rt.Fatal(err)
		}
		a := e.spawn(role, "hi")
		list, err := e.h.Tools(host.ToolQuery{Agent: a.ID})
		if err != nil {
			rt.Fatal(err)
		}
		var want []string
		for _, d := range list.Tools {
			want = append(want, d.Function.Name)
		}
		slices.Sort(want)
		reqs := e.requests(a.ID)
		if len(reqs) != 1 {
			rt.Fatalf("%d requests", len(reqs))
		}
		if got := toolNames(reqs[0]); !slices.Equal(got, want) {
			rt.Fatalf("role %v: offered %v, Tools %v", chosen, got, want)
		}
		for _, name := range want {
			m := list.Meta[name]
			if len(chosen) > 0 && !slices.Contains(chosen, m.Group) {
				rt.Fatalf("role %v offered %s of %s", chosen, name, m.Group)
			}
		}
	})
}
