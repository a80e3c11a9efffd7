package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// hinted is a test tool annotated by the sdk's options, as a module built
// with the sdk reports it.
func hinted(name string, opts ...sdk.ToolOption) toolhost.ToolSpec {
	t := tool(name)
	for _, o := range opts {
		o(&t)
	}
	return t
}

// withAnnotations is a test tool with raw annotations, as an MCP server or
// a module without the sdk may report them.
func withAnnotations(name, annotations string) toolhost.ToolSpec {
	t := tool(name)
	if annotations != "" {
		t.Annotations = []byte(annotations)
	}
	return t
}

// addSpecs registers a group of these tools, with its config block's tool
// settings applied as the loader applies them (nil conf: none).
func addSpecs(t tb, h *Host, id string, kind SourceKind, conf *config.Plugin, p toolhost.Provider, tools ...toolhost.ToolSpec) {
	t.Helper()
	spec := toolhost.GroupSpec{ID: id, Description: "group " + id, Tools: tools}
	if conf != nil {
		withSettings(&spec, conf)
	}
	if p == nil {
		p = okProvider{}
	}
	if err := h.register(&Group{Spec: spec, Kind: kind, SourceName: id, Provider: p, conf: conf}); err != nil {
		t.Fatal(err)
	}
}

// readOnlyWorld registers groups whose tools say every kind of thing about
// being read-only.
func readOnlyWorld(t *testing.T, h *Host) {
	addSpecs(t, h, "workspace", SourceBuiltin, nil, nil,
		hinted("read_file", sdk.ReadOnly()), hinted("list_files", sdk.ReadOnly()),
		hinted("write_file", sdk.Destructive()), hinted("edit_file", sdk.Destructive()),
		tool("bare"),                    // no annotations: not read-only
		hinted("peek?", sdk.ReadOnly())) // optional: needs an allow entry still
	addSpecs(t, h, "notes", SourcePlugin, &config.Plugin{Tools: map[string]config.ToolSettings{
		"get_note": {Hints: map[string]bool{"readOnlyHint": true}},  // the operator says so
		"wipe":     {Hints: map[string]bool{"readOnlyHint": false}}, // the operator corrects the module
	}}, nil,
		withAnnotations("search_notes", `{"title":"Search","readOnlyHint":true}`), // an MCP server's, title and all
		withAnnotations("add_note", `{"readOnlyHint":false,"destructiveHint":false}`),
		tool("get_note"),
		withAnnotations("wipe", `{"readOnlyHint":true}`),
		withAnnotations("odd", `{"readOnlyHint":"yes"}`), // not a boolean
		withAnnotations("list_notes", `[true]`))          // not an object
}

// TestReadOnlyRole: a read-only role lists exactly the tools whose
// readOnlyHint says so, of any group, and every other call is refused as a
// tool outside the role is; allow and deny still apply; turning it off
// gives the role its other tools back.
func TestReadOnlyRole(t *testing.T) {
	ctx := context.Background()
	h := newTestHost(t, nil)
	readOnlyWorld(t, h)
	all := []string{"read_file", "list_files", "write_file", "edit_file", "bare", "peek", "search_notes", "add_note", "get_note", "wipe", "odd", "list_notes"}
	cases := []struct {
		name string
		spec RoleSpec
		want []string
	}{
		{"every group", RoleSpec{}, []string{"get_note", "list_files", "read_file", "search_notes"}},
		{"one group", RoleSpec{ToolGroups: []string{"workspace"}}, []string{"list_files", "read_file"}},
		{"an optional read-only tool allowed", RoleSpec{ToolGroups: []string{"workspace"}, Allow: []string{"peek"}}, []string{"list_files", "peek", "read_file"}},
		{"deny still hides", RoleSpec{Deny: []string{"read_file", "notes"}}, []string{"list_files"}},
		{"allow does not undo read_only", RoleSpec{ToolGroups: []string{"workspace"}, Allow: []string{"write_file", "workspace"}}, []string{"list_files", "peek", "read_file"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.Name, spec.ReadOnlyTools = fmt.Sprint("reader", i), true
			if _, err := h.Roles().Create(ctx, spec); err != nil {
				t.Fatal(err)
			}
			agent, err := h.Agents().Create(ctx, spec.Name, store.Agent{})
			if err != nil {
				t.Fatal(err)
			}
			got := listed(t, h, spec.Name)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("listed %v, want %v", got, tc.want)
			}
			defs, err := toolsFor(h, agent.ID)
			if err != nil || !slices.Equal(slices.Sorted(slices.Values(defNames(defs))), tc.want) {
				t.Fatalf("the agent's tools = %v, %v; want %v", defNames(defs), err, tc.want)
			}
			for _, name := range all {
				for _, cc := range []toolhost.CallContext{{Role: spec.Name}, {AgentID: agent.ID}} {
					_, err := h.Call(ctx, &toolhost.CallRequest{Tool: name, Arguments: []byte("{}"), Context: cc})
					switch {
					case slices.Contains(tc.want, name) && err != nil:
						t.Errorf("%s (%+v): %v", name, cc, err)
					case !slices.Contains(tc.want, name) && (!errors.Is(err, toolhost.ErrToolNotAvailable) || !strings.Contains(err.Error(), `"`+name+`"`) || !strings.Contains(err.Error(), `role "`+spec.Name+`"`)):
						t.Errorf("%s (%+v): %v, want tool_not_available naming the tool and the role", name, cc, err)
					}
				}
			}
			if p, _ := h.Roles().Prompt(spec.Name); !strings.Contains(p, "only reads") {
				t.Errorf("the prompt does not say the role only reads:\n%s", p)
			}
		})
	}

	// Off and on again: the role's other tools come and go with it.
	off, on := false, true
	if _, err := h.Roles().Update(ctx, "reader1", RoleUpdate{ReadOnlyTools: &off}); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, h, "reader1"); !slices.Contains(got, "write_file") || callAs(h, "reader1", "edit_file") != nil {
		t.Fatalf("read_only off: listed %v, edit_file %v", got, callAs(h, "reader1", "edit_file"))
	}
	if p, _ := h.Roles().Prompt("reader1"); strings.Contains(p, "only reads") {
		t.Errorf("the prompt of a role that writes says it only reads:\n%s", p)
	}
	if _, err := h.Roles().Update(ctx, "reader1", RoleUpdate{ReadOnlyTools: &on}); err != nil {
		t.Fatal(err)
	}
	if err := callAs(h, "reader1", "edit_file"); !errors.Is(err, toolhost.ErrToolNotAvailable) {
		t.Fatalf("read_only on again: edit_file %v", err)
	}
	if r, _ := h.Roles().Get("reader1"); !r.ReadOnlyTools {
		t.Fatalf("stored role %+v", r)
	}
}

