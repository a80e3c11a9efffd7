package mcpfront

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/hosttest"
	"github.com/toolhost/toolhost/store"
)

func TestToolResult(t *testing.T) {
	png := []byte("\x89PNG")
	res := toolResult(&toolhost.Result{Stdout: "out", Stderr: "err", Error: &toolhost.ErrorInfo{Code: toolhost.CodeToolExec, Message: "boom"},
		Attachments: []toolhost.Attachment{{MimeType: "image/png", Data: png}, {MimeType: "application/pdf", Data: []byte("%PDF")}}})
	if !res.IsError || len(res.Content) != 4 {
		t.Fatalf("result = %+v", res)
	}
	for i, want := range []string{"tool_exec: boom", "out", "stderr:\nerr"} {
		if tc, ok := res.Content[i].(*mcp.TextContent); !ok || tc.Text != want {
			t.Errorf("content[%d] = %+v, want %q", i, res.Content[i], want)
		}
	}
	if img, ok := res.Content[3].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || string(img.Data) != string(png) {
		t.Errorf("image = %+v", res.Content[3])
	}
}

// TestHandlerPanicAnswersOneRequest: a panic in a request's handler, which
// the SDK runs on a goroutine of its own where nothing else would recover
// it, answers that request with an error; the connection, and the process,
// go on.
func TestHandlerPanicAnswersOneRequest(t *testing.T) {
	h := hosttest.Start(t, &config.Config{Roles: []config.Role{{Name: "worker", Pos: "config.hcl:1,1"}}})
	r := newMCPRole(h, "worker", nil)
	t.Cleanup(r.cancel)
	// Straight on the SDK's server, beneath the front's middleware: a
	// stand-in for a handler with a bug.
	r.srv.AddPrompt(&mcp.Prompt{Name: "boom"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) { panic("a bug") })
	r.mu.Lock()
	r.items.prompts = map[string]toolhost.PromptSpec{"boom": {Name: "boom"}} // so that the front has prompts methods
	r.mu.Unlock()
	serverSide, clientSide := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := r.srv.Connect(withCaller(ctx, Caller{Credential: store.CredentialCLI}), serverSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "boom"}); err == nil || !strings.Contains(err.Error(), "prompts/get failed inside the server") {
		t.Errorf("a request whose handler panics: %v, want the internal error", err)
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Errorf("the connection after the panic: %v", err)
	}
}
