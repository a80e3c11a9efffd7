package host

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol"
)

// Names are drawn from small pools so that groups collide on ids and tool names.
var (
	genGroupID  = rapid.SampledFrom([]string{"alpha", "beta", "gamma", "delta", "notes", "workspace", "command", "chrome"})
	genToolName = rapid.SampledFrom([]string{"read", "write", "list", "find", "grep", "run", "open", "close", "add", "get"})
	genKind     = rapid.SampledFrom([]SourceKind{SourcePlugin, SourceBuiltin, SourceRuntime})
)

func genGroup(t *rapid.T, label string) *Group {
	id := genGroupID.Draw(t, label+".id")
	names := rapid.SliceOfNDistinct(genToolName, 0, 6, func(s string) string { return s }).Draw(t, label+".tools")
	spec := toolhost.GroupSpec{ID: id, Description: "group " + id}
	for _, n := range names {
		spec.Tools = append(spec.Tools, toolhost.ToolSpec{Name: n, Description: n, InputSchema: []byte(`{"type":"object"}`)})
	}
	return &Group{Spec: spec, Kind: genKind.Draw(t, label+".kind"), SourceName: id}
}

// runProperty checks f at least minPropertyRuns times (see TestMain).
func runProperty(t *testing.T, f func(*rapid.T)) {
	t.Helper()
	rapid.Check(t, f)
}

// Registration is consistent: after a successful registration the manager holds
// the group, and every tool of it is found through GroupOf: in this group, or
// in the earlier-registered group that already served the name.
func TestPropertyRegistrationConsistency(t *testing.T) {
	runProperty(t, func(rt *rapid.T) {
		m := newManager()
		order := map[string]int{}
		for i := range rapid.IntRange(1, 8).Draw(rt, "n") {
			g := genGroup(rt, fmt.Sprint("g", i))
			if _, err := m.Register(g); err != nil {
				continue
			}
			order[g.Spec.ID] = i
			got, ok := m.Get(g.Spec.ID)
			if !ok || got != g {
				rt.Fatalf("group %s not held after registration", g.Spec.ID)
			}
			for _, tool := range g.Spec.Tools {
				owner, ok := m.GroupOf(tool.Name)
				if !ok {
					rt.Fatalf("tool %s of %s not found", tool.Name, g.Spec.ID)
				}
				if og, _ := m.Get(owner); owner != g.Spec.ID && !hasTool(og, tool.Name) {
					rt.Fatalf("tool %s attributed to %s, which lacks it", tool.Name, owner)
				}
			}
		}
	})
}

// Property: after unregistration the group is gone, and none of its tools
// resolves to it.
func TestPropertyUnregistrationCompleteness(t *testing.T) {
	runProperty(t, func(rt *rapid.T) {
		m := newManager()
		var regs []*Group
		for i := range rapid.IntRange(1, 8).Draw(rt, "n") {
			g := genGroup(rt, fmt.Sprint("g", i))
			if _, err := m.Register(g); err == nil {
				regs = append(regs, g)
			}
		}
		if len(regs) == 0 {
			return
		}
		g := rapid.SampledFrom(regs).Draw(rt, "victim")
		m.Unregister(g.Spec.ID)
		if _, ok := m.Get(g.Spec.ID); ok {
			rt.Fatalf("group %s still held", g.Spec.ID)
		}
		if slices.Contains(m.IDs(), g.Spec.ID) {
			rt.Fatalf("group %s still listed", g.Spec.ID)
		}
		for _, tool := range g.Spec.Tools {
			if owner, ok := m.GroupOf(tool.Name); ok && owner == g.Spec.ID {
				rt.Fatalf("tool %s still resolves to %s", tool.Name, g.Spec.ID)
			}
		}
	})
}

// Property: a plugin can never register a reserved id; builtin and
// runtime sources can.
func TestPropertyReservedIDs(t *testing.T) {
	runProperty(t, func(rt *rapid.T) {
		m := newManager()
		g := genGroup(rt, "g")
		g.Spec.ID = rapid.SampledFrom(protocol.ReservedGroupIDs()).Draw(rt, "reserved")
		_, err := m.Register(g)
		switch {
		case g.Kind == SourcePlugin && !errors.Is(err, toolhost.ErrReservedGroupID):
			rt.Fatalf("plugin registered reserved id %s: err = %v", g.Spec.ID, err)
		case g.Kind == SourcePlugin:
			if _, ok := m.Get(g.Spec.ID); ok || len(m.IDs()) != 0 {
				rt.Fatalf("refused group %s is held", g.Spec.ID)
			}
		case err != nil:
			rt.Fatalf("%s source refused reserved id %s: %v", g.Kind, g.Spec.ID, err)
		}
	})
}

// Property: the tool definitions for a list of groups contain only tools
// those groups serve, no duplicates, and every tool they serve; the order is
// the same whatever the order of the list.
func TestPropertyToolDefinitions(t *testing.T) {
	runProperty(t, func(rt *rapid.T) {
		m := newManager()
		for i := range rapid.IntRange(0, 8).Draw(rt, "n") {
			_, _ = m.Register(genGroup(rt, fmt.Sprint("g", i)))
		}
		ids := rapid.SliceOf(genGroupID).Draw(rt, "ids")
		defs := m.ToolDefinitions(ids)
		seen := map[string]bool{}
		for _, d := range defs {
			if seen[d.Name] {
				rt.Fatalf("tool %s listed twice", d.Name)
			}
			seen[d.Name] = true
			if !m.IsToolInGroups(d.Name, ids) {
				rt.Fatalf("tool %s listed but not callable for %v", d.Name, ids)
			}
		}
		for _, id := range ids {
			g, ok := m.Get(id)
			if !ok {
				continue
			}
			for _, tool := range g.Spec.Tools {
				if owner, _ := m.GroupOf(tool.Name); slices.Contains(ids, owner) && !seen[tool.Name] {
					rt.Fatalf("tool %s of %s missing", tool.Name, id)
				}
			}
		}
		shuffled := rapid.Permutation(ids).Draw(rt, "shuffled")
		if got := m.ToolDefinitions(shuffled); !slices.EqualFunc(got, defs, func(a, b toolhost.ToolSpec) bool { return a.Name == b.Name }) {
			rt.Fatalf("order depends on the list's order: %v vs %v", names(got), names(defs))
		}
	})
}

