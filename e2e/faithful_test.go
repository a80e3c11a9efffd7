package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/mcp/mcpsource"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// faithfulConfig loads npm's server-everything, sandboxed with the npm
// cache read-only, as the group of the role "everything", and the
// conformance fixture (audio, and logs during a call) as the role
// "conform"'s.
const faithfulConfig = `
data_dir   = "data"
plugin_dir = %q
mcp_server "everything" {
  command         = %q
  client_requests = ["logging", "elicitation", "sampling"]
  sandbox {
    read_only = [%q]
  }
}
mcp_server "conform" {
  command = %q
}
role "everything" {
  tool_groups = ["everything"]
}
role "conform" {
  tool_groups = ["conform"]
}
role "bystander" {
  tool_groups = ["console"]
}
`

// faithfulClient is a go-sdk client that answers sampling and elicitation
// with fixed answers and records what it was asked and the log messages
// it received.
type faithfulClient struct {
	mu       sync.Mutex
	sampled  []*mcp.CreateMessageParams
	elicited []*mcp.ElicitParams
	logged   []string
}

// connect connects a client to tr asking for version.
func (c *faithfulClient) connect(t *testing.T, tr mcp.Transport, version string) *mcp.ClientSession {
	t.Helper()
	return connectGo(t, "e2e-faithful", &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.mu.Lock()
			c.logged = append(c.logged, withoutMeta(req.Params))
			c.mu.Unlock()
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			c.mu.Lock()
			c.sampled = append(c.sampled, req.Params)
			c.mu.Unlock()
			return &mcp.CreateMessageResult{Model: "e2e-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled by the e2e client"}}, nil
		},
		ElicitationHandler: approving(&c.mu, &c.elicited),
	}, tr, version)
}

