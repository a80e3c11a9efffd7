package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/store"
)

// defNames are the names of definitions, sorted.
func defNames(defs []ToolDefinition) []string {
	out := make([]string, len(defs))
	for i, d := range defs {
		out[i] = d.Function.Name
	}
	slices.Sort(out)
	return out
}

// Deferring never widens what a role may call: for random groups, roles and
// deferred groups, an agent's callable tools ([ToolQuery.Unloaded]) are those it had
// without deferring, plus tool_search's; its definitions and the tools it
// may load split them exactly; loading makes a loadable tool a definition
// and nothing else; a name that is not loadable is refused.
func TestPropertyDeferringNeverWidens(t *testing.T) {
	t.Parallel()
	st := propertyStore(t)
	runProperty(t, func(rt *rapid.T) {
		h := worldHost(rt, st)
		addGroup(rt, h, ToolSearchGroup, SourceRuntime, "find_tools", "load_tools")
		ctx := context.Background()
		for i, role := range genWorld(rt, h)[2:] { // the roles made at run time
			agent, err := h.Agents().Create(ctx, role, store.Agent{})
			if err != nil {
				rt.Fatal(err)
			}
			before, _ := toolsFor(h, agent.ID)
			r, _ := h.Roles().Get(role)
			pool := r.ToolGroups
			if pool == nil {
				pool = h.knownGroups()
			}
			pool = slices.DeleteFunc(slices.Clone(pool), func(id string) bool { return id == ToolSearchGroup })
			var deferred []string
			if len(pool) > 0 {
				deferred = rapid.SliceOfDistinct(rapid.SampledFrom(pool), rapid.ID).Draw(rt, fmt.Sprint("deferred", i))
			}
			if _, err := h.Roles().Update(ctx, role, RoleUpdate{DeferredGroups: &deferred}); err != nil {
				rt.Fatal(err)
			}
			after, _ := toolsFor(h, agent.ID)
			want := defNames(before)
			want = slices.DeleteFunc(want, func(n string) bool { return n == "find_tools" || n == "load_tools" })
			if len(deferred) > 0 {
				want = append(want, "find_tools", "load_tools")
				slices.Sort(want)
			}
			if got := defNames(after); !slices.Equal(got, want) {
				rt.Fatalf("role %s deferring %v: callable %v, want %v", role, deferred, got, want)
			}
			defs, _ := offeredTo(h, agent.ID)
			list, _ := h.Tools(ToolQuery{Agent: agent.ID})
			lazy := list.Deferred
			for _, name := range lazy {
				if list.Loaded[name] || !slices.Contains(deferred, list.Meta[name].Group) {
					rt.Fatalf("deferred %s: loaded, or not of a deferred group %v", name, deferred)
				}
			}
			split := append(defNames(defs), lazy...)
			slices.Sort(split)
			if !slices.Equal(split, defNames(after)) {
				rt.Fatalf("definitions %v and loadable %v do not split the callable %v", defNames(defs), lazy, defNames(after))
			}
			for _, n := range lazy {
				if err := callAs(h, role, n); err != nil {
					rt.Fatalf("a deferred tool %s, not loaded, is not callable: %v", n, err)
				}
			}
			var load []string
			if len(lazy) > 0 {
				load = rapid.SliceOfDistinct(rapid.SampledFrom(lazy), rapid.ID).Draw(rt, fmt.Sprint("load", i))
			}
			if _, err := h.Agents().LoadTools(ctx, agent.ID, load); err != nil {
				rt.Fatal(err)
			}
			defs2, _ := offeredTo(h, agent.ID)
			wantDefs := append(defNames(defs), load...)
			slices.Sort(wantDefs)
			if got := defNames(defs2); !slices.Equal(got, wantDefs) {
				rt.Fatalf("after loading %v: definitions %v, want %v", load, got, wantDefs)
			}
			if _, err := h.Agents().LoadTools(ctx, agent.ID, []string{"no_such_tool"}); !errors.Is(err, toolhost.ErrValidation) {
				rt.Fatalf("loading an unknown tool: %v", err)
			}
		}
	})
}

// TestLoadedToolsSurviveARestart: an agent's loaded tools are in the store,
// and a new host on it gives the agent the same definitions.
func TestLoadedToolsSurviveARestart(t *testing.T) {
	st := propertyStore(t)
	ctx := context.Background()
	h := newTestHost(t, nil, st)
	addGroup(t, h, ToolSearchGroup, SourceRuntime, "find_tools", "load_tools")
	addGroup(t, h, "alpha", SourcePlugin, "read", "write")
	addGroup(t, h, "beta", SourcePlugin, "run", "fetch")
	if _, err := h.Roles().Create(ctx, RoleSpec{Name: "lazy", ToolGroups: []string{"alpha", "beta"}, DeferredGroups: []string{"beta"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Roles().Create(ctx, RoleSpec{Name: "wrong", ToolGroups: []string{"alpha"}, DeferredGroups: []string{"beta"}}); !errors.Is(err, toolhost.ErrValidation) {
		t.Fatalf("a deferred group outside the role's groups: %v", err)
	}
	a, _ := h.Agents().Create(ctx, "lazy", store.Agent{})
	defs, _ := offeredTo(h, a.ID)
	if got := defNames(defs); !slices.Equal(got, []string{"find_tools", "load_tools", "read", "write"}) {
		t.Fatalf("definitions before loading: %v", got)
	}
	if added, err := h.Agents().LoadTools(ctx, a.ID, []string{"run", "run"}); err != nil || !slices.Equal(added, []string{"run"}) {
		t.Fatalf("load run: %v, %v", added, err)
	}
	// The attack: an agent loads a tool of a group outside its role, to
	// widen what it may call. It is refused, and nothing is loaded.
	addGroup(t, h, "gamma", SourcePlugin, "wipe")
	if _, err := h.Agents().LoadTools(ctx, a.ID, []string{"fetch", "wipe"}); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "wipe") {
		t.Fatalf("loading a tool outside the role: %v", err)
	}
	if defs, _ := offeredTo(h, a.ID); slices.Contains(defNames(defs), "wipe") || slices.Contains(defNames(defs), "fetch") {
		t.Fatalf("definitions after a refused load: %v", defNames(defs))
	}
	if _, err := h.Call(ctx, &toolhost.CallRequest{Tool: "wipe", Arguments: []byte("{}"), Context: toolhost.CallContext{AgentID: a.ID}}); !errors.Is(err, toolhost.ErrToolNotAvailable) {
		t.Fatalf("calling the tool outside the role: %v", err)
	}
	if prompt, _ := h.Roles().Prompt("lazy"); !strings.Contains(prompt, "- beta: group beta (loaded on demand)\n") || !strings.Contains(prompt, "find_tools") {
		t.Errorf("role prompt:\n%s", prompt)
	}
	h.Close()

	h2 := newTestHost(t, nil, st)
	addGroup(t, h2, ToolSearchGroup, SourceRuntime, "find_tools", "load_tools")
	addGroup(t, h2, "alpha", SourcePlugin, "read", "write")
	addGroup(t, h2, "beta", SourcePlugin, "run", "fetch")
	defs, _ = offeredTo(h2, a.ID)
	if got := defNames(defs); !slices.Equal(got, []string{"find_tools", "load_tools", "read", "run", "write"}) {
		t.Fatalf("definitions after a restart: %v", got)
	}
}
