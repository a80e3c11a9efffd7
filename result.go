package toolhost

import (
	"encoding/json"
	"time"
)

// Result is the envelope every tool returns, whatever it does: its output,
// whether the output was cut to the limits, and an error when it failed.
type Result struct {
	// OK is false when the tool failed; Error then says why.
	OK bool `json:"ok"`
	// ExitCode is a command's exit status; for other tools 0 on success, non-zero on failure.
	ExitCode int `json:"exit_code"`
	// Stdout is the tool's main output.
	Stdout string `json:"stdout"`
	// Stderr is diagnostic output.
	Stderr string `json:"stderr"`
	// TruncatedLines is set when output lines were dropped.
	TruncatedLines bool `json:"truncated_lines"`
	// TruncatedBytes is set when output bytes were dropped.
	TruncatedBytes bool `json:"truncated_bytes"`
	// NextPageCursor continues a paged read; empty on the last page.
	NextPageCursor string `json:"next_page_cursor,omitempty"`
	// Meta holds tool-specific facts (sizes, paths, counts); JSON values only.
	Meta map[string]any `json:"meta,omitempty"`
	// Error is set when OK is false.
	Error *ErrorInfo `json:"error,omitempty"`
	// Attachments carry binary output such as screenshots.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Content, when set, is the output as the ordered blocks an MCP server
	// gave it, each with its annotations and _meta, which MCP clients
	// receive as they were sent; Stdout then holds the text of its text
	// blocks and embedded text resources, in order, joined by newlines,
	// for readers of text.
	Content []Content `json:"content,omitempty"`
}

// The types of a [Content] block, as MCP names them.
const (
	ContentText         = "text"
	ContentImage        = "image"
	ContentAudio        = "audio"
	ContentResourceLink = "resource_link"
	ContentResource     = "resource" // an embedded resource
)

// Content is one block of a result's output, as MCP has it: which fields
// are set depends on its Type.
type Content struct {
	// Type is one of ContentText, ContentImage, ContentAudio,
	// ContentResourceLink and ContentResource.
	Type string `json:"type"`
	// Text is a text block's.
	Text string `json:"text,omitempty"`
	// MimeType is an image's, an audio clip's or a linked resource's.
	MimeType string `json:"mime_type,omitempty"`
	// Data is an image's or an audio clip's; JSON encodes it as base64.
	Data []byte `json:"data,omitempty"`
	// URI, Name, Title, Description, Size and Icons describe a linked
	// resource.
	URI         string          `json:"uri,omitempty"`
	Name        string          `json:"name,omitempty"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Size        *int64          `json:"size,omitempty"`
	Icons       json.RawMessage `json:"icons,omitempty"`
	// Resource is an embedded resource's contents.
	Resource *ResourceContents `json:"resource,omitempty"`
	// Annotations are the block's, a JSON object (audience, priority,
	// lastModified), passed on as they came.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// Meta is the block's _meta, a JSON object, passed on as it came.
	Meta json.RawMessage `json:"meta,omitempty"`
	// Role is, in the result of a [MethodPromptsGet] call, who says the
	// message the block is: "user" or "assistant".
	Role string `json:"role,omitempty"`
}

// StdoutText returns the block's text as a result's Stdout holds it: a
// text block's, or an embedded text resource's; false for any other block.
func (c *Content) StdoutText() (string, bool) {
	switch {
	case c.Type == ContentText:
		return c.Text, true
	case c.Type == ContentResource && c.Resource != nil && c.Resource.Text != "":
		return c.Resource.Text, true
	}
	return "", false
}

// ResourceContents are the contents of a resource: its text or its bytes.
type ResourceContents struct {
	// URI names the resource.
	URI string `json:"uri"`
	// MimeType is its media type, when known.
	MimeType string `json:"mime_type,omitempty"`
	// Text is a text resource's contents.
	Text string `json:"text,omitempty"`
	// Blob is a binary resource's contents; JSON encodes it as base64.
	Blob []byte `json:"blob,omitempty"`
	// Meta is its _meta, a JSON object, passed on as it came.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// MetaStructuredContent is the Meta key of a result's structured content:
// a JSON object matching its tool's OutputSchema, which MCP clients get as
// structuredContent.
const MetaStructuredContent = "structured_content"

// MetaDescription is the Meta key of a [MethodPromptsGet] result's
// description.
const MetaDescription = "description"

// MetaCompletion is the Meta key of a [MethodComplete] result: a JSON
// object {"values": [...], "total": N, "hasMore": B} as MCP has it.
const MetaCompletion = "completion"

// MetaProtocolError is the Meta key of a failed result whose MCP server
// answered with a JSON-RPC error: {"code": N, "message": S, "data": V},
// which MCP clients receive as that error.
const MetaProtocolError = "protocol_error"

// MetaStructuredContentCut is the Meta key the host sets (to true) when it
// dropped a result's structured content for being past the byte limit.
const MetaStructuredContentCut = "structured_content_cut"

// ErrorInfo is the error part of a [Result].
type ErrorInfo struct {
	// Code is one of the stable codes.
	Code Code `json:"code"`
	// Message is for people and models.
	Message string `json:"message"`
	// RetryAfterMs is, for rate_limited, in how many milliseconds the call
	// may succeed ([RetryAfter]); absent otherwise.
	RetryAfterMs int64 `json:"retry_after_ms,omitempty"`
}

// InfoOf returns the [ErrorInfo] of err: its code, message and, for
// rate_limited, when to retry (rounded up to the millisecond, so that a
// retry that waits as long is not early).
func InfoOf(err error) *ErrorInfo {
	ms := (RetryAfter(err) + time.Millisecond - 1) / time.Millisecond
	return &ErrorInfo{Code: CodeOf(err), Message: err.Error(), RetryAfterMs: int64(ms)}
}

// Attachment is binary output of a tool.
type Attachment struct {
	// Name is a file name for the data, such as "screenshot.png".
	Name string `json:"name,omitempty"`
	// MimeType is the data's media type, such as "image/png".
	MimeType string `json:"mime_type"`
	// Data is the content; JSON encodes it as base64.
	Data []byte `json:"data"`
}

// ErrorResult turns an error into a failed [Result], with the error's code.
func ErrorResult(err error) *Result {
	return &Result{
		ExitCode: 1,
		Error:    InfoOf(err),
	}
}