// TestFaithfulGateway: what npm's server-everything offers reaches a go-sdk
// client through toolhost as the same client receives it from the server
// directly: through /mcp/ROLE over HTTP and `toolhost mcp` over stdio, in
// both protocol eras, each row of what a server sends compared with the
// direct answer — content blocks of every type in order with their
// annotations, sampling and elicitation requests and their answers,
// prompts, resources, resource templates and completions. A role without
// the group sees none of it, and reading its resource by URI is refused.
func TestFaithfulGateway(t *testing.T) {
	everything := mcptest.NPMServer(t, "mcp-server-everything")
	conform := filepath.Join(t.TempDir(), "conformserver")
	build(t, "../internal/mcp/mcptest/conformserver/cmd", conform)
	srv := newServe(t, fmt.Sprintf(faithfulConfig, pluginDir, everything, mcptest.NPMDir(), conform))
	srv.start()
	token := srv.roleToken("everything", "faithful", "")
	conformToken := srv.roleToken("conform", "faithful-conform", "")

	direct := &faithfulClient{}
	ds := direct.connect(t, &mcp.CommandTransport{Command: exec.Command(everything)}, "2025-11-25")

	for _, tr := range []string{"http", "stdio"} {
		for _, version := range []string{"2025-11-25", "2026-07-28"} {
			t.Run(tr+"/"+version, func(t *testing.T) {
				through := &faithfulClient{}
				ts := through.connect(t, srv.frontTransport(t, tr, "everything", token), version)
				if got := ts.InitializeResult().ProtocolVersion; got != version {
					t.Fatalf("negotiated %s, want %s", got, version)
				}
				t.Run("content", func(t *testing.T) { faithfulContent(t, ds, ts) })
				t.Run("audio", func(t *testing.T) {
					dc := (&faithfulClient{}).connect(t, &mcp.CommandTransport{Command: exec.Command(conform)}, version)
					cs := (&faithfulClient{}).connect(t, srv.frontTransport(t, tr, "conform", conformToken), version)
					faithfulCall(t, dc, cs, "test_audio_content", map[string]any{})
				})
				t.Run("logging", func(t *testing.T) {
					fc := &faithfulClient{}
					dc := fc.connect(t, &mcp.CommandTransport{Command: exec.Command(conform)}, version)
					logged := func(c *faithfulClient, cs *mcp.ClientSession) []string {
						c.mu.Lock()
						c.logged = nil
						c.mu.Unlock()
						params := &mcp.CallToolParams{Name: "test_tool_with_logging", Arguments: map[string]any{}}
						if version >= "2026-07-28" {
							params.Meta = mcp.Meta{mcp.MetaKeyLogLevel: "debug"}
						} else if err := cs.SetLoggingLevel(patient(t), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
							t.Fatalf("logging/setLevel: %v", err)
						}
						if _, err := cs.CallTool(patient(t), params); err != nil {
							t.Fatalf("test_tool_with_logging: %v", err)
						}
						// The go-sdk client handles notifications on a queue
						// of their own: the last may come after the answer.
						var got []string
						proctest.Eventually(t, "the call's three log messages", func() bool {
							c.mu.Lock()
							defer c.mu.Unlock()
							got = slices.Clone(c.logged)
							return len(got) >= 3
						})
						return got
					}
					cc := &faithfulClient{}
					cs := cc.connect(t, srv.frontTransport(t, tr, "conform", conformToken), version)
					want, got := logged(fc, dc), logged(cc, cs)
					if len(want) != 3 || !slices.Equal(got, want) {
						t.Errorf("log messages through toolhost:\n%q\nwant what the server sent:\n%q", got, want)
					}
				})
				t.Run("sampling", func(t *testing.T) {
					faithfulCall(t, ds, ts, "trigger-sampling-request", map[string]any{"prompt": "say hi", "maxTokens": 20})
					sameAsked(t, "sampling/createMessage", direct.sampledLast(), through.sampledLast())
				})
				t.Run("elicitation", func(t *testing.T) {
					faithfulCall(t, ds, ts, "trigger-elicitation-request", map[string]any{})
					sameAsked(t, "elicitation/create", direct.elicitedLast(), through.elicitedLast())
				})
				t.Run("prompts", func(t *testing.T) { faithfulPrompts(t, ds, ts) })
				t.Run("resources", func(t *testing.T) { faithfulResources(t, ds, ts) })
			})
		}
	}

	t.Run("bystander", func(t *testing.T) {
		c := &faithfulClient{}
		cs := c.connect(t, &mcp.StreamableClientTransport{Endpoint: srv.base + "/mcp/bystander",
			HTTPClient: &http.Client{Transport: bearerTransport(srv.roleToken("bystander", "bystander", ""))}}, "2026-07-28")
		if caps := cs.InitializeResult().Capabilities; caps.Prompts != nil || caps.Resources != nil || caps.Completions != nil {
			t.Errorf("a role without the group declares prompts %v, resources %v, completions %v", caps.Prompts, caps.Resources, caps.Completions)
		}
		if res, err := cs.ListPrompts(patient(t), nil); err == nil {
			t.Errorf("prompts/list of a role without prompts: %v, want the protocol's error", jsonString(res))
		}
		if res, err := cs.ReadResource(patient(t), &mcp.ReadResourceParams{URI: "demo://resource/dynamic/text/1"}); err == nil {
			t.Errorf("a role without the group read everything's resource: %s", jsonString(res))
		}
		if res, err := cs.GetPrompt(patient(t), &mcp.GetPromptParams{Name: mcpsource.ToolName("", "simple-prompt")}); err == nil {
			t.Errorf("a role without the group got everything's prompt: %s", jsonString(res))
		}
	})
}

// frontTransport is a transport to role's MCP server of h: /mcp/ROLE with
// the token over HTTP, `toolhost mcp -role ROLE` over stdio.
func (h *hostile) frontTransport(t *testing.T, tr, role, token string) mcp.Transport {
	if tr == "http" {
		return &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp/" + role,
			HTTPClient: &http.Client{Transport: bearerTransport(token)}}
	}
	cmd := exec.Command(h.bin, "mcp", "-role", role, "-config", h.cfg)
	cmd.Dir = h.dir
	return &mcp.CommandTransport{Command: cmd}
}

// sampledLast is the last sampling request the client was asked.
func (c *faithfulClient) sampledLast() any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sampled) == 0 {
		return nil
	}
	return c.sampled[len(c.sampled)-1]
}

// elicitedLast is the last elicitation the client was asked.
func (c *faithfulClient) elicitedLast() any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.elicited) == 0 {
		return nil
	}
	return c.elicited[len(c.elicited)-1]
}

