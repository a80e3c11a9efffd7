package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// asksFront serves the askserver (internal/mcp/mcptest/askserver) as four
// mcp_server groups: asker (which toolhost speaks to in the stateless era)
// and asker25 (which refuses server/discover, so in the 2025 era), both
// allowed every client request, for role asking; nosample and nosample25,
// with the default client_requests (no sampling, no roots), for role plain.
func asksFront(t *testing.T) (url string, h *host.Host) {
	t.Helper()
	exe := mcptest.AskServer(t)
	all := []string{config.ClientRequestLogging, config.ClientRequestElicitation, config.ClientRequestSampling, config.ClientRequestRoots}
	block := func(name, prefix string, legacy bool, requests []string) config.Plugin {
		p := config.Plugin{Name: name, Kind: config.KindMCP, Path: exe, ToolPrefix: prefix, ClientRequests: requests,
			Restart: config.RestartOnFailure, MaxRestarts: 1, StartTimeout: proctest.Patience, Args: []string{"uri=ask://" + name + "/profile"}}
		if legacy {
			p.Args = append(p.Args, "legacy")
		}
		return p
	}
	cfg := &config.Config{
		Limits: config.Limits{Timeout: proctest.Patience},
		Plugins: []config.Plugin{block("asker", "s_", false, all), block("asker25", "l_", true, all),
			block("nosample", "n_", false, nil), block("nosample25", "m_", true, nil)},
		Roles: []config.Role{{Name: "asking", ToolGroups: []string{"asker", "asker25"}}, {Name: "plain", ToolGroups: []string{"nosample", "nosample25"}}},
	}
	srv, h := serve(t, cfg)
	return srv.URL, h
}

// askClient is a go-sdk client of a role that answers what the servers
// behind it ask, when it declares the capabilities, and records what it
// was asked.
type askClient struct {
	cs        *mcp.ClientSession
	stateless bool

	mu      sync.Mutex
	logs    []*mcp.LoggingMessageParams
	samples []*mcp.CreateMessageParams
	elicits []*mcp.ElicitParams
}

// The test model's answer.
const modelAnswer = "hi from the test model"

// newAskClient connects a client of the protocol version on tr; declare
// gives it sampling and elicitation handlers (and so the capabilities).
func newAskClient(t *testing.T, tr mcp.Transport, version string, declare bool) *askClient {
	t.Helper()
	ac := &askClient{stateless: version >= sessionlessEra}
	opts := &mcp.ClientOptions{LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
		ac.mu.Lock()
		defer ac.mu.Unlock()
		ac.logs = append(ac.logs, req.Params)
	}}
	if declare {
		opts.CreateMessageHandler = func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			ac.mu.Lock()
			defer ac.mu.Unlock()
			ac.samples = append(ac.samples, req.Params)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", StopReason: "endTurn", Content: &mcp.TextContent{Text: modelAnswer}}, nil
		}
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			ac.mu.Lock()
			defer ac.mu.Unlock()
			ac.elicits = append(ac.elicits, req.Params)
			if req.Params.Message == "Your name?" {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"sure": true}}, nil
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "asked"}, opts)
	c.AddRoots(&mcp.Root{URI: "file:///home/ada", Name: "home"})
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	ac.cs = cs
	if !ac.stateless {
		if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
	}
	return ac
}

