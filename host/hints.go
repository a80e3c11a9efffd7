package host

import (
	"encoding/json"
	"maps"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
)

// mcpDefaults are MCP's hints for a tool that states none.
var mcpDefaults = map[string]bool{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}

// withSettings applies a block's tool blocks to the spec its module
// reported: a title and hints the operator set replace the module's (a
// hint not set keeps the module's, or MCP's default).
func withSettings(spec *toolhost.GroupSpec, conf *config.Plugin) {
	for i := range spec.Tools {
		t := &spec.Tools[i]
		set, ok := conf.Tools[t.Name]
		if !ok {
			continue
		}
		if set.Title != "" {
			t.Title = set.Title
		}
		if len(set.Hints) > 0 {
			h := maps.Clone(mcpDefaults)
			_ = json.Unmarshal(t.Annotations, &h) // the module's, if any
			maps.Copy(h, set.Hints)
			t.Annotations, _ = json.Marshal(h)
		}
	}
}

// readOnly reports whether the tool says it changes nothing (readOnlyHint).
func readOnly(t toolhost.ToolSpec) bool {
	var h map[string]bool
	return json.Unmarshal(t.Annotations, &h) == nil && h["readOnlyHint"]
}
