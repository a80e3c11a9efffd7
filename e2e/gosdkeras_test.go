package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/internal/proctest"
)

// TestGoSDKClientEras drives the MCP front of a real `toolhost serve` with
// the go-sdk client (v1.8.0) in both protocol eras, over streamable HTTP
// (the role's token, through a proxy that records the exchanges) and over
// stdio (`toolhost mcp -role`, through tee): pinned to 2025-11-25 it must
// get a session (initialize), asking for 2026-07-28 it must get the
// stateless era (server/discover; the client would fall back to initialize
// silently, so the negotiated version is checked). In each: list, call,
// progress, cancel (the command stops on the machine), and an approval
// through elicitation, which the client's multi-round-trip middleware
// answers in 2026-07-28. The go-sdk has no tasks extension.
func TestGoSDKClientEras(t *testing.T) {
	srv := newServe(t, fmt.Sprintf(erasConfig, pluginDir))
	srv.start()
	token := srv.roleToken("developer", "go-client-eras", "")
	prompt := rolePrompt(t, srv.cfg, "developer")
	workspace := filepath.Join(srv.dir, "workspace")

	for _, tr := range []string{"http", "stdio"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			for _, era := range []struct{ name, version string }{
				{"legacy", "2025-11-25"},
				{"modern", "2026-07-28"},
			} {
				t.Run(era.version, func(t *testing.T) {
					c := &goClient{}
					var transport mcp.Transport
					var checkWire func(t *testing.T)
					switch tr {
					case "http":
						proxy := newWireProxy(t, srv.base+"/mcp/developer", "")
						transport = &mcp.StreamableClientTransport{Endpoint: proxy.URL,
							HTTPClient: &http.Client{Transport: bearerTransport(token)}}
						checkWire = func(t *testing.T) { checkEraHTTP(t, era.name, proxy.recorded(0)) }
					case "stdio":
						argv, dir := stdioTee(t, srv.bin, "mcp", "-role", "developer", "-config", srv.cfg)
						cmd := exec.Command(argv[0], argv[1:]...)
						cmd.Dir = srv.dir
						transport = &mcp.CommandTransport{Command: cmd}
						checkWire = func(t *testing.T) { checkEraStdio(t, era.name, stdioMessages(t, dir)) }
					}
					cs := c.connect(t, transport, era.version)
					init := cs.InitializeResult()
					if init.ProtocolVersion != era.version {
						t.Errorf("negotiated %q, want %q", init.ProtocolVersion, era.version)
					}
					if init.Instructions != prompt {
						t.Errorf("instructions:\n%s\nwant the role's prompt:\n%s", init.Instructions, prompt)
					}
					if id := cs.ID(); tr == "http" && (id == "") != (era.name == "modern") {
						t.Errorf("session id %q in the %s era", id, era.version)
					}
					t.Run("list", func(t *testing.T) {
						res, err := cs.ListTools(patient(t), nil)
						if err != nil {
							t.Fatal(err)
						}
						var names []string
						for _, tool := range res.Tools {
							names = append(names, tool.Name)
						}
						if slices.Sort(names); !slices.Equal(names, developerTools) {
							t.Errorf("tools %q, want %q", names, developerTools)
						}
					})
					t.Run("call", func(t *testing.T) {
						res, err := cs.CallTool(patient(t), &mcp.CallToolParams{Name: "get_workspace_info", Arguments: map[string]any{}})
						if err != nil || res.IsError {
							t.Fatalf("get_workspace_info: %+v, %v", res, err)
						}
						b, _ := json.Marshal(res.StructuredContent)
						if !strings.Contains(string(b), workspace) {
							t.Errorf("structuredContent %s does not name the workspace %s", b, workspace)
						}
					})
					t.Run("progress", func(t *testing.T) { c.checkProgress(t, cs) })
					t.Run("cancel", func(t *testing.T) { c.checkCancel(t, cs) })
					t.Run("approval", func(t *testing.T) { c.checkApproval(t, cs, workspace) })
					t.Run("wire", checkWire)
				})
			}
		})
	}
}

// goClient is a go-sdk client that records the progress notifications and
// elicitations it receives, and accepts every elicitation with approving
// values.
type goClient struct {
	mu           sync.Mutex
	progress     map[any][]string // progress token → messages
	elicitations []*mcp.ElicitParams
}

// connect connects a client for the test asking for version.
func (c *goClient) connect(t *testing.T, tr mcp.Transport, version string) *mcp.ClientSession {
	t.Helper()
	c.progress = map[any][]string{}
	return connectGo(t, "e2e-eras", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.progress[req.Params.ProgressToken] = append(c.progress[req.Params.ProgressToken], req.Params.Message)
		},
		ElicitationHandler: approving(&c.mu, &c.elicitations),
	}, tr, version)
}

// connectGo connects a go-sdk client named name, with opts, to tr asking
// for version; the session is closed when the test ends.
func connectGo(t *testing.T, name string, opts *mcp.ClientOptions, tr mcp.Transport, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0.0"}, opts).Connect(patient(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect asking for %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// approving is an elicitation handler that records each request in *into,
// under mu, and accepts it with approvingContent.
func approving(mu *sync.Mutex, into *[]*mcp.ElicitParams) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		*into = append(*into, req.Params)
		mu.Unlock()
		return &mcp.ElicitResult{Action: "accept", Content: approvingContent(req.Params.RequestedSchema)}, nil
	}
}

