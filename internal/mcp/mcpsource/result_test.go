package mcpsource

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcp/mcpcontent"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
)

// TestResultContent: a go-sdk server's result of every content type, in a
// mixed order, with annotations and _meta, is the result's Content as the
// server sent it, in order; its text (of text blocks and the embedded text
// resource), joined, is the output, and
// nothing binary is doubled as an attachment. An error result keeps its
// blocks too, failing with tool_exec and its first line.
func TestResultContent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startServer(t, Options{Command: exe, Env: map[string]string{mcptest.ContentServerEnv: "1"}})
	want, _ := json.Marshal(mcptest.Blocks("first line\nsecond"))
	for _, isErr := range []bool{false, true} {
		args, _ := json.Marshal(mcptest.ContentArgs{Text: "first line\nsecond", Error: isErr})
		res, err := s.Call(context.Background(), &toolhost.CallRequest{Tool: "blocks", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(mcpcontent.To(res.Content)); string(got) != string(want) {
			t.Errorf("error %v: content\n got %s\nwant %s", isErr, got, want)
		}
		if res.Stdout != "first line\nsecond\nfirst line\nsecond\nthe end" || len(res.Attachments) != 0 {
			t.Errorf("error %v: stdout %q, %d attachments", isErr, res.Stdout, len(res.Attachments))
		}
		if res.OK == isErr || isErr && (res.Error.Code != toolhost.CodeToolExec || res.Error.Message != "first line") {
			t.Errorf("error %v: ok %v, error %+v", isErr, res.OK, res.Error)
		}
	}
}

// TestResultOfNothing: a result without content has none, and an error
// result without text says the tool reported an error.
func TestResultOfNothing(t *testing.T) {
	res := result(&mcp.CallToolResult{IsError: true})
	if len(res.Content) != 0 || res.Stdout != "" || res.Error.Message != "the tool reported an error" {
		t.Errorf("result = %+v", res)
	}
}
