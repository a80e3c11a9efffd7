package host

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
	"github.com/toolhost/toolhost/internal/jsondepth"
)

// maxMCPSchemaDepth is how deeply an input schema may nest JSON objects and
// arrays for MCP clients to read a tools/list holding it: a message at most
// jsondepth.Max levels deep (the go-sdk decodes no deeper), and a tool's
// input schema sits four levels down (message, result, tools, tool). The
// SDK's AddTool checks only the schema's own depth, so a deeper schema would
// break every client's listing.
const maxMCPSchemaDepth = jsondepth.Max - 4

// MCPInputSchema returns the input schema to offer MCP clients for a tool's
// schema raw, or an error saying why the tool cannot be offered. MCP (and the
// go-sdk's AddTool) wants "type": "object"; the host also accepts a list of
// types holding "object" (such as ["object", "null"]). A tools/call always
// sends an object (null arguments are no arguments), so the schema's "type"
// becomes "object", and a missing or null schema {"type": "object"}; the
// rest (properties, required, $defs, descriptions...) is kept. A schema the
// SDK already takes is returned as it is.
func MCPInputSchema(raw json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &top); err != nil {
			return nil, fmt.Errorf("input schema is not a JSON object: %v", err)
		}
	}
	if d := jsondepth.Of(raw); d > maxMCPSchemaDepth {
		return nil, fmt.Errorf("input schema nests %d levels deep; MCP clients read at most %d", d, maxMCPSchemaDepth)
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

// mcpTrial is a server no client ever connects to, on which mcpRefusals
// tries tools.
var mcpTrial = sync.OnceValue(func() *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "toolhost-trial"}, nil)
})

// mcpRefusals returns, for each tool of the spec that MCP clients cannot be
// offered even with its schema normalised by MCPInputSchema, why: the
// go-sdk's AddTool refuses it (such as for an invalid x-mcp-header
// annotation), or MCPInputSchema does. Register records them, and the
// manager lists served ones among its diagnostics.
func mcpRefusals(spec *toolhost.GroupSpec) map[string]string {
	var out map[string]string
	for _, t := range spec.Tools {
		schema, err := MCPInputSchema(t.InputSchema)
		if err == nil {
			err = tryMCPTool(mcpTrial(), &mcp.Tool{Name: t.Name, InputSchema: schema})
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

// tryMCPTool adds t to srv and removes it again, with the SDK's panic on a
// tool it refuses turned into an error.
func tryMCPTool(srv *mcp.Server, t *mcp.Tool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.New(strings.TrimPrefix(fmt.Sprint(p), fmt.Sprintf("AddTool %q: ", t.Name)))
		}
	}()
	srv.AddTool(t, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil })
	srv.RemoveTools(t.Name)
	return nil
}

// mcpDiagnostic is the diagnostic of a served tool MCP clients cannot be
// offered.
func mcpDiagnostic(g *Group, tool, why string) Diagnostic {
	return Diagnostic{Level: "error", Plugin: g.SourceName, Group: g.Spec.ID,
		Message: fmt.Sprintf("tool %s of group %s cannot be offered to MCP clients: %s", tool, g.Spec.ID, why)}
}
