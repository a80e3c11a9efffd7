package toolhost

import "time"

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
}

// MetaStructuredContent is the Meta key of a result's structured content:
// a JSON object matching its tool's OutputSchema, which MCP clients get as
// structuredContent.
const MetaStructuredContent = "structured_content"

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
