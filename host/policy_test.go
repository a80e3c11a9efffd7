package host

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// newTestHost returns a started host without plugins, its state in a
// temporary directory, or in st when given.
func newTestHost(t tb, cfg *config.Config, st ...*store.Store) *Host {
	t.Helper()
	if cfg == nil {
		cfg = &config.Config{}
	}
	opts := &Options{}
	if len(st) > 0 {
		opts.Store = st[0]
	}
	return runHost(t, cfg, opts)
}

// okProvider answers every call with ok.
type okProvider struct{}

func (okProvider) Describe(context.Context, *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	return nil, errors.New("not used")
}
func (okProvider) Configure(context.Context, *toolhost.ConfigureRequest) error { return nil }
func (okProvider) Call(context.Context, *toolhost.CallRequest) (*toolhost.Result, error) {
	return &toolhost.Result{OK: true}, nil
}

// tool is a tool spec for tests; a name ending in "?" makes it optional.
func tool(name string) toolhost.ToolSpec {
	n, optional := strings.CutSuffix(name, "?")
	return toolhost.ToolSpec{Name: n, Description: "tool " + n, InputSchema: []byte(`{"type":"object"}`), Optional: optional}
}

// addGroup registers a group straight into the manager.
func addGroup(t tb, h *Host, id string, kind SourceKind, tools ...string) {
	t.Helper()
	spec := toolhost.GroupSpec{ID: id, Description: "group " + id}
	for _, n := range tools {
		spec.Tools = append(spec.Tools, tool(n))
	}
	if err := h.register(&Group{Spec: spec, Kind: kind, SourceName: id, Provider: okProvider{}}); err != nil {
		t.Fatal(err)
	}
}

// listed returns the names of a role's tools, after checking that the
// list without token counts (the MCP front's) agrees with the one with.
func listed(t tb, h *Host, role string) []string {
	t.Helper()
	rt, err := roleTools(h, role)
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := h.Tools(ToolQuery{Role: role}); err != nil || !reflect.DeepEqual(plain.Tools, rt.Tools) {
		t.Fatalf("Tools(%q) = %v, %v; with tokens %v", role, plain.Tools, err, rt.Tools)
	}
	var out []string
	for _, d := range rt.Tools {
		out = append(out, d.Function.Name)
	}
	return out
}

func callAs(h *Host, role, tool string) error {
	_, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: []byte("{}"), Context: toolhost.CallContext{Role: role}})
	return err
}

func TestAllowDenyRules(t *testing.T) {
	cases := []struct {
		name         string
		global, role config.ToolPolicy
		want         []string
	}{
		{"optional hidden by default", config.ToolPolicy{}, config.ToolPolicy{}, []string{"list", "read", "run"}},
		{"allow by tool name", config.ToolPolicy{Allow: []string{"search"}}, config.ToolPolicy{}, []string{"list", "read", "search", "run"}},
		{"allow by group id", config.ToolPolicy{}, config.ToolPolicy{Allow: []string{"notes"}}, []string{"list", "read", "search", "run"}},
		{"group:plugins allows plugin tools only", config.ToolPolicy{Allow: []string{"group:plugins"}}, config.ToolPolicy{}, []string{"list", "read", "search", "run"}},
		{"allow a builtin's optional tool by name", config.ToolPolicy{}, config.ToolPolicy{Allow: []string{"sudo"}}, []string{"list", "read", "run", "sudo"}},
		{"deny by tool name", config.ToolPolicy{}, config.ToolPolicy{Deny: []string{"run"}}, []string{"list", "read"}},
		{"deny by group id", config.ToolPolicy{Deny: []string{"workspace"}}, config.ToolPolicy{}, []string{"run"}},
		{"deny wins over allow", config.ToolPolicy{Allow: []string{"search"}}, config.ToolPolicy{Deny: []string{"search"}}, []string{"list", "read", "run"}},
		{"deny group:plugins", config.ToolPolicy{Allow: []string{"search"}}, config.ToolPolicy{Deny: []string{"group:plugins"}}, []string{"list", "read", "run"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestHost(t, &config.Config{Tools: tc.global})
			addGroup(t, h, "workspace", SourceBuiltin, "list", "read")
			addGroup(t, h, "command", SourceBuiltin, "run", "sudo?")
			addGroup(t, h, "notes", SourcePlugin, "search?")
			if _, err := h.Roles().Create(context.Background(), RoleSpec{Name: "r", Allow: tc.role.Allow, Deny: tc.role.Deny}); err != nil {
				t.Fatal(err)
			}
			got := listed(t, h, "r")
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Fatalf("listed %v, want %v", got, want)
			}
			for _, name := range []string{"list", "read", "run", "sudo", "search"} {
				err := callAs(h, "r", name)
				if slices.Contains(want, name) != (err == nil) {
					t.Errorf("call %s: %v, but listed = %v", name, err, slices.Contains(want, name))
				}
				if err != nil && (!errors.Is(err, toolhost.ErrToolNotAvailable) || !strings.Contains(err.Error(), `"`+name+`"`) || !strings.Contains(err.Error(), `role "r"`)) {
					t.Errorf("call %s: error %v does not name the tool and the role", name, err)
				}
			}
		})
	}
}

