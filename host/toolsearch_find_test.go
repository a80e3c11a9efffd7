package host

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/store"
)

// TestSearchTools: find_tools ranks only the tools of the agent role's
// deferred groups, reads a tool's title, says why each matched and which are loaded, and sees a
// group the role defers later (a new view, a new index).
func TestSearchTools(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, nil, propertyStore(t))
	addGroup(t, h, ToolSearchGroup, SourceRuntime, "find_tools", "load_tools")
	addGroup(t, h, "alpha", SourcePlugin, "read", "write")
	shot := tool("screenshot")
	shot.Title, shot.Description = "Take screenshot", "Capture the viewport as a PNG."
	addSpecs(t, h, "browser", SourcePlugin, nil, nil, shot, tool("navigate"))
	for _, r := range []RoleSpec{
		{Name: "lazy", ToolGroups: []string{"alpha", "browser"}, DeferredGroups: []string{"browser"}},
		{Name: "eager", ToolGroups: []string{"alpha", "browser"}},
	} {
		if _, err := h.Roles().Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	lazy, _ := h.Agents().Create(ctx, "lazy", store.Agent{})
	eager, _ := h.Agents().Create(ctx, "eager", store.Agent{})

	found, err := h.Agents().FindTools(lazy.ID, "take a picture of the page", 5)
	if err != nil || len(found) == 0 || found[0].Name != "screenshot" || found[0].Group != "browser" || found[0].Loaded {
		t.Fatalf("found %+v, %v: want screenshot of browser first, not loaded", found, err)
	}
	if why := found[0].Why; !strings.Contains(why, "picture → screenshot (synonym): name, title") || !strings.Contains(why, "take: title") {
		t.Errorf("why %q: want the picture's synonym in the name and title, take in the title", why)
	}
	// Only deferred tools: "read" is the role's, but always loaded.
	if found, _ := h.Agents().FindTools(lazy.ID, "read", 5); slices.ContainsFunc(found, func(m ToolMatch) bool { return m.Name == "read" }) {
		t.Errorf("found a tool that is not deferred: %+v", found)
	}
	if _, err := h.Agents().LoadTools(ctx, lazy.ID, []string{"screenshot"}); err != nil {
		t.Fatal(err)
	}
	if found, _ := h.Agents().FindTools(lazy.ID, "screenshot", 1); len(found) != 1 || !found[0].Loaded || found[0].Why != "its name" {
		t.Errorf("after load_tools: %+v, want screenshot loaded, found by its name", found)
	}
	if found, err := h.Agents().FindTools(eager.ID, "screenshot", 5); err != nil || found != nil {
		t.Errorf("a role deferring nothing found %+v, %v", found, err)
	}
	if _, err := h.Agents().FindTools("nobody", "screenshot", 5); err == nil || !strings.Contains(err.Error(), "unknown agent") {
		t.Errorf("an unknown agent: %v", err)
	}
	// A group the role defers later is searched.
	addSpecs(t, h, "gamma", SourcePlugin, nil, nil, tool("wipe"))
	groups, deferred := []string{"alpha", "browser", "gamma"}, []string{"browser", "gamma"}
	if _, err := h.Roles().Update(ctx, "lazy", RoleUpdate{ToolGroups: &groups, DeferredGroups: &deferred}); err != nil {
		t.Fatal(err)
	}
	if found, _ := h.Agents().FindTools(lazy.ID, "wipe", 1); len(found) != 1 || found[0].Name != "wipe" || found[0].Why != "its name" {
		t.Errorf("a group deferred later: %+v", found)
	}
}