// TestReadOnlyRoleKeepsToolSearch: a read-only role's deferred groups are
// read-only too, and tool_search, which is not one of its groups but how it
// reaches them, stays whole.
func TestReadOnlyRoleKeepsToolSearch(t *testing.T) {
	h := newTestHost(t, nil)
	readOnlyWorld(t, h)
	addSpecs(t, h, ToolSearchGroup, SourceRuntime, nil, nil, hinted("find_tools", sdk.ReadOnly()), hinted("load_tools", sdk.Additive()))
	if _, err := h.Roles().Create(context.Background(), RoleSpec{Name: "r", ToolGroups: []string{"workspace"}, DeferredGroups: []string{"workspace"}, ReadOnlyTools: true}); err != nil {
		t.Fatal(err)
	}
	rt, err := roleTools(h, "r")
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(defNames(rt.Tools))); !slices.Equal(got, []string{"find_tools", "list_files", "load_tools", "read_file"}) {
		t.Fatalf("listed %v", got)
	}
	if !slices.Equal(slices.Sorted(slices.Values(rt.Deferred)), []string{"list_files", "read_file"}) {
		t.Fatalf("deferred %v", rt.Deferred)
	}
}

// fileWriter stands for a module whose tools change a file: every call
// rewrites it, so that a call that should have been refused shows.
type fileWriter struct {
	mu   sync.Mutex
	path string
}

func (*fileWriter) Describe(context.Context, *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	return nil, errors.New("not used")
}
func (*fileWriter) Configure(context.Context, *toolhost.ConfigureRequest) error { return nil }
func (w *fileWriter) Call(_ context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := os.WriteFile(w.path, []byte("# written by "+req.Tool+"\n"), 0o600); err != nil {
		return nil, err
	}
	return &toolhost.Result{OK: true}, nil
}