func TestConflictRules(t *testing.T) {
	t.Run("core beats plugin, whatever the order", func(t *testing.T) {
		h := newTestHost(t, nil)
		addGroup(t, h, "early", SourcePlugin, "read", "own")
		addGroup(t, h, "workspace", SourceBuiltin, "read")
		if g, _ := h.mgr.GroupOf("read"); g != "workspace" {
			t.Fatalf("read served by %s", g)
		}
		if g, _ := h.mgr.GroupOf("own"); g != "early" {
			t.Fatalf("own served by %s", g)
		}
		wantDiag(t, h, "early", "plugin tool name conflict (early): read is already provided by group workspace")
	})
	t.Run("a later plugin tool with a taken name is skipped", func(t *testing.T) {
		h := newTestHost(t, nil)
		addGroup(t, h, "first", SourcePlugin, "search")
		addGroup(t, h, "second", SourcePlugin, "search", "other")
		if g, _ := h.mgr.GroupOf("search"); g != "first" {
			t.Fatalf("search served by %s", g)
		}
		if got := listed(t, h, ""); !slices.Equal(got, []string{"search", "other"}) {
			t.Fatalf("listed %v", got)
		}
		wantDiag(t, h, "second", "search is already provided by group first")
		info, _ := h.Modules().Groups()[slices.IndexFunc(h.Modules().Groups(), func(g GroupInfo) bool { return g.ID == "second" })], 0
		want := []SkippedTool{{Name: "search", ServedBy: "first", Reason: "group first serves a tool of the same name"}}
		if !slices.Equal(info.Skipped, want) || !slices.Equal(info.Tools, []string{"other"}) || info.ToolCount != 1 {
			t.Fatalf("tools %v (%d), skipped %+v", info.Tools, info.ToolCount, info.Skipped)
		}
	})
	t.Run("a plugin whose id is a core tool name is blocked whole", func(t *testing.T) {
		h := newTestHost(t, nil)
		addGroup(t, h, "command", SourceBuiltin, "exec")
		addGroup(t, h, "exec", SourcePlugin, "fancy", "other")
		if got := listed(t, h, ""); !slices.Equal(got, []string{"exec"}) {
			t.Fatalf("listed %v", got)
		}
		if err := callAs(h, "", "fancy"); !errors.Is(err, toolhost.ErrUnknownTool) {
			t.Fatalf("call to a blocked plugin's tool: %v", err)
		}
		wantDiag(t, h, "exec", `plugin exec blocked: its id "exec" is the name of a core tool`)
		if i := slices.IndexFunc(h.Modules().Groups(), func(g GroupInfo) bool { return g.ID == "exec" }); i < 0 || !h.Modules().Groups()[i].Blocked {
			t.Fatal("blocked group not marked blocked")
		}
	})
}

