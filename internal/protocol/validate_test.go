package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
)

// TestValidateGroup: a spec within the limits passes; each way of breaking
// them is refused with invalid_group_def.
func TestValidateGroup(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	tool := func(name string) toolhost.ToolSpec { return toolhost.ToolSpec{Name: name, InputSchema: obj} }
	for _, tc := range []struct {
		name string
		spec toolhost.GroupSpec
		ok   bool
	}{
		{"valid", toolhost.GroupSpec{ID: "notes-2", Tools: []toolhost.ToolSpec{tool("add"), tool("list_all")}}, true},
		{"bad id", toolhost.GroupSpec{ID: "Notes"}, false},
		{"long id", toolhost.GroupSpec{ID: "a" + strings.Repeat("b", 64)}, false},
		{"too many tools", toolhost.GroupSpec{ID: "x", Tools: make([]toolhost.ToolSpec, MaxTools+1)}, false},
		{"bad tool name", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{tool("add-one")}}, false},
		{"duplicate tool", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{tool("add"), tool("add")}}, false},
		{"no schema", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{{Name: "add"}}}, false},
		{"schema not an object", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{{Name: "add", InputSchema: json.RawMessage(`{"type":"string"}`)}}}, false},
		{"schema unresolvable", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{{Name: "add", InputSchema: json.RawMessage(`{"type":"object","$ref":"#/missing"}`)}}}, false},
		{"negative timeout", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{{Name: "add", InputSchema: obj, Timeout: -time.Second}}}, false},
		{"items", toolhost.GroupSpec{ID: "x", Prompts: []toolhost.PromptSpec{{Name: "greet"}}, Resources: []toolhost.ResourceSpec{{URI: "memory://knowledge-graph"}, {URI: "file:///a%20b"}},
			ResourceTemplates: []toolhost.ResourceTemplateSpec{{URITemplate: "file:///{+path}"}}}, true},
		{"bad prompt name", toolhost.GroupSpec{ID: "x", Prompts: []toolhost.PromptSpec{{Name: "Greet me"}}}, false},
		{"duplicate prompt", toolhost.GroupSpec{ID: "x", Prompts: []toolhost.PromptSpec{{Name: "greet"}, {Name: "greet"}}}, false},
		{"too many prompts", toolhost.GroupSpec{ID: "x", Prompts: make([]toolhost.PromptSpec, MaxTools+1)}, false},
		{"URI without a scheme", toolhost.GroupSpec{ID: "x", Resources: []toolhost.ResourceSpec{{URI: "/etc/passwd"}}}, false},
		{"URI that does not parse", toolhost.GroupSpec{ID: "x", Resources: []toolhost.ResourceSpec{{URI: "http://[::1/x"}}}, false},
		{"long URI", toolhost.GroupSpec{ID: "x", Resources: []toolhost.ResourceSpec{{URI: "a:" + strings.Repeat("b", MaxURI)}}}, false},
		{"duplicate URI", toolhost.GroupSpec{ID: "x", Resources: []toolhost.ResourceSpec{{URI: "a:b"}}, ResourceTemplates: []toolhost.ResourceTemplateSpec{{URITemplate: "a:b"}}}, false},
		{"bad template", toolhost.GroupSpec{ID: "x", ResourceTemplates: []toolhost.ResourceTemplateSpec{{URITemplate: "a:{unclosed"}}}, false},
	} {
		err := ValidateGroup(&tc.spec)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case !tc.ok && !errors.Is(err, toolhost.ErrInvalidGroupDef):
			t.Errorf("%s: err = %v, want invalid_group_def", tc.name, err)
		}
	}
}

// TestReservedGroupIDs: the list is the caller's own copy.
func TestReservedGroupIDs(t *testing.T) {
	ids := ReservedGroupIDs()
	if !IsReserved("tool_search") || IsReserved("notes") || !IsReserved(ids[0]) {
		t.Fatalf("IsReserved disagrees with %v", ids)
	}
	ids[0] = "notes"
	if IsReserved("notes") {
		t.Fatal("changing the returned slice changed the reserved ids")
	}
}
