package mcpfront

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
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
