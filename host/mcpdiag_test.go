package host

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
)

// TestMCPDiagnostics checks that a served tool MCP clients cannot be offered
// is a diagnostic while its group is registered, and a shadowed one is not.
func TestMCPDiagnostics(t *testing.T) {
	header := `{"type":"object","properties":{"r":{"type":"array","x-mcp-header":"R"}}}`
	fine := `{"type":["object","null"]}`
	spec := func(id string, tools map[string]string) toolhost.GroupSpec {
		s := toolhost.GroupSpec{ID: id}
		for _, name := range []string{"a_tool", "b_tool"} {
			if schema, ok := tools[name]; ok {
				s.Tools = append(s.Tools, toolhost.ToolSpec{Name: name, InputSchema: json.RawMessage(schema)})
			}
		}
		return s
	}
	m := newManager()
	if _, err := m.Register(&Group{Spec: spec("one", map[string]string{"a_tool": header, "b_tool": fine}), Kind: SourcePlugin, SourceName: "p1"}); err != nil {
		t.Fatal(err)
	}
	want := []Diagnostic{{Level: "error", Plugin: "p1", Group: "one",
		Message: `tool a_tool of group one cannot be offered to MCP clients: invalid parameter header annotations: property "r": x-mcp-header can only be applied to primitive types (integer, string, boolean), got "array"`}}
	if got := m.Diagnostics(); !reflect.DeepEqual(got, want) {
		t.Errorf("diagnostics = %+v\nwant %+v", got, want)
	}
	// A later group's a_tool is shadowed: only the conflict is reported.
	if _, err := m.Register(&Group{Spec: spec("two", map[string]string{"a_tool": header}), Kind: SourcePlugin, SourceName: "p2"}); err != nil {
		t.Fatal(err)
	}
	if got := m.Diagnostics(); len(got) != 2 || !reflect.DeepEqual(got[0], want[0]) || !strings.Contains(got[1].Message, "conflict") {
		t.Errorf("diagnostics = %+v", got)
	}
	m.Unregister("one") // two's a_tool is served now
	if got := m.Diagnostics(); len(got) != 1 || got[0].Group != "two" || !strings.Contains(got[0].Message, "tool a_tool of group two cannot be offered") {
		t.Errorf("diagnostics = %+v", got)
	}
	m.Unregister("two")
	if got := m.Diagnostics(); len(got) != 0 {
		t.Errorf("diagnostics = %+v, want none", got)
	}
}