// TestDefaultResearcherCannotWrite is an attack table: the
// researcher of the default config.hcl, whose agent once added a group to
// its own role with edit_file on the config file, may call none of the
// tools that write (each as the real module annotates it), as a role or as
// an agent, and afterwards the file and the role are as they were; what it
// reads it still may.
func TestDefaultResearcherCannotWrite(t *testing.T) {
	def, err := config.Parse(mustRead(t, filepath.Join("..", "config.hcl")), filepath.Join(t.TempDir(), "config.hcl"), &config.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	h := newTestHost(t, &config.Config{Roles: def.Roles, Tools: def.Tools})
	target := filepath.Join(t.TempDir(), "config.hcl")
	original := []byte("role \"researcher\" {\n  tool_groups = [\"chrome\", \"workspace\"]\n}\n")
	w := &fileWriter{path: target}
	// The first-party modules' tools with the modules' own hints
	// (plugins/workspace, plugins/command, plugins/chrome).
	addSpecs(t, h, "workspace", SourceBuiltin, nil, w,
		hinted("get_workspace_info", sdk.ReadOnly()), hinted("list_files", sdk.ReadOnly()), hinted("read_file", sdk.ReadOnly()),
		hinted("write_file", sdk.Destructive()), hinted("edit_file", sdk.Destructive()),
		hinted("find_files", sdk.ReadOnly()), hinted("search_files", sdk.ReadOnly()))
	addSpecs(t, h, "command", SourceBuiltin, nil, w, hinted("run_command", sdk.KeepTail(), sdk.Destructive()), hinted("run_javascript", sdk.KeepTail(), sdk.Destructive()))
	addSpecs(t, h, "chrome", SourcePlugin, nil, w,
		hinted("navigate", sdk.ReadOnly(), sdk.OpenWorld()), hinted("get_text", sdk.ReadOnly()), hinted("get_html", sdk.ReadOnly()),
		hinted("click", sdk.Destructive(), sdk.OpenWorld()), hinted("type", sdk.Destructive(), sdk.OpenWorld()),
		hinted("wait_visible", sdk.ReadOnly()), hinted("evaluate", sdk.Destructive(), sdk.OpenWorld()),
		hinted("screenshot", sdk.Additive()), hinted("current_url", sdk.ReadOnly()))
	before, err := h.Roles().Get("researcher")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := h.Agents().Create(context.Background(), "researcher", store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		attack, tool, args string
		want               toolhost.Code // "" : the call runs
	}{
		{"edit_file adds command to its role in the config file", "edit_file",
			`{"path":"config.hcl","find":"[\"chrome\", \"workspace\"]","replace":"[\"chrome\", \"workspace\", \"command\"]"}`, toolhost.CodeToolNotAvailable},
		{"write_file replaces the config file", "write_file", `{"path":"config.hcl","content":"role \"researcher\" {}\n"}`, toolhost.CodeToolNotAvailable},
		{"run_command edits it with sed", "run_command", `{"command":"sed -i s/workspace/command/ config.hcl"}`, toolhost.CodeToolNotAvailable},
		{"run_javascript writes it with node", "run_javascript", `{"code":"require('fs').writeFileSync('config.hcl','')"}`, toolhost.CodeToolNotAvailable},
		{"evaluate runs script in a page", "evaluate", `{"expression":"fetch('/api/roles/researcher',{method:'PUT'})"}`, toolhost.CodeToolNotAvailable},
		{"click submits a form", "click", `{"selector":"form button"}`, toolhost.CodeToolNotAvailable},
		{"type fills a form", "type", `{"selector":"input","text":"x"}`, toolhost.CodeToolNotAvailable},
		{"screenshot writes into the workspace", "screenshot", `{}`, toolhost.CodeToolNotAvailable},
	}
	for _, tc := range cases {
		for _, who := range []toolhost.CallContext{{Role: "researcher"}, {AgentID: agent.ID}} {
			t.Run(tc.attack, func(t *testing.T) {
				if err := os.WriteFile(target, original, 0o600); err != nil {
					t.Fatal(err)
				}
				_, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: tc.tool, Arguments: []byte(tc.args), Context: who})
				if toolhost.CodeOf(err) != tc.want {
					t.Errorf("%+v: %v, want %s", who, err, tc.want)
				}
				if got := mustRead(t, target); string(got) != string(original) {
					t.Fatalf("the config file changed:\n%s", got)
				}
				if r, _ := h.Roles().Get("researcher"); !slices.Equal(r.ToolGroups, before.ToolGroups) || !r.ReadOnlyTools {
					t.Fatalf("the role changed: %+v", r)
				}
			})
		}
	}
	want := []string{"current_url", "find_files", "get_html", "get_text", "get_workspace_info", "list_files", "navigate", "read_file", "search_files", "wait_visible"}
	if got := slices.Sorted(slices.Values(listed(t, h, "researcher"))); !slices.Equal(got, want) {
		t.Errorf("the researcher's tools = %v, want %v", got, want)
	}
	// Reads still run (the file is rewritten by the stand-in module, which
	// shows that they do).
	if err := callAs(h, "researcher", "read_file"); err != nil {
		t.Errorf("read_file: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// genAnnotations are what a tool may say of itself: nothing, MCP hints in
// any combination (an MCP server's title among them), and things that are
// not hints at all. Not "null": withSettings panics on it when a tool block
// sets a hint (it unmarshals null into its map, which makes it nil).
var genAnnotations = rapid.SampledFrom([]string{
	"", "{}", "[]", `"readOnlyHint"`,
	`{"readOnlyHint":true}`, `{"readOnlyHint":false}`, `{"destructiveHint":true}`,
	`{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}`,
	`{"title":"A tool","readOnlyHint":true}`, `{"title":"A tool","readOnlyHint":false,"openWorldHint":true}`,
	`{"readOnlyHint":"true"}`, `{"readOnlyHint":1}`, `{"readOnlyHint":null}`,
})

// annotatedWorld registers random groups whose tools carry random
// annotations, and, for groups from a config block, random operator hints;
// it returns whether each group's tool is read-only, by group and tool, as
// this test reads the annotations and the operator's hints on its own.
func annotatedWorld(rt *rapid.T, h *Host) map[[2]string]bool {
	readOnly := map[[2]string]bool{}
	for i := range rapid.IntRange(0, 5).Draw(rt, "groups") {
		id := genGroupID.Draw(rt, fmt.Sprint("group", i))
		kind := rapid.SampledFrom([]SourceKind{SourcePlugin, SourceBuiltin, SourceRuntime, SourceMCP}).Draw(rt, fmt.Sprint("kind", i))
		var conf *config.Plugin
		if kind != SourceRuntime {
			conf = &config.Plugin{Tools: map[string]config.ToolSettings{}}
		}
		spec := toolhost.GroupSpec{ID: id, Description: "group " + id}
		ro := map[string]bool{}
		for _, n := range rapid.SliceOfNDistinct(rapid.SampledFrom(toolPool), 0, 5, rapid.ID).Draw(rt, fmt.Sprint("tools", i)) {
			a := genAnnotations.Draw(rt, "annotations")
			ro[n] = strings.Contains(a, `"readOnlyHint":true`)
			if conf != nil {
				switch rapid.IntRange(0, 2).Draw(rt, "operator") {
				case 1:
					conf.Tools[n], ro[n] = config.ToolSettings{Hints: map[string]bool{"readOnlyHint": true}}, true
				case 2:
					conf.Tools[n], ro[n] = config.ToolSettings{Hints: map[string]bool{"readOnlyHint": false}}, false
				}
			}
			if rapid.Bool().Draw(rt, "optional") {
				n += "?"
			}
			spec.Tools = append(spec.Tools, withAnnotations(n, a))
		}
		if conf != nil {
			withSettings(&spec, conf)
		}
		if h.register(&Group{Spec: spec, Kind: kind, SourceName: id, Provider: okProvider{}, conf: conf}) != nil {
			continue // a duplicate id
		}
		for n, v := range ro {
			readOnly[[2]string{id, n}] = v
		}
	}
	return readOnly
}

// Property: for any groups whose tools say anything of themselves, a
// read-only role lists exactly those of its tools (under its groups, allow
// and deny: what it would list without read_only) whose annotations say
// readOnlyHint, and listing equals calling: a listed tool runs, any other
// is refused with tool_not_available (or unknown_tool when no group has it).
func TestPropertyReadOnlyRole(t *testing.T) {
	t.Parallel()
	st := propertyStore(t)
	runProperty(t, func(rt *rapid.T) {
		h := worldHost(rt, st)
		readOnly := annotatedWorld(rt, h)
		var groups []string
		if known := h.mgr.IDs(); len(known) > 0 && rapid.Bool().Draw(rt, "configured") {
			groups = rapid.SliceOfDistinct(rapid.SampledFrom(known), rapid.ID).Draw(rt, "role groups")
		}
		spec := RoleSpec{Name: "reader", ToolGroups: groups, Allow: genPolicy.Draw(rt, "allow"), Deny: genPolicy.Draw(rt, "deny"), ReadOnlyTools: true}
		r, err := h.Roles().Create(context.Background(), spec)
		if err != nil {
			rt.Fatal(err)
		}
		writer := r
		writer.ReadOnlyTools = false
		var want []string
		for _, d := range compile(h.mgr.snap.Load(), 0, &writer, h.cfg.Tools).defs {
			if g, _ := h.mgr.GroupOf(d.Function.Name); readOnly[[2]string{g, d.Function.Name}] {
				want = append(want, d.Function.Name)
			}
		}
		got := listed(rt, h, "reader")
		if !slices.Equal(got, want) {
			rt.Fatalf("listed %v, want %v (read-only: %v)", got, want, readOnly)
		}
		for _, name := range toolPool {
			err := callAs(h, "reader", name)
			_, _, exists := h.mgr.lookup(name)
			switch {
			case slices.Contains(got, name) != (err == nil):
				rt.Fatalf("tool %s listed=%v but call error %v", name, slices.Contains(got, name), err)
			case err != nil && exists && !errors.Is(err, toolhost.ErrToolNotAvailable):
				rt.Fatalf("existing tool %s refused with %v", name, err)
			case err != nil && !exists && !errors.Is(err, toolhost.ErrUnknownTool):
				rt.Fatalf("missing tool %s refused with %v", name, err)
			}
		}
	})
}
