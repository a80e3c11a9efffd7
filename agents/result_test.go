package agents

import (
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
)

// TestResultTextContent: the model reads an MCP server's text (its text
// blocks' and embedded resources') in stdout, once, and its other blocks
// without their binary data, which is named with its size.
func TestResultTextContent(t *testing.T) {
	res := &toolhost.Result{OK: true, Stdout: "a text", Content: []toolhost.Content{
		{Type: toolhost.ContentText, Text: "a text"},
		{Type: toolhost.ContentImage, MimeType: "image/png", Data: []byte("0123456789")},
		{Type: toolhost.ContentResource, Resource: &toolhost.ResourceContents{URI: "mem://b", MimeType: "application/x", Blob: []byte("blob")}},
		{Type: toolhost.ContentResourceLink, URI: "file:///r", Name: "r"},
		{Type: toolhost.ContentResource, Resource: &toolhost.ResourceContents{URI: "mem://t", Text: "a text"}},
	}}
	got := resultText(res, nil)
	for _, want := range []string{`"stdout":"a text"`, `content-1 (image/png, 10 bytes)`, `content-2 (application/x, 4 bytes)`, `"uri":"file:///r"`, `"uri":"mem://b"`, `"uri":"mem://t"`} {
		if !strings.Contains(got, want) {
			t.Errorf("%s\nlacks %s", got, want)
		}
	}
	if strings.Count(got, "a text") != 1 || strings.Contains(got, "MDEyMzQ1Njc4OQ") || strings.Contains(got, "YmxvYg") {
		t.Errorf("%s: the text twice, or binary data inlined", got)
	}
	if res.Content[1].Data == nil || res.Content[2].Resource.Blob == nil || res.Content[4].Resource.Text == "" {
		t.Error("resultText changed the result")
	}
}
