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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// TestItemsUpdatesStopWithRole: a session of a role with groups a and b
// subscribes to shared://x, which one of them lists (the winner of the
// clash), and to the other's (the loser's) watched resource; the role is
// edited to keep the loser alone. The loser's template shared://{NAME}
// matches shared://x, but the URI is the winner's, which the role no
// longer reads: its updates stop, while the loser's still come; the
// session's end still ends the subscription where it was made.
func TestItemsUpdatesStopWithRole(t *testing.T) {
	h := itemsHost(t)
	f := New(h)
	t.Cleanup(f.Close)
	ctx := context.Background()
	if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: "rab", ToolGroups: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	ra, err := h.Tools(host.ToolQuery{Role: "ra"})
	if err != nil {
		t.Fatal(err)
	}
	winner, loser := "a", "b"
	if !slices.ContainsFunc(ra.Resources, func(r toolhost.ResourceSpec) bool { return r.URI == "shared://x" }) {
		winner, loser = "b", "a"
	}
	watched := "test://" + loser + "/watched"
	updates := make(chan string, 64)
	cs := itemClient(t, h, f, "http-2025", "rab", updates)
	for _, uri := range []string{"shared://x", watched} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe to %s: %v", uri, err)
		}
	}
	touch := func(group, uri string) {
		t.Helper()
		// As the admin: the role may have lost the group.
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "touch_" + group, Arguments: json.RawMessage(fmt.Sprintf(`{"uri":%q}`, uri))})
		if err != nil || !res.OK {
			t.Fatalf("touch_%s %s: %+v, %v", group, uri, res, err)
		}
	}
	// await touches group's uri until its update comes, and reports the
	// URIs of the updates before it.
	await := func(group, uri string) []string {
		t.Helper()
		var before []string
		deadline := time.After(proctest.Patience)
		for {
			touch(group, uri)
			for waiting := true; waiting; {
				select {
				case got := <-updates:
					if got == uri {
						return before
					}
					before = append(before, got)
				case <-time.After(200 * time.Millisecond):
					waiting = false
				case <-deadline:
					t.Fatalf("no update of %s", uri)
				}
			}
		}
	}
	// While the role reads shared://x, its updates come; then every
	// update sent is let through before the edit.
	await(winner, "shared://x")
	await(loser, watched)
	for quiet := false; !quiet; {
		select {
		case <-updates:
		case <-time.After(500 * time.Millisecond):
			quiet = true
		}
	}

	groups := []string{loser}
	if _, err := h.Roles().Update(ctx, "rab", host.RoleUpdate{ToolGroups: &groups}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "shared://x"}); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Fatalf("read of shared://x after the edit: %v, want -32602", err)
	}
	for range 3 {
		touch(winner, "shared://x")
		if got := await(loser, watched); len(got) > 0 {
			t.Fatalf("updates %v after the role stopped offering them", got)
		}
	}
	// The session's end ends its subscription to shared://x too, where it
	// was made, though the role no longer offers it.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the unsubscription of shared://x completed", func() bool {
		_ = h.Events().Flush(ctx)
		evs, err := h.Events().List(ctx, store.EventFilter{Tool: toolhost.MethodUnsubscribe, Type: store.EventCallCompleted})
		return err == nil && slices.ContainsFunc(evs, func(e store.Event) bool { return e.Role == "rab" && e.Group == winner })
	})
}

// TestItemsNULInURI: a URI with a NUL (or another control character),
// which the go-sdk's resource-not-found error cannot encode, is an
// ordinary -32602 answer to a read (and, in a 2025 session, to a
// subscription), over HTTP and over stdio, and the session goes on. A
// stateless request cannot carry it in its Mcp-Name header: the SDK
// answers the mismatch.
func TestItemsNULInURI(t *testing.T) {
	h := itemsHost(t)
	f := New(h)
	t.Cleanup(f.Close)
	ctx := context.Background()
	uris := []string{"test://a/items/1\x00", "nothing://\x00", "test://a/text\x01", "test://b/text\x00"}
	for _, mode := range []string{"http-2025", "stdio"} {
		t.Run(mode, func(t *testing.T) {
			cs := itemClient(t, h, f, mode, "ra", make(chan string, 1))
			for _, uri := range uris {
				_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				var e *jsonrpc.Error
				if rpcCode(err) != jsonrpc.CodeInvalidParams {
					t.Errorf("read %q: %v, want -32602", uri, err)
				} else if errors.As(err, &e) && !strings.Contains(string(e.Data), `\u000`) {
					t.Errorf("read %q: data %s, want the URI as JSON", uri, e.Data)
				}
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); mode == "http-2025" && rpcCode(err) != jsonrpc.CodeInvalidParams {
					t.Errorf("subscribe %q: %v, want -32602", uri, err)
				}
			}
			if text, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://a/text"}); err != nil || text.Contents[0].Text != "text of a" {
				t.Fatalf("the session after: %+v, %v", text, err)
			}
		})
	}
	t.Run("http-2026", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			f.ServeRole(w, req, "ra", Caller{Credential: store.CredentialAdmin})
		}))
		t.Cleanup(ts.Close)
		for _, uri := range append(uris, "test://a/text") {
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": map[string]any{"uri": uri,
				"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": mcpversion.Stateless, "io.modelcontextprotocol/clientCapabilities": map[string]any{},
					"io.modelcontextprotocol/clientInfo": map[string]any{"name": "t", "version": "1"}}}})
			req, _ := http.NewRequest("POST", ts.URL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", mcpversion.Stateless)
			req.Header.Set("Mcp-Method", "resources/read")
			req.Header.Set("Mcp-Name", strings.TrimRight(uri, "\x00\x01"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var answer struct {
				Result *mcp.ReadResourceResult `json:"result"`
				Error  *jsonrpc.Error          `json:"error"`
			}
			msg := data // as JSON, or the data of its SSE event
			for _, line := range bytes.Split(data, []byte("\n")) {
				if m, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
					msg = m
				}
			}
			if err := json.Unmarshal(msg, &answer); err != nil {
				t.Fatalf("read %q: %d %s, want a JSON-RPC answer", uri, resp.StatusCode, data)
			}
			if ok := answer.Result != nil; ok != (uri == "test://a/text") {
				t.Errorf("read %q: %d %s", uri, resp.StatusCode, data)
			}
		}
	})
}

