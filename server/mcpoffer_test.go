package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// rawGroup is a group whose tools have raw input schemas (name → schema);
// a call answers "tool:arguments".
type rawGroup struct {
	id    string
	tools map[string]string
}

func (g rawGroup) Describe(context.Context, *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	spec := &toolhost.GroupSpec{ID: g.id, Description: "The " + g.id + " group."}
	for _, name := range slices.Sorted(maps.Keys(g.tools)) {
		spec.Tools = append(spec.Tools, toolhost.ToolSpec{Name: name, Description: "Tool " + name + ".", InputSchema: json.RawMessage(g.tools[name])})
	}
	return spec, nil
}

func (rawGroup) Configure(context.Context, *toolhost.ConfigureRequest) error { return nil }

func (rawGroup) Call(_ context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	return &toolhost.Result{OK: true, Stdout: req.Tool + ":" + string(req.Arguments)}, nil
}

// deepSchema is an object schema whose JSON nests depth levels (an
// annotation holding nested arrays).
func deepSchema(depth int) string {
	return `{"type":"object","x-nested":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

// serveLogged is serve with the host's log (warnings and up) written to the
// returned buffer.
func serveLogged(t *testing.T, cfg *config.Config, groups ...toolhost.Provider) (string, *host.Host, *proctest.Buffer) {
	t.Helper()
	logs := &proctest.Buffer{}
	h, err := host.New(withTestToken(cfg), &host.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if err := h.Modules().Register(context.Background(), g); err != nil {
			t.Fatal(err)
		}
	}
	return newHTTPServer(t, h, nil).URL, h, logs
}

// waitTools waits until the session lists exactly the tools want (sorted).
func waitTools(t *testing.T, cs *mcp.ClientSession, want ...string) {
	t.Helper()
	proctest.Eventually(t, fmt.Sprintf("the session lists %v", want), func() bool { return slices.Equal(mcptest.ToolNames(t, cs), want) })
}

// offerDiagnostics returns GET /api/diagnostics' entries about the group's
// tools that cannot be offered to MCP clients.
func offerDiagnostics(t *testing.T, base, group string) []host.Diagnostic {
	t.Helper()
	var all []host.Diagnostic
	if code := do(t, "GET", base+"/api/diagnostics", nil, &all); code != 200 {
		t.Fatalf("GET /api/diagnostics = %d", code)
	}
	return onlyOffers(all, group)
}

func onlyOffers(ds []host.Diagnostic, group string) []host.Diagnostic {
	var out []host.Diagnostic
	for _, d := range ds {
		if d.Group == group && strings.Contains(d.Message, "cannot be offered to MCP clients") {
			out = append(out, d)
		}
	}
	return out
}

// TestMCPNormalisedSchemas checks that schemas the host takes but the go-sdk
// would refuse as they are reach the role's clients with "type": "object",
// the rest intact, and that calls are still validated against the tool's own
// schema. Before normalising, the ["object","null"] tools were missing.
func TestMCPNormalisedSchemas(t *testing.T) {
	tools := map[string]string{
		"nullable":   `{"type":["object","null"],"properties":{"n":{"type":"integer","description":"A <number> & more."}},"required":["n"]}`,
		"null_first": `{"type":["null","object"],"description":"Takes nothing."}`,
		"with_defs": `{"type":"object","$defs":{"point":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}},` +
			`"properties":{"p":{"$ref":"#/$defs/point"}},"required":["p"]}`,
		"plain": `{"type":"object","properties":{"text":{"type":"string"}}}`,
	}
	cfg := &config.Config{Roles: []config.Role{{Name: "shaper", ToolGroups: []string{"shapes"}, Pos: "config.hcl:1,1"}}}
	base, _, logs := serveLogged(t, cfg, rawGroup{id: "shapes", tools: tools})
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: base + "/mcp/shaper"})

	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, tool := range list.Tools {
		got[tool.Name] = jsonValue(t, tool.InputSchema)
	}
	for name, raw := range tools {
		var want map[string]any
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		want["type"] = "object"
		if !reflect.DeepEqual(got[name], any(want)) {
			t.Errorf("%s: listed schema %v, want %v", name, got[name], want)
		}
	}
	if len(got) != len(tools) {
		t.Errorf("listed %d tools, want %d", len(got), len(tools))
	}

	for _, c := range []struct {
		tool    string
		args    any
		want    string // the answer, or the error code it starts with
		invalid bool
	}{
		{"nullable", map[string]int{"n": 1}, `nullable:{"n":1}`, false},
		{"nullable", map[string]string{"n": "x"}, "validation: ", true},
		{"nullable", map[string]any{}, "validation: ", true},
		{"null_first", nil, "null_first:", false},
		{"with_defs", map[string]any{"p": map[string]int{"x": 1}}, `with_defs:{"p":{"x":1}}`, false},
		{"with_defs", map[string]any{"p": map[string]string{"x": "a"}}, "validation: ", true},
		{"plain", map[string]string{"text": "hi"}, `plain:{"text":"hi"}`, false},
	} {
		text, isErr := mcptest.CallText(t, cs, c.tool, c.args)
		if isErr != c.invalid || !strings.HasPrefix(text, c.want) {
			t.Errorf("call %s %v = %q (error %v), want %q", c.tool, c.args, text, isErr, c.want)
		}
	}
	if d := offerDiagnostics(t, base, "shapes"); len(d) != 0 {
		t.Errorf("diagnostics = %+v, want none", d)
	}
	if strings.Contains(logs.String(), "not offered") {
		t.Errorf("log:\n%s", logs)
	}
}

// TestMCPUnofferableTools checks that a tool the go-sdk refuses even
// normalised (an x-mcp-header on an object) or that would break every
// client's tools/list (nested deeper than the SDK decodes) is neither
// offered nor dropped in silence: the role's server logs it, and the host
// lists it among its diagnostics (API, page, `toolhost groups`) until it
// goes away or becomes offerable.
func TestMCPUnofferableTools(t *testing.T) {
	odd := rawGroup{id: "odd", tools: map[string]string{
		"fine":       `{"type":"object","properties":{"text":{"type":"string"}}}`,
		"deep_ok":    deepSchema(996),
		"too_deep":   deepSchema(997),
		"header_obj": `{"type":"object","properties":{"region":{"type":"object","x-mcp-header":"Region"}}}`,
	}}
	cfg := &config.Config{Roles: []config.Role{{Name: "oddity", ToolGroups: []string{"odd"}, Pos: "config.hcl:1,1"}}}
	base, h, logs := serveLogged(t, cfg, odd)
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: base + "/mcp/oddity"})

	waitTools(t, cs, "deep_ok", "fine") // the client reads the list: depth 996 is within its limit
	if text, isErr := mcptest.CallText(t, cs, "deep_ok", map[string]any{}); isErr || text != "deep_ok:{}" {
		t.Errorf("deep_ok = %q (error %v)", text, isErr)
	}

	reasons := map[string]string{"header_obj": "x-mcp-header can only be applied to primitive types", "too_deep": "nests 997 levels deep"}
	diags := offerDiagnostics(t, base, "odd")
	if len(diags) != len(reasons) {
		t.Fatalf("diagnostics = %+v, want one for each of %v", diags, reasons)
	}
	for _, d := range diags {
		tool := strings.Fields(strings.TrimPrefix(d.Message, "tool "))[0]
		if d.Level != "error" || d.Plugin != "odd" || reasons[tool] == "" || !strings.Contains(d.Message, reasons[tool]) {
			t.Errorf("diagnostic %+v", d)
		}
	}
	if !reflect.DeepEqual(onlyOffers(h.Modules().Diagnostics(), "odd"), diags) { // what `toolhost groups` prints
		t.Errorf("host diagnostics = %+v, want %+v", h.Modules().Diagnostics(), diags)
	}
	for tool, reason := range reasons {
		if !hasLine(logs.String(), "[WARN]", "mcp: tool not offered", "role=oddity", "tool="+tool, reason) {
			t.Errorf("no warning for %s in the log:\n%s", tool, logs)
		}
	}

	b := newBrowser(t, base)
	b.open("#/groups", "groups")
	if txt := b.text("#diagnostics"); !strings.Contains(txt, "tool header_obj of group odd") || !strings.Contains(txt, "tool too_deep of group odd") {
		t.Errorf("page diagnostics = %q", txt)
	}

	// Gone: no diagnostic is left.
	if err := h.Modules().Unload("odd"); err != nil {
		t.Fatal(err)
	}
	waitTools(t, cs)
	if d := offerDiagnostics(t, base, "odd"); len(d) != 0 {
		t.Errorf("diagnostics after unload = %+v", d)
	}

	// Back with schemas the SDK takes: every tool is offered, no diagnostic.
	odd.tools["too_deep"] = deepSchema(20)
	odd.tools["header_obj"] = `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`
	if err := h.Modules().Register(context.Background(), odd); err != nil {
		t.Fatal(err)
	}
	waitTools(t, cs, "deep_ok", "fine", "header_obj", "too_deep")
	if d := offerDiagnostics(t, base, "odd"); len(d) != 0 {
		t.Errorf("diagnostics once offerable = %+v", d)
	}
}

// hasLine reports whether a line of the log holds every part.
func hasLine(log string, parts ...string) bool {
	for line := range strings.Lines(log) {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}
