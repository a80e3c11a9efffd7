package host_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/server"
)

// bearer adds a bearer token to each request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestRateLimitedThroughTheFronts: past a limit, POST /api/call answers 429
// with Retry-After (whole seconds, rounded up) and the error's
// retry_after_ms; MCP answers a tool result with isError, "rate_limited:
// …" and _meta.retry_after_ms, as it does other pipeline errors (policy);
// the refused calls never run. A limit counts per credential: the token
// that spent it over HTTP is refused over MCP at once, another token has a
// bucket of its own.
func TestRateLimitedThroughTheFronts(t *testing.T) {
	const token = "limits-admin-token-0123456789abcdef"
	cfg := &config.Config{Auth: config.Auth{Token: token}, Limits: config.Limits{Timeout: time.Minute},
		Roles: []config.Role{{Name: "dev", ToolGroups: []string{"pings"}, Pos: "config.hcl:1,1",
			Limits: []config.Limit{{Target: "ping", Calls: 2, Per: time.Minute}}}}}
	h := startHost(cfg)
	t.Cleanup(func() { _ = h.Close() })
	var ran atomic.Int32
	if err := h.Modules().Register(context.Background(), &sdk.Group{ID: "pings", Description: "Pings.", Tools: []sdk.Tool{
		sdk.NewTool("ping", "Ping.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
			ran.Add(1)
			return sdk.Text("pong"), nil
		}),
	}}); err != nil {
		t.Fatal(err)
	}
	handler, err := server.New(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	httpToken, _, err := h.Store().CreateToken(context.Background(), "over-http", "dev", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	mcpToken, _, err := h.Store().CreateToken(context.Background(), "over-mcp", "dev", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: bearer(httpToken)}
	connect := func(t *testing.T, token string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/dev", HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}

	t.Run("http", func(t *testing.T) {
		post := func() (*http.Response, []byte) {
			resp, err := client.Post(srv.URL+"/api/call", "application/json", strings.NewReader(`{"role":"dev","tool":"ping"}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp, body
		}
		for i := range 2 {
			if resp, body := post(); resp.StatusCode != 200 {
				t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
			}
		}
		resp, body := post()
		var e struct{ Error toolhost.ErrorInfo }
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatal(err)
		}
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || e.Error.Code != toolhost.CodeRateLimited ||
			e.Error.RetryAfterMs <= 0 || e.Error.RetryAfterMs > 30_000 || int64(secs) != (e.Error.RetryAfterMs+999)/1000 ||
			!strings.Contains(e.Error.Message, "retry in") {
			t.Fatalf("third call: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	})

	t.Run("mcp", func(t *testing.T) {
		// The token that spent the limit over HTTP, in a session (a new
		// agent) of its own: still refused.
		spent, err := connect(t, httpToken).CallTool(context.Background(), &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
		if err != nil || !spent.IsError {
			t.Fatalf("the HTTP token's MCP session: %+v, %v", spent, err)
		}
		cs := connect(t, mcpToken)
		call := func() *mcp.CallToolResult {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping", Arguments: map[string]any{}})
			if err != nil {
				t.Fatalf("a protocol error, not a tool result: %v", err)
			}
			return res
		}
		for i := range 2 {
			if res := call(); res.IsError {
				t.Fatalf("call %d: %+v", i, res.Content)
			}
		}
		res := call()
		text := ""
		if len(res.Content) == 1 {
			text = res.Content[0].(*mcp.TextContent).Text
		}
		ms, _ := res.Meta["retry_after_ms"].(float64)
		if !res.IsError || !strings.HasPrefix(text, string(toolhost.CodeRateLimited)+": ") || ms <= 0 || ms > 60_000 {
			t.Fatalf("third call: isError %v, %q, _meta %v", res.IsError, text, res.Meta)
		}
	})
	if n := ran.Load(); n != 4 {
		t.Fatalf("the tool ran %d times, want 4 (2 over HTTP, 2 over MCP)", n)
	}
}