// sameAsked: the client through toolhost was asked what the client of the
// server was asked, _meta aside (the protocol's own keys differ by era).
func sameAsked(t *testing.T, what string, direct, through any) {
	t.Helper()
	if direct == nil {
		t.Fatalf("the server asked the direct client no %s", what)
	}
	if got, want := withoutMeta(through), withoutMeta(direct); got != want {
		t.Errorf("%s through toolhost:\n%s\nwant what the server asked directly:\n%s", what, got, want)
	}
}

// withoutMeta is v as JSON, without what the protocol's era or the
// gateway's scope sets — the top-level _meta, resultType (2026-07-28's),
// ttlMs and cacheScope (a role's answers are private to it) — and with an
// elicitation's mode "" made "form", its default, and clock times made one:
// server-everything's dynamic resources say when they were made, in their
// text and inside a blob's base64, and the two calls compared may fall in
// different seconds.
func withoutMeta(v any) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(jsonString(v)), &m)
	for _, k := range []string{"_meta", "resultType", "ttlMs", "cacheScope"} {
		delete(m, k)
	}
	if m["mode"] == "" {
		m["mode"] = "form"
	}
	return clockTime.ReplaceAllString(jsonString(blobTexts(m)), "TIME")
}

// blobTexts is v with every text "blob" (base64 of UTF-8) decoded, so that
// the clock times in it are made one with the rest; binary blobs stay as
// they are.
func blobTexts(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "blob" {
				if b, err := base64.StdEncoding.DecodeString(s); err == nil && utf8.Valid(b) {
					v[k] = "text: " + string(b)
				}
				continue
			}
			v[k] = blobTexts(e)
		}
	case []any:
		for i, e := range v {
			v[i] = blobTexts(e)
		}
	}
	return v
}

