package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/hosttest"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// itemsHost runs testdata/itemserver three times as mcp_server groups (a
// and b, whose prompt "shared" and resource shared://x clash, and plain,
// which offers a tool alone) and the roles ra, rb and rc with one group
// each; ra's rule no_secret denies reading test://a/items/secret; rl, with
// b, may read one resource an hour.
func itemsHost(t *testing.T) *host.Host {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "itemserver")
	if out, err := exec.Command("go", "build", "-o", exe, "./testdata/itemserver").CombinedOutput(); err != nil {
		t.Fatalf("go build itemserver: %v\n%s", err, out)
	}
	var b strings.Builder
	for _, name := range []string{"a", "b", "plain"} {
		fmt.Fprintf(&b, "mcp_server %q {\n  command = %q\n  args = [%q]\n  sandbox = \"off\"\n  start_timeout = \"60s\"\n}\n", name, exe, name)
	}
	b.WriteString(`
role "ra" {
  tool_groups = ["a"]
  rule "no_secret" {
    tools  = ["resources/read"]
    when   = "args.uri.endsWith('/secret')"
    action = "deny"
    reason = "no secrets"
  }
}
role "rb" {
  tool_groups = ["b"]
}
role "rc" {
  tool_groups = ["plain"]
}
role "rl" {
  tool_groups = ["b"]
  limit "resources/read" {
    calls = 1
    per   = "1h"
  }
}
`)
	return hosttest.Run(t, b.String())
}

