// Package sdk is what a module author imports to write a toolhost plugin: a
// [Group] of typed tools, helpers for the result envelope, and [Serve].
//
// A tool is a Go function over a typed input struct. Its JSON-schema input is
// derived from the struct (json tags name the fields, jsonschema tags describe
// them; fields without omitempty are required), and the SDK validates and
// decodes the arguments before the handler runs:
//
//	type AddArgs struct {
//		A float64 `json:"a" jsonschema:"the first addend"`
//		B float64 `json:"b" jsonschema:"the second addend"`
//	}
//
//	func main() {
//		sdk.Serve(&sdk.Group{
//			ID:          "calc",
//			Description: "Arithmetic.",
//			Tools: []sdk.Tool{
//				sdk.NewTool("add", "Add two numbers.", func(ctx context.Context, req *sdk.Request[AddArgs]) (*sdk.Result, error) {
//					return sdk.Text(fmt.Sprint(req.Args.A + req.Args.B)), nil
//				}),
//			},
//		}, nil)
//	}
//
// The handler's ctx is cancelled when the host cancels the call or its
// deadline passes. A plugin exits on its own when its host dies, and nothing
// in the SDK writes to stdout: logs go to stderr as JSON (see [Logger]) and
// reach the host's log with their levels. When the host traces a call, the ctx
// carries the handler's span: spans started from it
// ([go.opentelemetry.io/otel.Tracer], whose provider [Serve] sets) reach the
// host with the response and join its trace.
// Package sdk/sdktest runs a group in-process or as a real subprocess for
// tests.
package sdk

import (
	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
)

// Aliases of the shared toolhost types, so a plugin needs to import sdk only.
type (
	// Result is the envelope every tool returns.
	Result = toolhost.Result
	// Attachment is binary output of a tool, such as a screenshot.
	Attachment = toolhost.Attachment
	// ErrorInfo is the error part of a [Result]: a code and a message.
	ErrorInfo = toolhost.ErrorInfo
	// CallContext says on whose behalf a call happens.
	CallContext = toolhost.CallContext
	// CallRequest is one tool call as the host sends it.
	CallRequest = toolhost.CallRequest
	// ConfigureRequest carries the plugin block's config {}, the paths the
	// host keeps to itself and, for the command module, the sandbox of the
	// processes it starts.
	ConfigureRequest = toolhost.ConfigureRequest
	// Code is a stable error code.
	Code = toolhost.Code
)

// The codes a tool may return through [Errorf].
const (
	CodeValidation = toolhost.CodeValidation // the arguments are wrong
	CodePolicy     = toolhost.CodePolicy     // a safety policy refused the call
	CodeTimeout    = toolhost.CodeTimeout    // the work ran past its deadline
	CodeCancelled  = toolhost.CodeCancelled  // the call was cancelled
	CodeToolExec   = toolhost.CodeToolExec   // the tool ran and failed
)

// Logger returns the plugin's logger: JSON on stderr once [Serve] runs, so the
// host logs each line at its level.
func Logger() hclog.Logger { return hclog.Default() }