// call calls the tool, a stateless client asking for every log level in
// its _meta, and returns the result's text and whether it is an error.
func (ac *askClient) call(t *testing.T, tool string, args map[string]any) (string, bool) {
	t.Helper()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if ac.stateless {
		params.Meta = mcp.Meta{mcp.MetaKeyLogLevel: "debug"}
	}
	res, err := ac.cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// asked returns how many sampling and elicitation requests reached the
// client.
func (ac *askClient) asked() (samples, elicits int) {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	return len(ac.samples), len(ac.elicits)
}

// The transports of the tests' clients: streamable HTTP, and stdio
// (ServeMCP on pipes).
var askTransports = []struct {
	name string
	dial func(t *testing.T, h *host.Host, url, role string) mcp.Transport
}{
	{"http", func(_ *testing.T, _ *host.Host, url, role string) mcp.Transport {
		return &mcp.StreamableClientTransport{Endpoint: url + "/mcp/" + role}
	}},
	{"stdio", func(t *testing.T, h *host.Host, _, role string) mcp.Transport {
		clientIn, serverOut := io.Pipe()
		serverIn, clientOut := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ServeMCP(ctx, h, role, &mcp.IOTransport{Reader: serverIn, Writer: serverOut}) }()
		t.Cleanup(func() {
			cancel()
			_ = clientOut.Close()
			<-done
		})
		return &mcp.IOTransport{Reader: clientIn, Writer: clientOut}
	}},
}