// itemClient connects a client to role's MCP server: over streamable HTTP
// in the 2025 era ("http-2025") or the stateless one ("http-2026"), or
// over a newline-delimited stream as `toolhost mcp` serves stdio
// ("stdio"). Resource updates go to updates.
func itemClient(t *testing.T, h *host.Host, f *Front, mode, role string, updates chan<- string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "items-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updates <- req.Params.URI:
			default:
			}
		},
	})
	ctx := context.Background()
	var transport mcp.Transport
	opts := &mcp.ClientSessionOptions{}
	switch mode {
	case "stdio":
		cr, sw := io.Pipe()
		sr, cw := io.Pipe()
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = Serve(sctx, h, role, &mcp.IOTransport{Reader: sr, Writer: sw})
		}()
		t.Cleanup(func() { cancel(); cr.Close(); cw.Close(); <-done })
		transport = &mcp.IOTransport{Reader: cr, Writer: cw}
	default:
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			f.ServeRole(w, req, role, Caller{Credential: store.CredentialAdmin})
		}))
		t.Cleanup(ts.Close)
		transport = &mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}
		if mode == "http-2025" {
			opts.ProtocolVersion = mcpversion.Legacy
		}
	}
	cs, err := c.Connect(ctx, transport, opts)
	if err != nil {
		t.Fatalf("%s: connect as %s: %v", mode, role, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// rpcCode is the JSON-RPC code of err, 0 for none.
func rpcCode(err error) int64 {
	var e *jsonrpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// TestItemsThroughFront: a role whose group is an MCP server with
// prompts, resources, a template, completions and subscriptions lists and
// gets its prompts, reads its resources (text and binary) and a URI of its
// template, completes an argument, subscribes and is told of an update,
// in both eras over HTTP and over stdio; a rule denies a read; each get
// and read is an event; the capabilities say what the role offers, and a
// role whose groups offer no prompts or resources has no such methods.
func TestItemsThroughFront(t *testing.T) {
	h := itemsHost(t)
	f := New(h)
	t.Cleanup(f.Close)
	ctx := context.Background()
	for _, mode := range []string{"http-2025", "http-2026", "stdio"} {
		t.Run(mode, func(t *testing.T) {
			updates := make(chan string, 16)
			cs := itemClient(t, h, f, mode, "ra", updates)
			caps := cs.InitializeResult().Capabilities
			if caps.Prompts == nil || caps.Resources == nil || !caps.Resources.Subscribe || caps.Completions == nil {
				t.Errorf("capabilities %+v: want prompts, resources with subscribe, completions", caps)
			}

			prompts, err := cs.ListPrompts(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range prompts.Prompts {
				names = append(names, p.Name)
			}
			if !slices.Contains(names, "a_greet") || slices.Contains(names, "b_greet") {
				t.Errorf("prompts %v: want a_greet, not b_greet", names)
			}
			got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "a_greet", Arguments: map[string]string{"who": "Ada"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Messages) != 2 || got.Messages[0].Role != "user" || got.Messages[1].Role != "assistant" || got.Description != "a greeting for Ada" {
				t.Fatalf("prompt %+v", got)
			}
			if tc, ok := got.Messages[1].Content.(*mcp.TextContent); !ok || tc.Text != "Hello, Ada!" || tc.Annotations == nil || tc.Annotations.Priority != 0.5 {
				t.Errorf("the assistant's message %+v, want its text and annotations", got.Messages[1].Content)
			}

			resources, err := cs.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			uris := map[string]*mcp.Resource{}
			for _, r := range resources.Resources {
				uris[r.URI] = r
			}
			if r := uris["test://a/text"]; r == nil || r.Title != "A text" || r.Size != 11 || r.Annotations == nil || len(r.Annotations.Audience) != 1 {
				t.Errorf("test://a/text listed as %+v", r)
			}
			if uris["test://b/text"] != nil {
				t.Error("ra lists b's resource")
			}
			text, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/text"})
			if err != nil || len(text.Contents) != 1 || text.Contents[0].Text != "text of a" || text.Contents[0].MIMEType != "text/plain" {
				t.Errorf("read test://a/text: %+v, %v", text, err)
			}
			bin, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/binary"})
			if err != nil || len(bin.Contents) != 1 || !bytes.Equal(bin.Contents[0].Blob, []byte{0, 1, 2, 0xff}) {
				t.Errorf("read test://a/binary: %+v, %v", bin, err)
			}
			templates, err := cs.ListResourceTemplates(ctx, nil)
			if err != nil || !slices.ContainsFunc(templates.ResourceTemplates, func(x *mcp.ResourceTemplate) bool { return x.URITemplate == "test://a/items/{id}" }) {
				t.Errorf("templates %+v, %v", templates, err)
			}
			item, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/items/7"})
			if err != nil || len(item.Contents) != 1 || item.Contents[0].Text != "item test://a/items/7 of a" {
				t.Errorf("read test://a/items/7: %+v, %v", item, err)
			}
			_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/items/secret"})
			if rpcCode(err) != jsonrpcServerError || !strings.Contains(fmt.Sprint(err), "no_secret") {
				t.Errorf("read of a URI the rule denies: %v, want a server error naming the rule", err)
			}

			comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "a_greet"},
				Argument: mcp.CompleteParamsArgument{Name: "who", Value: "b"}})
			if err != nil || !slices.Equal(comp.Completion.Values, []string{"bob", "bert"}) {
				t.Errorf("completion: %+v, %v", comp, err)
			}
			comp, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "test://a/items/{id}"},
				Argument: mcp.CompleteParamsArgument{Name: "id", Value: "7"}})
			if err != nil || !slices.Equal(comp.Completion.Values, []string{"7"}) {
				t.Errorf("completion of the template: %+v, %v", comp, err)
			}

			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://a/watched"}); err != nil {
				t.Fatal(err)
			}
			deadline := time.After(proctest.Patience)
			for touched := false; !touched; {
				// The stateless era's subscription reaches the server on a
				// stream of its own: touch until an update comes.
				if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "touch_a"}); err != nil || res.IsError {
					t.Fatalf("touch_a: %+v, %v", res, err)
				}
				select {
				case uri := <-updates:
					if uri != "test://a/watched" {
						t.Fatalf("update of %s", uri)
					}
					touched = true
				case <-time.After(200 * time.Millisecond):
				case <-deadline:
					t.Fatal("no notifications/resources/updated")
				}
			}
			if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://a/watched"}); err != nil {
				t.Error(err)
			}
		})
	}

	// Every get and read was a call of the pipeline, with its event.
	for _, method := range []string{toolhost.MethodPromptsGet, toolhost.MethodResourcesRead, toolhost.MethodComplete, toolhost.MethodSubscribe} {
		proctest.Eventually(t, method+" calls recorded as events", func() bool {
			evs, err := h.Events().List(ctx, store.EventFilter{Tool: method, Type: store.EventCallCompleted})
			return err == nil && len(evs) >= 3 && evs[0].Group == "a" && evs[0].Role == "ra"
		})
	}
	proctest.Eventually(t, "the denied read recorded with its rule", func() bool {
		evs, err := h.Events().List(ctx, store.EventFilter{Tool: toolhost.MethodResourcesRead, Type: store.EventCallFailed})
		return err == nil && len(evs) >= 3 && evs[0].Payload["rule"] == "no_secret"
	})

	// A prompt the server adds reaches the role's clients, announced; and
	// when the group goes, so do its items: the role then has no prompts
	// methods at all.
	changed := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "items-test", Version: "1"}, &mcp.ClientOptions{
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		f.ServeRole(w, req, "ra", Caller{Credential: store.CredentialAdmin})
	}))
	t.Cleanup(ts.Close)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: mcpversion.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "grow_a"}); err != nil || res.IsError {
		t.Fatalf("grow_a: %+v, %v", res, err)
	}
	select {
	case <-changed:
	case <-time.After(proctest.Patience):
		t.Fatal("no notifications/prompts/list_changed after the server added a prompt")
	}
	proctest.Eventually(t, "a_more listed", func() bool {
		list, err := cs.ListPrompts(ctx, nil)
		return err == nil && slices.ContainsFunc(list.Prompts, func(p *mcp.Prompt) bool { return p.Name == "a_more" })
	})
	if err := h.Modules().Unload("a"); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "ra's prompts methods gone with group a", func() bool {
		_, err := cs.ListPrompts(ctx, nil)
		return rpcCode(err) == jsonrpc.CodeMethodNotFound
	})

	// A role whose group offers no prompts or resources states none, and
	// its clients get "method not found" for them.
	for _, mode := range []string{"http-2025", "http-2026", "stdio"} {
		cs := itemClient(t, h, f, mode, "rc", nil)
		if caps := cs.InitializeResult().Capabilities; caps.Prompts != nil || caps.Resources != nil || caps.Completions != nil {
			t.Errorf("%s: rc states %+v", mode, caps)
		}
		_, err := cs.ListPrompts(ctx, nil)
		_, err2 := cs.ListResources(ctx, nil)
		_, err3 := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/text"})
		for _, e := range []error{err, err2, err3} {
			if rpcCode(e) != jsonrpc.CodeMethodNotFound {
				t.Errorf("%s: rc's prompts/resources request: %v, want method not found", mode, e)
			}
		}
	}
}

