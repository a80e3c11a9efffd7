package host

import (
	"slices"

	"github.com/toolhost/toolhost/internal/codemode"
)

// CodeGroup is the id of the runtime's code-mode group: its one tool,
// run_script, runs a Starlark script whose functions are the caller's
// other tools, each call of which goes through [Host.Call] as the caller's
// own. Only a role that names it among its tool groups gets it: not a role
// without tool groups (every group), not the root role, not a caller
// without a role.
const CodeGroup = codemode.Group

// describeCode rebuilds, in defs, run_script's description from the other
// definitions in defs: the functions a script of a caller offered exactly
// defs may call (codemode.Describe). defs is changed in place; without
// run_script it is left alone.
func (v *view) describeCode(defs []ToolDefinition) {
	i := slices.IndexFunc(defs, func(d ToolDefinition) bool { return d.Function.Name == codemode.Tool })
	if i < 0 || v.tools[codemode.Tool].group.Spec.ID != CodeGroup {
		return
	}
	var fns []codemode.Def
	for _, d := range defs {
		if v.tools[d.Function.Name].group.Spec.ID != CodeGroup {
			fns = append(fns, codemode.Def{Name: d.Function.Name, Parameters: d.Function.Parameters})
		}
	}
	defs[i].Function.Description = codemode.Describe(v.tools[codemode.Tool].spec.Description, fns)
}
