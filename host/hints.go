package host

import (
	"encoding/json"
	"maps"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcpoffer"
)

// withSettings applies a block's tool blocks to the spec its module
// reported: a title and hints the operator set replace the module's (a
// hint not set keeps the module's, or MCP's default: [mcpoffer.DefaultHints]).
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
			h := mcpoffer.DefaultHints()
			var own map[string]bool // the module's, if any: "null" leaves it nil
			_ = json.Unmarshal(t.Annotations, &own)
			maps.Copy(h, own)
			maps.Copy(h, set.Hints)
			t.Annotations, _ = json.Marshal(h)
		}
	}
}

// trustedReadOnly reports whether the tool is read-only by a word the
// host trusts to skip an approval: the operator's tool block, or a
// first-party (builtin or runtime) module's own hint. A third-party
// module's or MCP server's claim is not enough: a lying one would escape
// its approvals.
func trustedReadOnly(g *Group, t toolhost.ToolSpec) bool {
	if g.conf != nil {
		if v, set := g.conf.Tools[t.Name].Hints["readOnlyHint"]; set {
			return v
		}
	}
	var h map[string]bool
	return g.Kind.core() && json.Unmarshal(t.Annotations, &h) == nil && h["readOnlyHint"]
}
