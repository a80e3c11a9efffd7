package host

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcpcontent"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/store"
)

// contentMCP is an mcp_server block running this binary as
// mcptest.ContentServer, unconfined.
func contentMCP(t *testing.T, limits config.Limits) config.Plugin {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.Plugin{Name: "content", Kind: config.KindMCP, Path: exe, Env: map[string]string{mcptest.ContentServerEnv: "1"},
		Limits: limits, StartTimeout: proctest.Patience, Sandbox: &sandbox.Policy{Off: true}}
}

// secretText holds a credential, in its second line.
const secretText = "the token is\nexport GITHUB_TOKEN=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"

// TestMCPContentThroughPipeline: an MCP server's blocks of every type come
// out of the pipeline in order with their annotations and _meta; a secret
// in a text block and in an embedded resource's text is redacted in both
// (and in stdout), and the terminal event carries none of the content.
func TestMCPContentThroughPipeline(t *testing.T) {
	h := startHost(t, contentMCP(t, config.Limits{}))
	args, _ := json.Marshal(mcptest.ContentArgs{Text: secretText})
	res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "blocks", Arguments: args, Context: toolhost.CallContext{CallID: "content-1"}})
	if err != nil || !res.OK {
		t.Fatalf("blocks: %+v, %v", res, err)
	}
	redacted := "the token is\nexport GITHUB_TOKEN=***REDACTED***"
	want, _ := json.Marshal(mcptest.Blocks(redacted))
	if got, _ := json.Marshal(mcpcontent.To(res.Content)); string(got) != string(want) {
		t.Errorf("content\n got %s\nwant %s", got, want)
	}
	if res.Stdout != redacted+"\n"+redacted+"\nthe end" || res.Meta["redacted"] != true || res.TruncatedBytes {
		t.Errorf("stdout %q, meta %v, truncated %v", res.Stdout, res.Meta, res.TruncatedBytes)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, _ := h.Events().List(context.Background(), store.EventFilter{Call: "content-1", Type: store.EventCallCompleted})
	if len(evs) != 1 || evs[0].Payload["redacted"] != true {
		t.Fatalf("completed events: %+v", evs)
	}
	if b, _ := json.Marshal(evs[0].Payload); strings.Contains(string(b), "the end") || strings.Contains(string(b), "ghp_") {
		t.Errorf("the event carries content: %s", b)
	}
}

// TestMCPContentCut: past the group's byte limit a result's blocks are
// cut in order: the text that crosses the limit cut, the blocks after it
// dropped, one text standing for those other than text blocks; stdout is the text
// kept and the note, and the result says it was cut.
func TestMCPContentCut(t *testing.T) {
	const limit = 200
	h := startHost(t, contentMCP(t, config.Limits{MaxOutputBytes: limit}))
	args, _ := json.Marshal(mcptest.ContentArgs{Text: strings.Repeat("x", 150)})
	res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "blocks", Arguments: args})
	if err != nil || !res.OK {
		t.Fatalf("blocks: %+v, %v", res, err)
	}
	if len(res.Content) != 2 || !strings.HasPrefix(res.Content[0].Text, "xxx") || len(res.Content[0].Text) >= 150 ||
		res.Content[1].Text != "[5 content block(s) dropped here and after: past the output limits]" {
		t.Fatalf("cut content: %+v", res.Content)
	}
	if res.Stdout != res.Content[0].Text+"\n"+res.Content[1].Text || !res.TruncatedBytes {
		t.Errorf("stdout %q, truncated %v", res.Stdout, res.TruncatedBytes)
	}
	// What is kept of the first block, its annotations and _meta with its
	// text, is within the limit.
	if b := res.Content[0]; len(b.Text)+len(b.Annotations)+len(b.Meta) > limit {
		t.Errorf("the first block keeps %d bytes", len(b.Text)+len(b.Annotations)+len(b.Meta))
	}
}

// TestFinishContent: the bounds of finishContent, block by block.
func TestFinishContent(t *testing.T) {
	text := func(s string) toolhost.Content { return toolhost.Content{Type: toolhost.ContentText, Text: s} }
	image := func(n int) toolhost.Content {
		return toolhost.Content{Type: toolhost.ContentImage, MimeType: "i", Data: make([]byte, n)}
	}
	resource := func(s string) toolhost.Content {
		return toolhost.Content{Type: toolhost.ContentResource, Resource: &toolhost.ResourceContents{URI: "u", Text: s}}
	}
	note := func(n int) string {
		return fmt.Sprintf("[%d content block(s) dropped here and after: past the output limits]", n)
	}
	for _, tc := range []struct {
		name             string
		in               []toolhost.Content
		lines, bytes     int
		want             []string // each block's type and text
		stdout           string
		cutLines, cutBig bool
	}{
		{"no limits", []toolhost.Content{text("a\nb"), image(10), text("c")}, 0, 0,
			[]string{"text a\nb", "image ", "text c"}, "a\nb\nc", false, false},
		{"lines: the joining newline counts", []toolhost.Content{text("a\nb"), text("c\nd")}, 2, 0,
			[]string{"text a\nb"}, "a\nb", true, false},
		{"lines: the block across the limit cut", []toolhost.Content{text("a"), text("b\nc\nd")}, 2, 0,
			[]string{"text a", "text b\n"}, "a\nb\n", true, false},
		{"bytes: an embedded resource's text cut to what its uri leaves, the image after dropped", []toolhost.Content{resource("0123456789"), image(0)}, 0, 8,
			[]string{"resource 0123456", "text " + note(1)}, "0123456\n" + note(1), false, true},
		{"binary past its bound dropped, text after kept", []toolhost.Content{image(maxContentBinary - 1), image(2), text("after"), image(1)}, 0, 0,
			[]string{"image ", "text " + note(1), "text after", "image "}, note(1) + "\nafter", false, true},
		{"past the blocks kept, every block dropped", append(slices.Repeat([]toolhost.Content{image(0)}, maxContentBlocks), text("late"), image(0)), 0, 0,
			append(slices.Repeat([]string{"image "}, maxContentBlocks), "text "+note(2)), note(2), false, true},
		{"one note for every drop", []toolhost.Content{text("0123456789"), image(0), image(0), resource("x")}, 0, 10,
			[]string{"text 0123456789", "text " + note(3)}, "0123456789\n" + note(3), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stdout, _, cut := finishContent(tc.in, tc.lines, tc.bytes)
			var got []string
			for _, b := range out {
				s := b.Text
				if b.Resource != nil {
					s = b.Resource.Text
				}
				got = append(got, b.Type+" "+s)
			}
			if !slices.Equal(got, tc.want) || stdout != tc.stdout || cut.lines != tc.cutLines || cut.bytes != tc.cutBig {
				t.Errorf("blocks %q, stdout %q, cut %+v; want %q, %q, lines %v bytes %v", got, stdout, cut, tc.want, tc.stdout, tc.cutLines, tc.cutBig)
			}
		})
	}
}