// clockTime is a time of day as Node.js's toLocaleTimeString writes it.
var clockTime = regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2}(\x{202f}| )?([AP]M)?`)

// jsonString is v as JSON.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// faithfulContent: results of every content type, several blocks in order,
// annotations, resource links and embedded resources.
func faithfulContent(t *testing.T, ds, ts *mcp.ClientSession) {
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"get-tiny-image", map[string]any{}},
		{"get-annotated-message", map[string]any{"messageType": "error", "includeImage": true}},
		{"get-annotated-message", map[string]any{"messageType": "debug"}},
		{"get-resource-links", map[string]any{"count": 3}},
		{"get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 2}},
		{"get-resource-reference", map[string]any{"resourceType": "Blob", "resourceId": 3}},
		{"get-structured-content", map[string]any{"location": "New York"}},
	} {
		t.Run(c.tool, func(t *testing.T) { faithfulCall(t, ds, ts, c.tool, c.args) })
	}
}

// faithfulCall calls the tool directly and through toolhost (under its
// mapped name) and compares the results, _meta aside.
func faithfulCall(t *testing.T, ds, ts *mcp.ClientSession, tool string, args map[string]any) {
	t.Helper()
	want, err := ds.CallTool(patient(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s directly: %v", tool, err)
	}
	got, err := ts.CallTool(patient(t), &mcp.CallToolParams{Name: mcpsource.ToolName("", tool), Arguments: args})
	if err != nil {
		t.Fatalf("%s through toolhost: %v", tool, err)
	}
	if g, w := withoutMeta(got), withoutMeta(want); g != w {
		t.Errorf("%s through toolhost:\n%s\nwant what the server sent:\n%s", tool, g, w)
	}
}

// faithfulPrompts: the server's prompts are listed (under mapped names),
// got with and without arguments, and their arguments completed.
func faithfulPrompts(t *testing.T, ds, ts *mcp.ClientSession) {
	want, err := ds.ListPrompts(patient(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts.ListPrompts(patient(t), nil)
	if err != nil {
		t.Fatalf("prompts/list through toolhost: %v", err)
	}
	var names, wantNames []string
	for _, p := range got.Prompts {
		names = append(names, p.Name)
	}
	for _, p := range want.Prompts {
		wantNames = append(wantNames, mcpsource.ToolName("", p.Name))
	}
	slices.Sort(names)
	slices.Sort(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Errorf("prompts %q through toolhost, want %q", names, wantNames)
	}
	for _, c := range []struct {
		name string
		args map[string]string
	}{
		{"simple-prompt", nil},
		{"args-prompt", map[string]string{"city": "Lyon", "state": "Rhône"}},
		{"resource-prompt", map[string]string{"resourceType": "Text", "resourceId": "2"}},
	} {
		w, err := ds.GetPrompt(patient(t), &mcp.GetPromptParams{Name: c.name, Arguments: c.args})
		if err != nil {
			t.Fatalf("%s directly: %v", c.name, err)
		}
		g, err := ts.GetPrompt(patient(t), &mcp.GetPromptParams{Name: mcpsource.ToolName("", c.name), Arguments: c.args})
		if err != nil {
			t.Errorf("prompts/get %s through toolhost: %v", c.name, err)
			continue
		}
		if withoutMeta(g) != withoutMeta(w) {
			t.Errorf("prompt %s through toolhost:\n%s\nwant:\n%s", c.name, withoutMeta(g), withoutMeta(w))
		}
	}
	complete := func(cs *mcp.ClientSession, name string) string {
		res, err := cs.Complete(patient(t), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: name},
			Argument: mcp.CompleteParamsArgument{Name: "department", Value: "E"}})
		if err != nil {
			t.Errorf("completion/complete of %s: %v", name, err)
			return ""
		}
		return jsonString(res.Completion)
	}
	if g, w := complete(ts, mcpsource.ToolName("", "completable-prompt")), complete(ds, "completable-prompt"); g != w {
		t.Errorf("completion through toolhost %s, want %s", g, w)
	}
}

// faithfulResources: the server's resources and templates are listed, and
// read (text and binary, listed and by template) as the server sends them.
func faithfulResources(t *testing.T, ds, ts *mcp.ClientSession) {
	uris := func(cs *mcp.ClientSession) []string {
		res, err := cs.ListResources(patient(t), nil)
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		var out []string
		for _, r := range res.Resources {
			out = append(out, r.URI)
		}
		slices.Sort(out)
		return out
	}
	if g, w := uris(ts), uris(ds); !slices.Equal(g, w) || len(w) == 0 {
		t.Errorf("resources through toolhost %q, want %q", g, w)
	}
	templates := func(cs *mcp.ClientSession) string {
		res, err := cs.ListResourceTemplates(patient(t), nil)
		if err != nil {
			t.Fatalf("resources/templates/list: %v", err)
		}
		slices.SortFunc(res.ResourceTemplates, func(a, b *mcp.ResourceTemplate) int { return strings.Compare(a.URITemplate, b.URITemplate) })
		return jsonString(res.ResourceTemplates)
	}
	if g, w := templates(ts), templates(ds); g != w {
		t.Errorf("resource templates through toolhost:\n%s\nwant:\n%s", g, w)
	}
	for _, uri := range []string{"demo://resource/dynamic/text/1", "demo://resource/dynamic/blob/2", uris(ds)[0]} {
		w, err := ds.ReadResource(patient(t), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s directly: %v", uri, err)
		}
		g, err := ts.ReadResource(patient(t), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Errorf("read %s through toolhost: %v", uri, err)
			continue
		}
		if withoutMeta(g) != withoutMeta(w) {
			t.Errorf("%s through toolhost:\n%s\nwant:\n%s", uri, clip(withoutMeta(g), 2000), clip(withoutMeta(w), 2000))
		}
	}
}

// TestWithoutMetaClockTimes: two answers of server-everything made a second
// apart, in the text and inside a text blob, compare equal; a binary blob
// and any other difference still count.
func TestWithoutMetaClockTimes(t *testing.T) {
	blob := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	res := func(text, b string) map[string]any {
		return map[string]any{"content": []any{
			map[string]any{"type": "text", "text": text},
			map[string]any{"type": "resource", "resource": map[string]any{"uri": "demo://x", "blob": b}},
		}}
	}
	a := res("made at 12:28:02\u202fPM", blob("a blob created at 12:28:02 PM"))
	b := res("made at 12:28:03\u202fPM", blob("a blob created at 12:28:03 PM"))
	if withoutMeta(a) != withoutMeta(b) {
		t.Errorf("a second apart, still different:\n%s\n%s", withoutMeta(a), withoutMeta(b))
	}
	for _, c := range []map[string]any{
		res("made at 12:28:02\u202fPM", blob("another blob created at 12:28:02 PM")),
		res("made at 12:28:02\u202fPM", base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 1})),
	} {
		if withoutMeta(a) == withoutMeta(c) {
			t.Errorf("a real difference hidden:\n%s", withoutMeta(c))
		}
	}
}