// approvingContent fills a requested form schema with approving values: an
// enum's approving option (else its first), true, a number's default or
// minimum, a string's default or a note.
func approvingContent(schema any) map[string]any {
	var s struct {
		Properties map[string]struct {
			Type    string
			Enum    []any
			OneOf   []struct{ Const any }
			Items   struct{ Enum []any }
			Default any
			Minimum *float64
		}
	}
	b, _ := json.Marshal(schema)
	_ = json.Unmarshal(b, &s)
	content := map[string]any{}
	for name, p := range s.Properties {
		options := p.Enum
		for _, o := range p.OneOf {
			options = append(options, o.Const)
		}
		if len(options) == 0 {
			options = p.Items.Enum
		}
		switch {
		case len(options) > 0:
			yes := options[0]
			for _, o := range options {
				if str, ok := o.(string); ok && slices.ContainsFunc([]string{"approve", "allow", "yes", "accept", "once"},
					func(w string) bool { return strings.HasPrefix(strings.ToLower(str), w) }) {
					yes = o
					break
				}
			}
			if p.Type == "array" {
				content[name] = []any{yes}
			} else {
				content[name] = yes
			}
		case p.Type == "boolean":
			content[name] = true
		case p.Type == "number" || p.Type == "integer":
			switch {
			case p.Default != nil:
				content[name] = p.Default
			case p.Minimum != nil:
				content[name] = *p.Minimum
			default:
				content[name] = 0
			}
		case p.Type == "string":
			if p.Default != nil {
				content[name] = p.Default
			} else {
				content[name] = "approved by the e2e test"
			}
		}
	}
	return content
}

// patient is a context that ends after proctest.Patience, so that a call
// the server never answers fails the test instead of hanging it.
func patient(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Patience)
	t.Cleanup(cancel)
	return ctx
}

// alive checks that the session still answers: ping in 2025-11-25,
// tools/list in 2026-07-28, which has no ping.
func alive(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	var err error
	if cs.InitializeResult().ProtocolVersion >= "2026-07-28" {
		_, err = cs.ListTools(patient(t), nil)
	} else {
		err = cs.Ping(patient(t), nil)
	}
	if err != nil {
		t.Errorf("the connection after the cancellation: %v", err)
	}
}

// checkProgress: run_command's lines come as progress notifications.
func (c *goClient) checkProgress(t *testing.T, cs *mcp.ClientSession) {
	token := "lines-" + proctest.Marker()
	params := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{
		"command": "echo one; sleep 0.3; echo two; sleep 0.3; echo three; sleep 0.3"}}
	params.SetProgressToken(token)
	res, err := cs.CallTool(patient(t), params)
	if err != nil || res.IsError {
		t.Fatalf("run_command: %+v, %v", res, err)
	}
	c.mu.Lock()
	got := c.progress[token]
	c.mu.Unlock()
	if !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Errorf("progress messages %q, want one, two, three", got)
	}
}

// checkCancel: cancelling the call's context stops the command on the
// machine, and the connection goes on.
func (c *goClient) checkCancel(t *testing.T, cs *mcp.ClientSession) {
	marker := proctest.Marker()
	ctx, cancel := context.WithCancel(patient(t))
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{
			"command": "sleep " + marker, "timeout_seconds": 600}})
		done <- err
	}()
	t.Cleanup(cancel)
	proctest.Eventually(t, "the call's sleep runs", func() bool { return proctest.Running("sleep", marker) > 0 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call returned %v", err)
	}
	aborted := time.Now()
	proctest.Eventually(t, "the cancelled call's sleep is gone", func() bool { return proctest.Running("sleep", marker) == 0 })
	t.Logf("sleep gone %s after the cancellation", time.Since(aborted).Round(time.Millisecond))
	alive(t, cs)
}

// checkApproval: write_file requires an approval; the client is asked once
// with a message naming the tool, its arguments and the role, accepts, and
// the file is written.
func (c *goClient) checkApproval(t *testing.T, cs *mcp.ClientSession, workspace string) {
	marker := proctest.Marker()
	name := "approved-go-" + marker + ".txt"
	c.mu.Lock()
	c.elicitations = nil
	c.mu.Unlock()
	res, err := cs.CallTool(patient(t), &mcp.CallToolParams{Name: "write_file",
		Arguments: map[string]any{"path": name, "content": "content " + marker}})
	c.mu.Lock()
	elicitations := slices.Clone(c.elicitations)
	c.mu.Unlock()
	if len(elicitations) != 1 {
		t.Fatalf("%d elicitations, want 1 naming write_file; the call ended with %s, %v", len(elicitations), resultText(res), err)
	}
	for _, want := range []string{"write_file", name, "developer"} {
		if !strings.Contains(elicitations[0].Message, want) {
			t.Errorf("the elicitation's message does not name %q: %q", want, elicitations[0].Message)
		}
	}
	if err != nil || res.IsError {
		t.Fatalf("the approved call: %s, %v", resultText(res), err)
	}
	if b, err := os.ReadFile(filepath.Join(workspace, name)); err != nil || string(b) != "content "+marker {
		t.Errorf("the approved write: %q, %v", b, err)
	}
}

// resultText is a call result's text content, or what there is of it.
func resultText(res *mcp.CallToolResult) string {
	if res == nil {
		return "no result"
	}
	return fmt.Sprintf("%q (isError %v)", textOf(res), res.IsError)
}

// textOf joins a call result's text content.
func textOf(res *mcp.CallToolResult) string {
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n")
}
