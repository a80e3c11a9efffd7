package toolhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Code is a stable error code: the same string in Go (through the sentinels
// below and [errors.Is]), in JSON and in the result envelope.
type Code string

// The codes; docs/errors.md says which part of the host returns each and why.
const (
	CodeReservedGroupID  Code = "reserved_group_id"  // a plugin reported a reserved group id
	CodeDuplicateGroupID Code = "duplicate_group_id" // a group id was registered twice; the new group replaced the old
	CodeInvalidGroupDef  Code = "invalid_group_def"  // a group spec broke the protocol's limits
	CodeUnknownTool      Code = "unknown_tool"       // no group provides the tool
	CodeToolNotAvailable Code = "tool_not_available" // the tool exists but not for this role
	CodeValidation       Code = "validation"         // arguments or a request were invalid
	CodePolicy           Code = "policy"             // a safety policy refused the call
	CodeApprovalDenied   Code = "approval_denied"    // the call's approval was denied
	CodeRateLimited      Code = "rate_limited"       // a call limit of the role refused the call; retry later
	CodeTimeout          Code = "timeout"            // the call ran past its deadline
	CodeCancelled        Code = "cancelled"          // the caller cancelled the call
	CodePluginExited     Code = "plugin_exited"      // the plugin process exited or was unreachable
	CodeToolExec         Code = "tool_exec"          // the tool ran and failed
	CodeInternal         Code = "internal"           // a bug or an unexpected condition
)

// codes lists every code, in the order of docs/errors.md.
var codes = []Code{
	CodeReservedGroupID, CodeDuplicateGroupID, CodeInvalidGroupDef, CodeUnknownTool,
	CodeToolNotAvailable, CodeValidation, CodePolicy, CodeApprovalDenied, CodeRateLimited,
	CodeTimeout, CodeCancelled, CodePluginExited, CodeToolExec, CodeInternal,
}

// Codes returns every code, in the order of docs/errors.md: a new slice on
// each call, the caller's to change.
func Codes() []Code { return slices.Clone(codes) }

// Error is an error with a stable code. [errors.Is] matches any two Errors with
// the same code, so the sentinels below match every error of their code.
type Error struct {
	Code    Code   // the stable code
	Message string // what happened, for people
	Err     error  // the cause, if any
	// RetryAfter is, for rate_limited, how long until the call may succeed
	// ([RetryAfter] reads it through wrapping); 0 otherwise.
	RetryAfter time.Duration
}

// Sentinels for [errors.Is], one per code.
var (
	ErrReservedGroupID  = &Error{Code: CodeReservedGroupID, Message: "reserved group id"}
	ErrDuplicateGroupID = &Error{Code: CodeDuplicateGroupID, Message: "duplicate group id"}
	ErrInvalidGroupDef  = &Error{Code: CodeInvalidGroupDef, Message: "invalid group definition"}
	ErrUnknownTool      = &Error{Code: CodeUnknownTool, Message: "unknown tool"}
	ErrToolNotAvailable = &Error{Code: CodeToolNotAvailable, Message: "tool not available"}
	ErrValidation       = &Error{Code: CodeValidation, Message: "validation failed"}
	ErrPolicy           = &Error{Code: CodePolicy, Message: "refused by policy"}
	ErrApprovalDenied   = &Error{Code: CodeApprovalDenied, Message: "approval denied"}
	ErrRateLimited      = &Error{Code: CodeRateLimited, Message: "rate limited"}
	ErrTimeout          = &Error{Code: CodeTimeout, Message: "timed out"}
	ErrCancelled        = &Error{Code: CodeCancelled, Message: "cancelled"}
	ErrPluginExited     = &Error{Code: CodePluginExited, Message: "plugin exited"}
	ErrToolExec         = &Error{Code: CodeToolExec, Message: "tool failed"}
	ErrInternal         = &Error{Code: CodeInternal, Message: "internal error"}
)

// Errorf returns an [*Error] with the code and a formatted message. A %w verb
// keeps the wrapped error reachable through [errors.Is] and [errors.As].
func Errorf(code Code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}

// Error returns the message.
func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the code of err: the code of the first [*Error] in its chain,
// timeout or cancelled for the context errors, internal otherwise, and "" for
// nil.
func CodeOf(err error) Code {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, context.Canceled):
		return CodeCancelled
	}
	return CodeInternal
}

// RetryAfter returns the first [Error.RetryAfter] set in err's chain: for a
// rate_limited error, how long until the call may succeed; 0 when none is.
func RetryAfter(err error) time.Duration {
	for ; err != nil; err = errors.Unwrap(err) {
		if e, ok := err.(*Error); ok && e.RetryAfter > 0 {
			return e.RetryAfter
		}
	}
	return 0
}
