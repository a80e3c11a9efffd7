// Package codemode is the code group: its one tool, run_script, runs a
// Starlark script whose functions are the caller's other tools, so that a
// model does in one call what would take it many, and gets back only what
// the script returns. Every call a script makes is the caller's own call
// through the host's pipeline ([host.Host.Call]): role, validation, rules,
// call limits, approvals, redaction and events as for any call, with the
// script's call as its parent. The group runs in-process, registered by
// the agent runtime ([github.com/toolhost/toolhost/agents]) under its
// reserved id ([host.CodeGroup]); only roles that name the group get it.
// Each script's interpreter runs in a runner process, the host's binary
// re-executed with TOOLHOST_CODE_RUNNER set (this package's init runs it),
// whose memory the kernel bounds; the host serves its calls.
package codemode

import (
	"context"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/codemode"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/sdk"
)

// Service is what the code group needs of the host: the caller's tools,
// the pipeline that calls them, and the bounds of the caller's role.
type Service interface {
	// Tools lists the tools an agent or a role may call ([host.Host.Tools]).
	Tools(q host.ToolQuery) (host.ToolList, error)
	// Call runs one call through the pipeline ([host.Host.Call]).
	Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error)
	// CodeBounds returns the bounds of a script of the role: its code
	// block's over the config's over [rules.DefaultCodeBounds].
	CodeBounds(role string) rules.CodeBounds
}

// description is run_script's description before the host appends the
// functions of the caller's tools (internal/codemode.Describe).
const description = `Run a Starlark (Python-like) script that calls your tools and returns only what you need: one call instead of many.
Each function below is one of your tools (what it does: its own definition), taking its arguments by name; it returns the tool's structured content (a dict) if it has one, else its text. A call that fails returns {"error": {"code": ..., "message": ...}}: test with failed(r).
call("tool", arg=...) calls a tool by its name; parallel([("tool", {"arg": ...}), ...]) runs calls at once, results in order; json.encode/decode; print() output comes back too.
Set result = ... at the top level; you get {"result": ..., "printed": "..."} as JSON. Example:
r = read_file(path="go.mod")
result = r["error"] if failed(r) else r.splitlines()[0]
No load(), recursion, files, network or host but through these functions; steps, time, memory, calls and output are bounded. A function's name is its tool's with characters other than letters, digits and "_" as "_"; a tool whose name is a keyword, builtin or another's function is only call("tool", ...).`

type runArgs struct {
	Script string `json:"script" jsonschema:"the Starlark script; set result = ... to return a value"`
}

// Group returns the code group, running scripts over svc.
func Group(svc Service) *sdk.Group {
	return &sdk.Group{ID: host.CodeGroup, Description: "Code mode: run a script that calls your tools and returns only what you need.", Tools: []sdk.Tool{
		sdk.NewTool(codemode.Tool, description, func(ctx context.Context, r *sdk.Request[runArgs]) (*sdk.Result, error) {
			return run(ctx, svc, r.Call, r.Args.Script), nil
		}, sdk.Title("Run a script"), sdk.Timeout(rules.MaxCodeTimeout)),
	}}
}
