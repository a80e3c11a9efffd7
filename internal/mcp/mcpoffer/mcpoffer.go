// Package mcpoffer says how a tool is offered to MCP clients: its input
// schema as MCP wants it, and whether the go-sdk's server takes it at all.
// The front offers tools through it, and the host uses it to list, among
// its diagnostics, the served tools that MCP clients cannot be offered.
package mcpoffer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/mcp/jsondepth"
)

// maxSchemaDepth is how deeply an input schema may nest JSON objects and
// arrays for MCP clients to read a tools/list holding it: a message at most
// jsondepth.Max levels deep (the go-sdk decodes no deeper), and a tool's
// input schema sits four levels down (message, result, tools, tool). The
// SDK's AddTool checks only the schema's own depth, so a deeper schema would
// break every client's listing.
const maxSchemaDepth = jsondepth.Max - 4

// InputSchema returns the input schema to offer MCP clients for a tool's
// schema raw, or an error saying why the tool cannot be offered. MCP (and the
// go-sdk's AddTool) wants "type": "object"; the host also accepts a list of
// types holding "object" (such as ["object", "null"]). A tools/call always
// sends an object (null arguments are no arguments), so the schema's "type"
// becomes "object", and a missing or null schema {"type": "object"}; the
// rest (properties, required, $defs, descriptions...) is kept. A schema the
// SDK already takes is returned as it is.
func InputSchema(raw json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &top); err != nil {
			return nil, fmt.Errorf("input schema is not a JSON object: %v", err)
		}
	}
	if d := jsondepth.Of(raw); d > maxSchemaDepth {
		return nil, fmt.Errorf("input schema nests %d levels deep; MCP clients read at most %d", d, maxSchemaDepth)
	}
	var typ string
	if t, ok := top["type"]; ok && json.Unmarshal(t, &typ) == nil && typ == "object" {
		return raw, nil
	}
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	top["type"] = json.RawMessage(`"object"`)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(top); err != nil {
		return nil, fmt.Errorf("input schema: %v", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// refuseCall is the handler of the trial's tools, which no client calls.
func refuseCall(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("a trial tool")
}

// trial is a server no client ever connects to, on which Refusals
// tries tools.
var trial = sync.OnceValue(func() *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "toolhost-trial"}, nil)
})

// Refusals returns, for each tool of the spec that MCP clients cannot be
// offered even with its schema normalised by InputSchema, why: the
// go-sdk's AddTool refuses it (such as for an invalid x-mcp-header
// annotation), or InputSchema does. The host records them when it registers
// a group and lists served ones among its diagnostics.
func Refusals(spec *toolhost.GroupSpec) map[string]string {
	var out map[string]string
	for _, t := range spec.Tools {
		schema, err := InputSchema(t.InputSchema)
		if err == nil {
			srv, tool := trial(), &mcp.Tool{Name: t.Name, InputSchema: schema}
			if err = AddTool(srv, tool, refuseCall); err == nil {
				srv.RemoveTools(t.Name)
			}
		}
		if err != nil {
			if out == nil {
				out = map[string]string{}
			}
			out[t.Name] = err.Error()
		}
	}
	return out
}

// AddTool is srv.AddTool with the SDK's panic on a tool it refuses turned
// into an error, so that one tool cannot crash the host.
func AddTool(srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.New(strings.TrimPrefix(fmt.Sprint(p), fmt.Sprintf("AddTool %q: ", t.Name)))
		}
	}()
	srv.AddTool(t, h)
	return nil
}

// DefaultHints returns MCP's tool annotation hints for a tool that states
// none, a fresh map each time.
func DefaultHints() map[string]bool {
	return map[string]bool{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}
}