// TestSkippedToolsAreSaid: an MCP server's tools that a core group's
// names shadow, the core group registering after it (as a builtin may, the
// modules starting in parallel), are neither counted nor lost quietly: the
// listing counts what the group offers, names the others with the group
// that serves them, and the log says each one.
func TestSkippedToolsAreSaid(t *testing.T) {
	var log proctest.Buffer
	h := runHost(t, &config.Config{}, &Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Warn})})
	addGroup(t, h, "files", SourceMCP, "read_file", "write_file", "directory_tree")
	addGroup(t, h, "workspace", SourceBuiltin, "read_file", "write_file", "grep")
	i := slices.IndexFunc(h.Modules().Groups(), func(g GroupInfo) bool { return g.ID == "files" })
	info := h.Modules().Groups()[i]
	offered := listed(t, h, "")
	if info.ToolCount != 1 || !slices.Equal(info.Tools, []string{"directory_tree"}) || slices.Index(offered, "directory_tree") < 0 {
		t.Errorf("files: toolCount %d, tools %v; offered %v", info.ToolCount, info.Tools, offered)
	}
	var skipped []string
	for _, s := range info.Skipped {
		if s.ServedBy != "workspace" || s.Reason != "group workspace serves a tool of the same name" {
			t.Errorf("skipped %+v", s)
		}
		skipped = append(skipped, s.Name)
	}
	if !slices.Equal(skipped, []string{"read_file", "write_file"}) {
		t.Errorf("skipped %v", skipped)
	}
	for _, tool := range skipped {
		if line := "plugin tool name conflict (files): " + tool + " is already provided by group workspace; skipped"; !strings.Contains(log.String(), line) {
			t.Errorf("the log does not say %q:\n%s", line, log.String())
		}
	}
}

func wantDiag(t *testing.T, h *Host, plugin, msg string) {
	t.Helper()
	for _, d := range h.Modules().Diagnostics() {
		if d.Plugin == plugin && d.Level == "error" && strings.Contains(d.Message, msg) {
			return
		}
	}
	t.Fatalf("no diagnostic for %s containing %q in %+v", plugin, msg, h.Modules().Diagnostics())
}

func TestToolMeta(t *testing.T) {
	h := newTestHost(t, &config.Config{Tools: config.ToolPolicy{Allow: []string{"search"}}})
	addGroup(t, h, "notes", SourcePlugin, "search?", "add")
	m, ok := metaOf(h, "search")
	if !ok || m != (ToolMeta{Group: "notes", Plugin: "notes", Kind: SourcePlugin, Optional: true}) {
		t.Fatalf("meta = %+v, %v", m, ok)
	}
	if _, ok := metaOf(h, "nope"); ok {
		t.Fatal("meta of an unknown tool")
	}
	rt, _ := roleTools(h, "")
	if rt.Meta["search"] != m || rt.Meta["add"].Optional {
		t.Fatalf("role meta = %+v", rt.Meta)
	}
}

func TestRootRoleGetsOrgManagementOnly(t *testing.T) {
	h := newTestHost(t, nil)
	addGroup(t, h, "org_management", SourceRuntime, "spawn_agent", "create_role")
	addGroup(t, h, "workspace", SourceBuiltin, "read")
	tools, err := toolsFor(h, store.RootAgentID)
	if err != nil || len(tools) != 2 || tools[0].Function.Name != "spawn_agent" || tools[0].Type != "function" {
		t.Fatalf("root tools = %+v, %v", tools, err)
	}
	_, err = h.Call(context.Background(), &toolhost.CallRequest{Tool: "read", Context: toolhost.CallContext{AgentID: store.RootAgentID}})
	if !errors.Is(err, toolhost.ErrToolNotAvailable) || !strings.Contains(err.Error(), `role "root"`) {
		t.Fatalf("root calling read: %v", err)
	}
	if _, err := h.Roles().Update(context.Background(), store.RootRole, RoleUpdate{ToolGroups: &[]string{"workspace"}}); !errors.Is(err, toolhost.ErrPolicy) {
		t.Fatalf("editing root: %v", err)
	}
}