// TestMCPServerAsksClient: what an mcp_server asks during a call reaches
// the client that made it, as the server sent it, in each era of the
// client (2025 session: requests within the call; 2026: input_required
// rounds) and of the server (stateless: rounds; 2025: requests on its
// session), over HTTP and stdio: log messages, a sampling request, two
// elicitations in a row, and the client's roots; the answers reach the
// server. A prompts/get and a resources/read ask as a tools/call does. A client that
// did not declare sampling and elicitation is not asked, and the server
// is refused. Each forwarded request is a tool_call.input event, which
// does not hold the answer.
func TestMCPServerAsksClient(t *testing.T) {
	url, h := asksFront(t)
	for _, tr := range askTransports {
		for _, version := range []string{sessionEra, sessionlessEra} {
			for _, server := range []struct{ name, prefix, uri string }{{"stateless server", "s_", "ask://asker/profile"}, {"2025 server", "l_", "ask://asker25/profile"}} {
				t.Run(fmt.Sprintf("%s %s client %s", tr.name, version, server.name), func(t *testing.T) {
					ac := newAskClient(t, tr.dial(t, h, url, "asking"), version, true)
					p := server.prefix

					if text, isErr := ac.call(t, p+"log", nil); isErr || text != "logged 3" {
						t.Fatalf("log: %q (error %v)", text, isErr)
					}
					proctest.Eventually(t, "the three log messages reach the client", func() bool {
						ac.mu.Lock()
						defer ac.mu.Unlock()
						return len(ac.logs) >= 3
					})
					ac.mu.Lock()
					for i, l := range ac.logs {
						want := fmt.Sprintf(`{"n":%d,"text":"message %d"}`, i, i)
						if got, _ := json.Marshal(l.Data); string(got) != want || l.Logger != "askserver" || string(l.Level) != []string{"info", "warning", "error"}[i] {
							t.Errorf("log message %d: %s %s %s, want %s", i, l.Level, l.Logger, got, want)
						}
					}
					ac.mu.Unlock()

					text, isErr := ac.call(t, p+"sample", map[string]any{"prompt": "say hi"})
					if isErr || text != "the model test-model said: "+modelAnswer {
						t.Errorf("sample: %q (error %v)", text, isErr)
					}
					ac.mu.Lock()
					if len(ac.samples) != 1 {
						t.Errorf("the client was asked %d samplings, want 1", len(ac.samples))
					} else if s := ac.samples[0]; s.SystemPrompt != "Be brief." || s.MaxTokens != 100 || len(s.Messages) != 1 ||
						s.Messages[0].Content.(*mcp.TextContent).Text != "say hi" {
						got, _ := json.Marshal(s)
						t.Errorf("the client's sampling request: %s, want the server's", got)
					}
					ac.mu.Unlock()

					text, isErr = ac.call(t, p+"elicit", nil)
					if isErr || text != "hello Ada, sure: true (accept)" {
						t.Errorf("elicit: %q (error %v)", text, isErr)
					}
					ac.mu.Lock()
					if len(ac.elicits) != 2 || ac.elicits[0].Message != "Your name?" || ac.elicits[1].Message != "Sure?" {
						t.Errorf("the client's elicitations: %+v, want the server's two", ac.elicits)
					} else if got, _ := json.Marshal(ac.elicits[0].RequestedSchema); !strings.Contains(string(got), `"default":"Jane"`) {
						t.Errorf("the first elicitation's schema: %s, want the server's, with its default", got)
					}
					ac.mu.Unlock()

					if text, isErr := ac.call(t, p+"roots", nil); isErr || text != "roots: file:///home/ada" {
						t.Errorf("roots: %q (error %v), want the client's", text, isErr)
					}

					// A prompt and a resource that ask for the name: a 2026
					// client gets input_required results, which its SDK
					// answers and retries; a 2025 client is asked within
					// the request.
					pr, err := ac.cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: p + "greeting"})
					if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "Greet Ada" {
						got, _ := json.Marshal(pr)
						t.Errorf("prompts/get greeting: %s, %v; want Greet Ada", got, err)
					}
					rr, err := ac.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: server.uri})
					if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "name: Ada" {
						got, _ := json.Marshal(rr)
						t.Errorf("resources/read %s: %s, %v; want name: Ada", server.uri, got, err)
					}
					if _, e := ac.asked(); e != 4 {
						t.Errorf("the client was asked %d elicitations, want 4 (the tool's two, the prompt's, the resource's)", e)
					}

					// A client that declared nothing is asked nothing; the
					// server's call is refused.
					quiet := newAskClient(t, tr.dial(t, h, url, "asking"), version, false)
					for _, tool := range []string{"sample", "elicit"} {
						if text, isErr := quiet.call(t, p+tool, map[string]map[string]any{"sample": {"prompt": "x"}}[tool]); !isErr || !strings.Contains(text, "not") {
							t.Errorf("%s from a client without the capability: %q (error %v), want a refusal", tool, text, isErr)
						}
					}
					if s, e := quiet.asked(); s+e != 0 {
						t.Errorf("a client without the capabilities was asked %d samplings and %d elicitations", s, e)
					}
					// Its roots (the go-sdk client declares them) reach the
					// server within a 2025 call; a stateless client that
					// takes no other request has no round to be asked them
					// in: toolhost answers, with none.
					want := "roots: file:///home/ada"
					if version == sessionlessEra {
						want = "roots: none"
					}
					if text, isErr := quiet.call(t, p+"roots", nil); isErr || text != want {
						t.Errorf("roots of a client that takes no other request: %q (error %v), want %q", text, isErr, want)
					}
				})
			}
		}
	}

	// The events: one per forwarded request, none holding the answers.
	events, err := h.Events().List(context.Background(), store.EventFilter{Type: store.EventCallInput, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for _, e := range events {
		raw, _ := json.Marshal(e)
		if strings.Contains(string(raw), "Ada") || strings.Contains(string(raw), modelAnswer) {
			t.Errorf("an input event holds the client's answer: %s", raw)
		}
		if e.CallID == "" || e.ParentID != e.CallID || (e.Group != "asker" && e.Group != "asker25") {
			t.Errorf("an input event without its call or module: %s", raw)
		}
		outcomes[fmt.Sprint(e.Payload["method"], " ", e.Payload["outcome"])]++
	}
	// 8 clients: a sampling, four elicitations and roots each; 4 quiet
	// clients of 2025: roots.
	if outcomes["sampling/createMessage answered: endTurn"] != 8 || outcomes["elicitation/create accept"] != 32 || outcomes["roots/list answered"] != 12 {
		t.Errorf("input events by outcome: %v, want 8 samplings answered, 32 elicitations accepted, 12 roots answered", outcomes)
	}
}

// TestMCPSamplingNeedsItsSwitch: the attack, a server of a role whose
// block does not name sampling in client_requests asking for the client's
// model — told the client cannot (stateless), refused when it asks anyway
// (force), refused on its session (2025) — never reaches a client that
// would answer; elicitation, on by default, does; roots, off by default,
// are toolhost's: none.
func TestMCPSamplingNeedsItsSwitch(t *testing.T) {
	url, h := asksFront(t)
	for _, version := range []string{sessionEra, sessionlessEra} {
		t.Run(version, func(t *testing.T) {
			ac := newAskClient(t, askTransports[0].dial(t, h, url, "plain"), version, true)
			for _, tc := range []struct {
				tool  string
				force bool
				want  string
			}{
				{"n_sample", false, "the client does not support sampling"},
				{"n_sample", true, "client_requests does not allow"},
				{"m_sample", false, "sampling:"},
			} {
				text, isErr := ac.call(t, tc.tool, map[string]any{"prompt": "spend your tokens", "force": tc.force})
				if !isErr || !strings.Contains(text, tc.want) {
					t.Errorf("%s (force %v): %q (error %v), want an error saying %q", tc.tool, tc.force, text, isErr, tc.want)
				}
			}
			if s, _ := ac.asked(); s != 0 {
				t.Errorf("the client was asked for %d samplings by servers without the switch", s)
			}
			if text, isErr := ac.call(t, "n_elicit", nil); isErr || text != "hello Ada, sure: true (accept)" {
				t.Errorf("elicitation, on by default: %q (error %v)", text, isErr)
			}
			for _, tool := range []string{"n_roots", "m_roots"} {
				if text, isErr := ac.call(t, tool, nil); isErr || text != "roots: none" {
					t.Errorf("%s, not forwarded by default: %q (error %v), want toolhost's answer, no roots", tool, text, isErr)
				}
			}
		})
	}
}

// TestMCPServerAskWithTwoCallsRefused: a 2025 server's request says
// nothing of the call it belongs to: while two calls of the server run,
// the second call's requests reach neither client, and the server is told
// why; the first call's client, asked before, answers as usual.
func TestMCPServerAskWithTwoCallsRefused(t *testing.T) {
	url, h := asksFront(t)
	asked, release := make(chan struct{}, 1), make(chan struct{})
	blocked := mcp.NewClient(&mcp.Implementation{Name: "blocked"}, &mcp.ClientOptions{
		ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	bs, err := blocked.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/mcp/asking"}, &mcp.ClientSessionOptions{ProtocolVersion: sessionEra})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	first := make(chan string, 1)
	go func() {
		res, err := bs.CallTool(context.Background(), &mcp.CallToolParams{Name: "l_elicit"})
		if err != nil {
			first <- err.Error()
			return
		}
		first <- res.Content[0].(*mcp.TextContent).Text
	}()
	<-asked // the first call waits on its client
	ac := newAskClient(t, askTransports[0].dial(t, h, url, "asking"), sessionEra, true)
	text, isErr := ac.call(t, "l_elicit", nil)
	close(release)
	if !isErr || !strings.Contains(text, "exactly one call") {
		t.Errorf("the second call's elicitation: %q (error %v), want a refusal saying why", text, isErr)
	}
	if s, e := ac.asked(); s+e != 0 {
		t.Errorf("the second client was asked %d samplings and %d elicitations", s, e)
	}
	if got := <-first; got != "no name: decline" {
		t.Errorf("the first call: %q", got)
	}
}

// elicitTasksCaps declares elicitation and the tasks extension.
const elicitTasksCaps = `{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`

// TestMCPTaskClientAsked: a stateless client that declares the tasks
// extension and elicitation is asked, not handed a task, when its call
// asks within the first second: for an approval its role's clients may
// decide (mcp { client_approvals }), and for its module's elicitation;
// its answers reach the queue and the server.
func TestMCPTaskClientAsked(t *testing.T) {
	t.Run("approval", func(t *testing.T) {
		url, h := approvalFront(t, config.MCP{ClientApprovals: []string{"worker"}})
		alice := roleToken(t, h, "alice")
		r := resultOf(t, rpc(t, url, alice, request(1, "tools/call", `{"name":"guarded","arguments":{"text":"tasked"}}`, metaCaps(elicitTasksCaps, "")), nil))
		if _, ok := r.InputRequests["approval"]; r.ResultType != "input_required" || !ok {
			t.Fatalf("a call of guarded from a client of tasks and elicitation: %+v, want its approval asked", r)
		}
		pendingApproval(t, h, "tasked")
		r = resultOf(t, rpc(t, url, alice, request(2, "tools/call", fmt.Sprintf(`{"name":"guarded","arguments":{"text":"tasked"},"requestState":%q,"inputResponses":{"approval":%s}}`,
			r.RequestState, acceptAnswer), metaCaps(elicitTasksCaps, "")), nil))
		if r.IsError || r.text() != "guarded:tasked" || r.ResultType != "complete" {
			t.Errorf("the approved call: %+v, want its result", r)
		}
	})
	t.Run("module", func(t *testing.T) {
		url, _ := asksFront(t)
		url += "/mcp/asking"
		r := resultOf(t, rpc(t, url, "", request(1, "tools/call", `{"name":"s_elicit","arguments":{}}`, metaCaps(elicitTasksCaps, "")), nil))
		ask, ok := r.InputRequests["name"]
		if r.ResultType != "input_required" || !ok || ask.Params.Message != "Your name?" {
			t.Fatalf("s_elicit from a client of tasks and elicitation: %+v, want the server's elicitation", r)
		}
		r = resultOf(t, rpc(t, url, "", request(2, "tools/call", fmt.Sprintf(`{"name":"s_elicit","arguments":{},"requestState":%q,"inputResponses":{"name":{"action":"accept","content":{"name":"Bo"}}}}`,
			r.RequestState), metaCaps(elicitTasksCaps, "")), nil))
		if _, ok := r.InputRequests["confirm"]; r.ResultType != "input_required" || !ok {
			t.Fatalf("the second round: %+v, want the server's confirmation", r)
		}
		r = resultOf(t, rpc(t, url, "", request(3, "tools/call", fmt.Sprintf(`{"name":"s_elicit","arguments":{},"requestState":%q,"inputResponses":{"confirm":{"action":"accept","content":{"sure":false}}}}`,
			r.RequestState), metaCaps(elicitTasksCaps, "")), nil))
		if r.IsError || r.text() != "hello Bo, sure: false (accept)" || r.ResultType != "complete" {
			t.Errorf("the last round: %+v, want the server's result", r)
		}
	})
}

// TestMCPHeldAsksBounded: a credential's agents hold at most maxHeldCalls
// calls waiting for their clients' answers (the attack: calls whose
// server asks, never answered, to pile up): past it, the server's request
// is refused with rate_limited, and an old round's request state, once
// answered, names nothing. The held calls do not keep the server's log
// messages from another call's client.
func TestMCPHeldAsksBounded(t *testing.T) {
	url, _ := asksFront(t)
	url += "/mcp/asking"
	call := func(id int) callResult {
		return resultOf(t, rpc(t, url, "", request(id, "tools/call", `{"name":"s_elicit","arguments":{}}`, metaCaps(elicitCaps, "")), nil))
	}
	var first callResult
	for i := range 16 {
		if r := call(i + 1); r.ResultType != "input_required" {
			t.Fatalf("held call %d: %+v, want input_required", i+1, r)
		} else if i == 0 {
			first = r
		}
	}
	if r := call(17); !r.IsError || !strings.Contains(r.text(), "rate_limited") {
		t.Errorf("the 17th held call: %+v, want rate_limited", r)
	}
	// The held calls, waiting for their clients, run nothing on the
	// stateless server: its log messages are the one running call's.
	ac := newAskClient(t, askTransports[0].dial(t, nil, strings.TrimSuffix(url, "/mcp/asking"), "asking"), sessionlessEra, false)
	if text, isErr := ac.call(t, "s_log", nil); isErr || text != "logged 3" {
		t.Fatalf("log beside the held calls: %q (error %v)", text, isErr)
	}
	proctest.Eventually(t, "the log messages reach the client beside the held calls", func() bool {
		ac.mu.Lock()
		defer ac.mu.Unlock()
		return len(ac.logs) == 3
	})
	answer := fmt.Sprintf(`{"name":"s_elicit","arguments":{},"requestState":%q,"inputResponses":{"name":{"action":"decline"}}}`, first.RequestState)
	if r := resultOf(t, rpc(t, url, "", request(18, "tools/call", answer, metaCaps(elicitCaps, "")), nil)); r.text() != "no name: decline" {
		t.Errorf("the first call, answered: %+v", r)
	}
	refusedState(t, "the first call's old state again", rpc(t, url, "", request(19, "tools/call", answer, metaCaps(elicitCaps, "")), nil))
}

// TestMCPTaskAsksRefused: a call that has become a task (it asked nothing
// within the first second) can no longer ask its client: its module's
// elicitation is refused, and the task ends with that error.
func TestMCPTaskAsksRefused(t *testing.T) {
	url, _ := asksFront(t)
	url += "/mcp/asking"
	v := taskOf(t, rpc(t, url, "", request(1, "tools/call", `{"name":"s_elicit","arguments":{"after_ms":1500}}`, metaCaps(elicitTasksCaps, "")), nil))
	if v.ResultType != "task" {
		t.Fatalf("s_elicit asking after 1.5 s: %+v, want a task", v)
	}
	proctest.Eventually(t, "the task ends", func() bool {
		v = taskOf(t, rpc(t, url, "", request(2, "tasks/get", fmt.Sprintf(`{"taskId":%q}`, v.TaskID), metaCaps(elicitTasksCaps, "")), nil))
		return v.Status != "working"
	})
	var r callResult
	if err := json.Unmarshal(v.Result, &r); err != nil || v.Status != "completed" || !r.IsError || !strings.Contains(r.text(), "runs as an MCP task") {
		t.Errorf("the task: %s %s, want completed with an error saying it runs as a task", v.Status, v.Result)
	}
}

// TestMCPHeldItemResumesOnlyItsMethod: a prompts/get whose server asks is
// held as a tools/call is; the attack, a retry of another method carrying
// its requestState (a tools/call, a resources/read), resumes nothing
// (-32602), and the prompts/get, retried as itself, still gets its
// messages; its old state then names nothing.
func TestMCPHeldItemResumesOnlyItsMethod(t *testing.T) {
	url, _ := asksFront(t)
	url += "/mcp/asking"
	meta := metaCaps(elicitCaps, "")
	r := resultOf(t, rpc(t, url, "", request(1, "prompts/get", `{"name":"s_greeting"}`, meta), nil))
	if r.ResultType != "input_required" || r.RequestState == "" || r.InputRequests["name"].Params.Message != "Your name?" {
		t.Fatalf("prompts/get: %+v, want input_required asking the name", r)
	}
	answered := fmt.Sprintf(`"requestState":%q,"inputResponses":{"name":{"action":"accept","content":{"name":"Ada"}}}`, r.RequestState)
	refusedState(t, "a tools/call with the prompt's state",
		rpc(t, url, "", request(2, "tools/call", `{"name":"s_elicit","arguments":{},`+answered+`}`, meta), nil))
	refusedState(t, "a resources/read with the prompt's state",
		rpc(t, url, "", request(3, "resources/read", `{"uri":"ask://asker/profile",`+answered+`}`, meta), nil))
	get := `{"name":"s_greeting",` + answered + `}`
	if m := rpc(t, url, "", request(4, "prompts/get", get, meta), nil); m.Error != nil || !strings.Contains(string(m.Result), "Greet Ada") {
		t.Errorf("the prompts/get, answered: result %s, error %s; want its messages", m.Result, m.Error)
	}
	refusedState(t, "the prompt's old state again", rpc(t, url, "", request(5, "prompts/get", get, meta), nil))
}
