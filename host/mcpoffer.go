package host

import (
	"fmt"
)

// mcpDiagnostic is the diagnostic of a served tool MCP clients cannot be
// offered.
func mcpDiagnostic(g *Group, tool, why string) Diagnostic {
	return Diagnostic{Level: "error", Plugin: g.SourceName, Group: g.Spec.ID,
		Message: fmt.Sprintf("tool %s of group %s cannot be offered to MCP clients: %s", tool, g.Spec.ID, why)}
}