// Property: a listing has each group's id, description and tool count, which
// counts the tools a role with the group is offered.
func TestPropertyGroupQuery(t *testing.T) {
	runProperty(t, func(rt *rapid.T) {
		m := newManager()
		want := map[string]*Group{}
		for i := range rapid.IntRange(0, 8).Draw(rt, "n") {
			g := genGroup(rt, fmt.Sprint("g", i))
			if _, err := m.Register(g); err == nil {
				want[g.Spec.ID] = g
			}
		}
		list := m.List()
		if len(list) != len(want) {
			rt.Fatalf("listed %d groups, want %d", len(list), len(want))
		}
		for _, info := range list {
			g := want[info.ID]
			if g == nil || info.Description != g.Spec.Description || len(info.Tools)+len(info.Skipped) != len(g.Spec.Tools) ||
				len(info.Tools) != info.ToolCount || info.Reserved != protocol.IsReserved(info.ID) {
				rt.Fatalf("listing %+v does not match group %+v", info, g)
			}
			// The count is what a role with the group is offered.
			var offered []string
			for _, t := range m.ToolDefinitions([]string{info.ID}) {
				offered = append(offered, t.Name)
			}
			if !slices.Equal(offered, info.Tools) {
				rt.Fatalf("group %s lists %v, offers %v", info.ID, info.Tools, offered)
			}
		}
	})
}

func TestRegisterRefusesInvalidSpecs(t *testing.T) {
	schema := []byte(`{"type":"object"}`)
	for _, tc := range []struct {
		name string
		spec toolhost.GroupSpec
	}{
		{"bad id", toolhost.GroupSpec{ID: "Bad Id"}},
		{"bad tool name", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{{Name: "Read-File", InputSchema: schema}}}},
		{"duplicate tools", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{{Name: "a", InputSchema: schema}, {Name: "a", InputSchema: schema}}}},
		{"schema not an object", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{{Name: "a", InputSchema: []byte(`{"type":"string"}`)}}}},
		{"schema not JSON", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{{Name: "a", InputSchema: []byte(`{`)}}}},
		{"schema missing", toolhost.GroupSpec{ID: "x", Tools: []toolhost.ToolSpec{{Name: "a"}}}},
		{"too many tools", toolhost.GroupSpec{ID: "x", Tools: make([]toolhost.ToolSpec, protocol.MaxTools+1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager()
			_, err := m.Register(&Group{Spec: tc.spec, Kind: SourcePlugin})
			if !errors.Is(err, toolhost.ErrInvalidGroupDef) {
				t.Fatalf("err = %v, want invalid_group_def", err)
			}
			t.Log(err)
			if len(m.IDs()) != 0 {
				t.Fatal("invalid group registered")
			}
		})
	}
}

func TestDuplicateReplacesAndOwnerUnregisterIsSafe(t *testing.T) {
	m := newManager()
	first := &Group{Spec: toolhost.GroupSpec{ID: "notes"}, Kind: SourcePlugin, SourceName: "a"}
	second := &Group{Spec: toolhost.GroupSpec{ID: "notes"}, Kind: SourcePlugin, SourceName: "b"}
	if replaced, err := m.Register(first); err != nil || replaced != nil {
		t.Fatal(replaced, err)
	}
	if replaced, err := m.Register(second); err != nil || replaced != first {
		t.Fatalf("replaced = %v, err = %v", replaced, err)
	}
	if m.UnregisterGroup(first) {
		t.Fatal("the replaced group's exit removed its successor")
	}
	if g, _ := m.Get("notes"); g != second {
		t.Fatal("successor lost")
	}
}

// TestReplaceOnlyTheCurrentGroup: an update of a group that another source
// has replaced meanwhile changes nothing.
func TestReplaceOnlyTheCurrentGroup(t *testing.T) {
	m := newManager()
	v1 := &Group{Spec: toolhost.GroupSpec{ID: "notes"}, Kind: SourcePlugin, SourceName: "a"}
	v2 := &Group{Spec: toolhost.GroupSpec{ID: "notes", Description: "v2"}, Kind: SourcePlugin, SourceName: "a"}
	other := &Group{Spec: toolhost.GroupSpec{ID: "notes"}, Kind: SourcePlugin, SourceName: "b"}
	if _, err := m.Register(v1); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.Replace(v1, v2); !ok || err != nil {
		t.Fatalf("Replace(v1, v2) = %v, %v", ok, err)
	}
	if _, err := m.Register(other); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.Replace(v2, v1); ok || err != nil {
		t.Fatalf("Replace of a group no longer registered = %v, %v", ok, err)
	}
	if g, _ := m.Get("notes"); g != other {
		t.Fatalf("the group registered is %+v, want b's", g)
	}
}

func hasTool(g *Group, name string) bool {
	_, ok := g.tool(name)
	return ok
}

func names(specs []toolhost.ToolSpec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}
