package mcpcontent

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
)

// TestRoundTrip: every block type, with its annotations, _meta, icons and
// size, comes back from From and To as it went in, in order, as JSON.
func TestRoundTrip(t *testing.T) {
	in := mcptest.Blocks("some text")
	blocks := From(in)
	types := []string{toolhost.ContentText, toolhost.ContentImage, toolhost.ContentAudio, toolhost.ContentResourceLink,
		toolhost.ContentResource, toolhost.ContentResource, toolhost.ContentText}
	if len(blocks) != len(types) {
		t.Fatalf("%d blocks, want %d", len(blocks), len(types))
	}
	for i, b := range blocks {
		if b.Type != types[i] {
			t.Errorf("block %d is %s, want %s", i, b.Type, types[i])
		}
	}
	want, _ := json.Marshal(in)
	got, _ := json.Marshal(To(blocks))
	if string(got) != string(want) {
		t.Errorf("round trip:\n got %s\nwant %s", got, want)
	}
	// Through the envelope's own JSON too, as a stored result is.
	b, _ := json.Marshal(blocks)
	var back []toolhost.Content
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(To(back)); string(got) != string(want) {
		t.Errorf("through the envelope's JSON:\n got %s\nwant %s", got, want)
	}
}

// TestToolUseLeftOut: a block of a type no tool result carries is left out.
func TestToolUseLeftOut(t *testing.T) {
	got := From([]mcp.Content{&mcp.ToolUseContent{ID: "x", Name: "y"}, &mcp.TextContent{Text: "kept"}})
	if len(got) != 1 || got[0].Text != "kept" {
		t.Errorf("From = %+v", got)
	}
}