func TestRolePrompt(t *testing.T) {
	h := newTestHost(t, nil)
	addGroup(t, h, "workspace", SourceBuiltin, "read")
	addGroup(t, h, "command", SourceBuiltin, "run")
	ctx := context.Background()
	if _, err := h.Roles().Create(ctx, RoleSpec{Name: "dev", Prompt: "You write code.", ToolGroups: []string{"workspace"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Roles().Create(ctx, RoleSpec{Name: "any"}); err != nil {
		t.Fatal(err)
	}
	dev, _ := h.Roles().Prompt("dev")
	if !strings.HasPrefix(dev, "You write code.\n\n") || !strings.Contains(dev, "- workspace: group workspace") || strings.Contains(dev, "command") ||
		!strings.Contains(dev, "the ones you can call") {
		t.Fatalf("dev prompt:\n%s", dev)
	}
	anyp, _ := h.Roles().Prompt("any")
	if !strings.Contains(anyp, "Every tool group is available") || !strings.Contains(anyp, "- command:") || strings.Contains(anyp, "the ones you can call") {
		t.Fatalf("unrestricted prompt implies a restriction:\n%s", anyp)
	}
}

// TestRoleEditsSurviveRestart: roles created and edited through one host are
// there, the same, for the next host on the same data directory.
func TestRoleEditsSurviveRestart(t *testing.T) {
	cfg := &config.Config{DataDir: t.TempDir(), Roles: []config.Role{{Name: "declared", ToolGroups: []string{"workspace"}}}}
	ctx := context.Background()
	h1, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addGroup(t, h1, "workspace", SourceBuiltin, "read")
	addGroup(t, h1, "command", SourceBuiltin, "run")
	if _, err := h1.Roles().Create(ctx, RoleSpec{Name: "dev", ToolGroups: []string{"workspace"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h1.Roles().Update(ctx, "dev", RoleUpdate{ToolGroups: &[]string{"command", "workspace"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h1.Roles().Update(ctx, "declared", RoleUpdate{ToolGroups: &[]string{}}); !errors.Is(err, toolhost.ErrPolicy) || !strings.Contains(err.Error(), "config file") {
		t.Fatalf("editing a config role: %v", err)
	}
	want, _ := h1.Roles().Get("dev")
	_ = h1.Close()

	cfg.Roles = nil // the declaration is gone: the config role goes with it
	h2 := newTestHost(t, cfg)
	got, err := h2.Roles().Get("dev")
	if err != nil || !slices.Equal(got.ToolGroups, []string{"command", "workspace"}) || got.ID != want.ID {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
	if _, err := h2.Roles().Get("declared"); err == nil {
		t.Fatal("a config role no longer declared survived")
	}
}

func TestDeletedRoleTakesItsAgents(t *testing.T) {
	h := newTestHost(t, nil)
	ctx := context.Background()
	if _, err := h.Roles().Create(ctx, RoleSpec{Name: "temp"}); err != nil {
		t.Fatal(err)
	}
	a, err := h.Agents().Create(ctx, "temp", store.Agent{ParentID: store.RootAgentID})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Roles().Delete(ctx, "temp"); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Agents().Get(a.ID); ok {
		t.Fatal("the agent of a deleted role is still known")
	}
	if _, err := toolsFor(h, a.ID); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "unknown agent") {
		t.Fatalf("Tools of a deleted role's agent: %v", err)
	}
}

func TestUnknownGroupsRefused(t *testing.T) {
	h := newTestHost(t, nil)
	addGroup(t, h, "workspace", SourceBuiltin, "read")
	_, err := h.Roles().Create(context.Background(), RoleSpec{Name: "dev", ToolGroups: []string{"workspace", "nope"}})
	if !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "unknown tool group(s) nope") {
		t.Fatalf("err = %v", err)
	}
	if _, err := h.Roles().Create(context.Background(), RoleSpec{Name: "bad name!"}); !errors.Is(err, toolhost.ErrValidation) {
		t.Fatalf("bad name: %v", err)
	}
}

// The pools the properties draw from: group ids, tool names (a "?" suffix
// makes a tool optional) and policy entries.
var (
	genPolicyItem = rapid.SampledFrom([]string{"read", "write", "run", "search", "fetch", "alpha", "beta", "notes", "workspace", "group:plugins"})
	genPolicy     = rapid.SliceOfN(genPolicyItem, 0, 3)
	toolPool      = []string{"read", "write", "run", "search", "fetch", "list"}
)

// genWorld registers random groups and roles; it returns the role names.
func genWorld(rt *rapid.T, h *Host) []string {
	for i := range rapid.IntRange(0, 5).Draw(rt, "groups") {
		id := genGroupID.Draw(rt, fmt.Sprint("group", i))
		var tools []string
		for _, n := range rapid.SliceOfNDistinct(rapid.SampledFrom(toolPool), 0, 4, rapid.ID).Draw(rt, fmt.Sprint("tools", i)) {
			if rapid.Bool().Draw(rt, "optional") {
				n += "?"
			}
			tools = append(tools, n)
		}
		spec := toolhost.GroupSpec{ID: id, Description: "group " + id}
		for _, n := range tools {
			spec.Tools = append(spec.Tools, tool(n))
		}
		_ = h.register(&Group{Spec: spec, Kind: genKind.Draw(rt, fmt.Sprint("kind", i)), SourceName: id, Provider: okProvider{}})
	}
	roles := []string{"", store.RootRole}
	known := h.knownGroups()
	for i := range rapid.IntRange(0, 3).Draw(rt, "roles") {
		var groups []string
		if len(known) > 0 && rapid.Bool().Draw(rt, "configured") {
			groups = rapid.SliceOfDistinct(rapid.SampledFrom(known), rapid.ID).Draw(rt, "role groups")
		}
		spec := RoleSpec{Name: fmt.Sprint("role", i), ToolGroups: groups, Allow: genPolicy.Draw(rt, "allow"), Deny: genPolicy.Draw(rt, "deny")}
		if _, err := h.Roles().Create(context.Background(), spec); err != nil {
			rt.Fatal(err)
		}
		roles = append(roles, spec.Name)
	}
	return roles
}

// worldHost returns a host with a random global tools policy, on st emptied
// of every role but the root.
func worldHost(rt *rapid.T, st *store.Store) *Host {
	ctx := context.Background()
	roles, err := st.Roles(ctx)
	if err != nil {
		rt.Fatal(err)
	}
	for _, r := range roles[1:] {
		if err := st.DeleteRole(ctx, r.Name); err != nil {
			rt.Fatal(err)
		}
	}
	return newTestHost(rt, &config.Config{Tools: config.ToolPolicy{Allow: genPolicy.Draw(rt, "global allow"), Deny: genPolicy.Draw(rt, "global deny")}}, st)
}

// propertyStore is one store for all the runs of a property: opening SQLite
// afresh for each would dominate the run time.
func propertyStore(t *testing.T) *store.Store {
	st, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Listing equals calling: for any groups, roles and policies, a tool is
// callable for a role if and only if it is listed for it; otherwise the call
// is refused with tool_not_available (the tool exists) or unknown_tool.
func TestPropertyListingEqualsCalling(t *testing.T) {
	t.Parallel()
	st := propertyStore(t)
	runProperty(t, func(rt *rapid.T) {
		h := worldHost(rt, st)
		for _, role := range genWorld(rt, h) {
			list := listed(rt, h, role)
			for _, name := range toolPool {
				err := callAs(h, role, name)
				_, _, exists := h.mgr.lookup(name)
				switch {
				case slices.Contains(list, name) != (err == nil):
					rt.Fatalf("role %q: tool %s listed=%v but call error %v", role, name, slices.Contains(list, name), err)
				case err != nil && exists && !errors.Is(err, toolhost.ErrToolNotAvailable):
					rt.Fatalf("role %q: existing tool %s refused with %v", role, name, err)
				case err != nil && !exists && !errors.Is(err, toolhost.ErrUnknownTool):
					rt.Fatalf("role %q: missing tool %s refused with %v", role, name, err)
				}
			}
		}
	})
}

// An agent's tool definitions are its role's: they contain only
// tools of its role's groups, no duplicates, and every non-optional,
// undenied tool those groups serve.
func TestPropertyAgentToolDefinitions(t *testing.T) {
	t.Parallel()
	st := propertyStore(t)
	runProperty(t, func(rt *rapid.T) {
		h := worldHost(rt, st)
		for _, role := range genWorld(rt, h)[1:] {
			r, _ := h.Roles().Get(role)
			agent, err := h.Agents().Create(context.Background(), role, store.Agent{})
			if err != nil {
				rt.Fatal(err)
			}
			defs, err := toolsFor(h, agent.ID)
			if err != nil {
				rt.Fatal(err)
			}
			groups := r.ToolGroups
			switch {
			case role == store.RootRole:
				groups = []string{"org_management"}
			case len(groups) == 0:
				groups = h.mgr.IDs()
			}
			seen := map[string]bool{}
			for _, d := range defs {
				if seen[d.Function.Name] {
					rt.Fatalf("%s listed twice", d.Function.Name)
				}
				seen[d.Function.Name] = true
				if g, _ := h.mgr.GroupOf(d.Function.Name); !slices.Contains(groups, g) {
					rt.Fatalf("role %s lists %s from group %s, outside %v", role, d.Function.Name, g, groups)
				}
			}
			deny := append(slices.Clone(h.cfg.Tools.Deny), r.Deny...)
			for _, id := range groups {
				g, ok := h.mgr.Get(id)
				if !ok || h.mgr.snap.Load().blocked[id] {
					continue
				}
				for _, tl := range g.Spec.Tools {
					if owner, _ := h.mgr.GroupOf(tl.Name); owner == id && !tl.Optional && !mentions(deny, tl.Name, g) && !seen[tl.Name] {
						rt.Fatalf("role %s misses %s of %s", role, tl.Name, id)
					}
				}
			}
		}
	})
}

// Property: a call to a tool outside the agent's role is refused with an
// error naming the tool.
func TestPropertyUnauthorizedCallRefused(t *testing.T) {
	t.Parallel()
	st := propertyStore(t)
	runProperty(t, func(rt *rapid.T) {
		h := worldHost(rt, st)
		roles := genWorld(rt, h)[1:]
		role := rapid.SampledFrom(roles).Draw(rt, "role")
		agent, _ := h.Agents().Create(context.Background(), role, store.Agent{})
		defs, _ := toolsFor(h, agent.ID)
		for _, name := range toolPool {
			if slices.ContainsFunc(defs, func(d ToolDefinition) bool { return d.Function.Name == name }) {
				continue
			}
			_, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: name, Context: toolhost.CallContext{AgentID: agent.ID}})
			if err == nil || !strings.Contains(err.Error(), `"`+name+`"`) {
				rt.Fatalf("role %s called %s outside it: %v", role, name, err)
			}
		}
	})
}

// Property: a non-root role without tool groups gets the tools of every
// group.
func TestPropertyDefaultIsEveryGroup(t *testing.T) {
	t.Parallel()
	st := propertyStore(t)
	runProperty(t, func(rt *rapid.T) {
		h := worldHost(rt, st)
		genWorld(rt, h)
		groups := rapid.OneOf(rapid.Just([]string(nil)), rapid.Just([]string{})).Draw(rt, "unset")
		if _, err := h.Roles().Create(context.Background(), RoleSpec{Name: "unset", ToolGroups: groups}); err != nil {
			rt.Fatal(err)
		}
		got, want := listed(rt, h, "unset"), listed(rt, h, "")
		h.cfg.Tools = config.ToolPolicy{} // without policies: exactly every served tool
		if !slices.Equal(got, want) {
			rt.Fatalf("role without groups lists %v, a caller without a role %v", got, want)
		}
		if all := everyTool(h.mgr.snap.Load()); len(listed(rt, h, "unset")) > len(all.defs) {
			rt.Fatalf("more tools than exist")
		}
	})
}

func TestWatchSeesGroupAndRoleChanges(t *testing.T) {
	h := newTestHost(t, nil)
	fired := make(chan struct{}, 16)
	cancel := h.Watch(func() { fired <- struct{}{} })
	expect := func(what string) {
		t.Helper()
		select {
		case <-fired:
		case <-time.After(proctest.Patience):
			t.Fatalf("no notification after %s", what)
		}
	}
	addGroup(t, h, "notes", SourcePlugin, "add")
	expect("a group registered")
	if _, err := h.Roles().Create(context.Background(), RoleSpec{Name: "r"}); err != nil {
		t.Fatal(err)
	}
	expect("a role created")
	g, _ := h.mgr.Get("notes")
	h.unregister(g)
	expect("a group unregistered")
	cancel()
	addGroup(t, h, "more", SourcePlugin, "more")
	select {
	case <-fired:
		t.Fatal("notified after cancel")
	case <-time.After(50 * time.Millisecond):
	}
}