// TestItemsRoleBoundary: a role without a group sees none of its prompts
// or resources, and cannot get, read, complete or subscribe to them by
// name or URI, a URI of the group's template included; a URI that two
// groups list belongs to the first, whatever template of the other's
// matches it. Refusals leave the role's list as it was.
func TestItemsRoleBoundary(t *testing.T) {
	h := itemsHost(t)
	f := New(h)
	t.Cleanup(f.Close)
	ctx := context.Background()
	ra, err := h.Tools(host.ToolQuery{Role: "ra"})
	if err != nil {
		t.Fatal(err)
	}
	// a and b register in parallel: the first to register keeps the
	// clashing prompt and URI, the other's are refused, as a diagnostic.
	winner, loser := "a", "b"
	if !slices.ContainsFunc(ra.Resources, func(r toolhost.ResourceSpec) bool { return r.URI == "shared://x" }) {
		winner, loser = "b", "a"
	}
	diags := fmt.Sprint(h.Modules().Diagnostics())
	if !strings.Contains(diags, "resource URI conflict (") || !strings.Contains(diags, "shared://x is already offered by group "+winner) ||
		!strings.Contains(diags, "prompt name conflict") {
		t.Errorf("diagnostics %s: want the clashes of shared://x and shared, kept by %s", diags, winner)
	}
	rb, err := h.Tools(host.ToolQuery{Role: "rb"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rb.Resources {
		if strings.HasPrefix(r.URI, "test://a/") {
			t.Errorf("rb lists a's resource %s", r.URI)
		}
	}
	for _, p := range rb.Prompts {
		if p.Name == "a_greet" {
			t.Error("rb lists a's prompt")
		}
	}

	for _, mode := range []string{"http-2025", "http-2026", "stdio"} {
		t.Run(mode, func(t *testing.T) {
			cs := itemClient(t, h, f, mode, "rb", nil)
			before, err := cs.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range before.Resources {
				if strings.HasPrefix(r.URI, "test://a/") {
					t.Errorf("rb's client lists %s", r.URI)
				}
			}
			loserCS := cs
			if loser == "a" {
				loserCS = itemClient(t, h, f, mode, "ra", nil)
			}
			for _, tc := range []struct {
				name string
				do   func() error
				want int64
			}{
				{"get a's prompt", func() error {
					_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "a_greet", Arguments: map[string]string{"who": "x"}})
					return err
				}, jsonrpc.CodeInvalidParams},
				{"read a's resource", func() error {
					_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/text"})
					return err
				}, mcp.CodeResourceNotFound},
				{"read a URI of a's template", func() error {
					_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/items/7"})
					return err
				}, mcp.CodeResourceNotFound},
				{"complete a's prompt", func() error {
					_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "a_greet"},
						Argument: mcp.CompleteParamsArgument{Name: "who", Value: "b"}})
					return err
				}, jsonrpc.CodeInvalidParams},
				{"complete a's template", func() error {
					_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "test://a/items/{id}"},
						Argument: mcp.CompleteParamsArgument{Name: "id", Value: "7"}})
					return err
				}, jsonrpc.CodeInvalidParams},
				{"the loser's role reads the clashing URI its template matches", func() error {
					_, err := loserCS.ReadResource(ctx, &mcp.ReadResourceParams{URI: "shared://x"})
					return err
				}, mcp.CodeResourceNotFound},
				{"the loser's role gets the clashing prompt", func() error {
					_, err := loserCS.GetPrompt(ctx, &mcp.GetPromptParams{Name: "shared"})
					return err
				}, jsonrpc.CodeInvalidParams},
			} {
				if err := tc.do(); rpcCode(err) != tc.want {
					t.Errorf("%s: %v, want code %d", tc.name, err, tc.want)
				}
			}
			// A subscription: refused by the pipeline, in the 2025 era as the
			// answer, in the stateless era on the subscriptions/listen
			// stream, which then ends (the SDK's client does not wait for it).
			refused := func() int {
				evs, _ := h.Events().List(ctx, store.EventFilter{Tool: toolhost.MethodSubscribe, Type: store.EventCallFailed})
				n := 0
				for _, e := range evs {
					if e.Role == "rb" && e.Payload["code"] == string(toolhost.CodeToolNotAvailable) {
						n++
					}
				}
				return n
			}
			_ = h.Events().Flush(ctx)
			was := refused()
			serr := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://a/watched"})
			if mode == "http-2025" && rpcCode(serr) != mcp.CodeResourceNotFound {
				t.Errorf("subscribe to a's resource: %v, want code %d", serr, mcp.CodeResourceNotFound)
			}
			proctest.Eventually(t, "rb's subscription refused by the pipeline", func() bool { return refused() > was })
			after, err := cs.ListResources(ctx, nil)
			if err != nil || len(after.Resources) != len(before.Resources) {
				t.Errorf("rb's resources after the attempts: %d, %v; before: %d", len(after.Resources), err, len(before.Resources))
			}
		})
	}

	// Through the host itself (the HTTP API's POST /api/call, the CLI, an
	// embedding program): the same refusals, with the pipeline's codes.
	for _, tc := range []struct {
		role, tool, args string
		want             toolhost.Code
	}{
		{"rb", toolhost.MethodResourcesRead, `{"uri":"test://a/text"}`, toolhost.CodeToolNotAvailable},
		{"rb", toolhost.MethodResourcesRead, `{"uri":"test://a/items/7"}`, toolhost.CodeUnknownTool},
		{"rb", toolhost.MethodPromptsGet, `{"name":"a_greet"}`, toolhost.CodeToolNotAvailable},
		{"rb", toolhost.MethodSubscribe, `{"uri":"test://a/watched"}`, toolhost.CodeToolNotAvailable},
		{"rb", toolhost.MethodComplete, `{"ref":{"type":"ref/prompt","name":"a_greet"},"argument":{"name":"who","value":""}}`, toolhost.CodeUnknownTool},
		{"role-" + loser, toolhost.MethodResourcesRead, `{"uri":"shared://x"}`, toolhost.CodeToolNotAvailable},
		{"rc", toolhost.MethodResourcesRead, `{"uri":"test://a/text"}`, toolhost.CodeToolNotAvailable},
		{"ra", toolhost.MethodResourcesRead, `{"uri":"test://a/text","extra":1}`, toolhost.CodeValidation},
		{"ra", toolhost.MethodSubscribe, `{"uri":"test://a/watched"}`, toolhost.CodeValidation}, // no watcher: only MCP sessions subscribe
	} {
		role := tc.role
		if role == "role-a" || role == "role-b" {
			role = "r" + strings.TrimPrefix(role, "role-")
		}
		_, err := h.Call(ctx, &toolhost.CallRequest{Tool: tc.tool, Arguments: json.RawMessage(tc.args), Context: toolhost.CallContext{Role: role}})
		if toolhost.CodeOf(err) != tc.want {
			t.Errorf("%s %s %s: %v, want %s", role, tc.tool, tc.args, err, tc.want)
		}
	}

	// A limit on resources/read counts reads: rl's second is refused.
	read := func() error {
		_, err := h.Call(ctx, &toolhost.CallRequest{Tool: toolhost.MethodResourcesRead, Arguments: json.RawMessage(`{"uri":"test://b/text"}`),
			Context: toolhost.CallContext{Role: "rl", Credential: "token/t/1"}})
		return err
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	if err := read(); toolhost.CodeOf(err) != toolhost.CodeRateLimited {
		t.Errorf("rl's second read: %v, want rate_limited", err)
	}
}