// TestItemsRedacted: a completion value and a content block's annotation
// that hold a secret reach neither the MCP client nor the API's caller.
func TestItemsRedacted(t *testing.T) {
	h := itemsHost(t)
	f := New(h)
	t.Cleanup(f.Close)
	ctx := context.Background()
	cs := itemClient(t, h, f, "http-2025", "ra", make(chan string, 1))
	comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "a_greet"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "ghp"}})
	if err != nil || len(comp.Completion.Values) != 1 || strings.Contains(comp.Completion.Values[0], "ghp_") {
		t.Errorf("completion %+v, %v: want the secret redacted", comp, err)
	}
	got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "a_greet", Arguments: map[string]string{"who": "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := got.Messages[1].Content.(*mcp.TextContent); !ok || tc.Annotations == nil || tc.Annotations.Priority != 0.5 || strings.Contains(tc.Annotations.LastModified, "ghp_") {
		t.Errorf("the assistant's message %+v: want its annotations, the secret redacted", got.Messages[1].Content)
	}

	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: toolhost.MethodComplete, Context: toolhost.CallContext{Role: "ra"},
		Arguments: json.RawMessage(`{"ref":{"type":"ref/prompt","name":"a_greet"},"argument":{"name":"who","value":"ghp"}}`)})
	if err != nil || !res.OK {
		t.Fatalf("complete through the API: %+v, %v", res, err)
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), "ghp_") || res.Meta["redacted"] != true {
		t.Errorf("complete through the API: %s, want the secret redacted", b)
	}
}

// TestItemsReadHeldToLimits: a resources/read's text is held to the
// group's max_output_bytes (51200 by default) as a tool's blocks are, in
// order, through the API and to an MCP client; its binary data is not
// cut, nor counted in the limit (4 MiB per result bound it).
func TestItemsReadHeldToLimits(t *testing.T) {
	h := itemsHost(t)
	f := New(h)
	t.Cleanup(f.Close)
	ctx := context.Background()
	const n, limit = 100000, 51200
	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: toolhost.MethodResourcesRead, Context: toolhost.CallContext{Role: "ra"},
		Arguments: json.RawMessage(fmt.Sprintf(`{"uri":"test://a/big/%d"}`, n))})
	if err != nil || !res.OK {
		t.Fatalf("read through the API: %+v, %v", res, err)
	}
	text := 0
	for _, c := range res.Content {
		if c.Resource != nil {
			text += len(c.Resource.Text)
		}
	}
	if !res.TruncatedBytes || text > limit || len(res.Stdout) > limit || len(res.Content) < 2 || len(res.Content[0].Resource.Blob) != n {
		t.Errorf("read through the API: truncated_bytes %v, %d bytes of text (stdout %d), %d blocks: want the text within %d, the blob whole",
			res.TruncatedBytes, text, len(res.Stdout), len(res.Content), limit)
	}
	cs := itemClient(t, h, f, "http-2025", "ra", make(chan string, 1))
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: fmt.Sprintf("test://a/big/%d", n)})
	if err != nil {
		t.Fatal(err)
	}
	text = 0
	for _, c := range read.Contents {
		text += len(c.Text)
	}
	if text > limit || len(read.Contents) < 2 || len(read.Contents[0].Blob) != n {
		t.Errorf("read through MCP: %d bytes of text in %d contents, want at most %d and the blob whole", text, len(read.Contents), limit)
	}
}
