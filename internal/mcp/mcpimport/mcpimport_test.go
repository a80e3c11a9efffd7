package mcpimport

import (
	"bytes"
	"context"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/redact"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

var update = flag.Bool("update", false, "rewrite testdata/*.hcl")

// sample is a Claude Desktop config with every kind of server the
// importer handles; sampleSecrets are the secrets it holds, none of which
// may appear in the output.
const sample = "testdata/claude_desktop_config.json"

var sampleSecrets = []string{
	"k-9Qx2Lr7Tz4Wv8Np3",                              // fs env API_KEY: a secret by its name only
	"8f14e45fceea167a5a36dedd4bea2543",                // remote's bearer token
	"ak_live_51Hx9vQ2",                                // legacy-events X-Api-Key
	"Tr0ub4dor3",                                      // the password in a database URL argument
	"sk-proj-Zq3fT9uVb2WcXe7YhRj5KmNp",                // --api-key's argument
	"ghp_abcdefghijklmnopqrstuvwxyz0123456789",        // in --token=…
	"xoxb-123456789012-123456789012-abcdefghijklmnop", // a secret by its shape, under a harmless name
	"s3cr3t-Pw-2024",                                  // the password in DATABASE_URL
}

func importFile(t *testing.T, path string) []byte {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := importMCP(context.Background(), src, filepath.Base(path), testMachine())
	if err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	return out
}

// TestMCPImportGolden compares the blocks for testdata/*.json
// with the .hcl beside each (go test -run MCPImportGolden -update
// rewrites them).
func TestMCPImportGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) < 2 {
		t.Fatalf("testdata holds %d samples", len(files))
	}
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			got := importFile(t, in)
			golden := strings.TrimSuffix(in, ".json") + ".hcl"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (run with -update to accept):\n%s", golden, got)
			}
		})
	}
}

// TestMCPImportKeepsSecretsOut checks that no secret of the sample is in
// the output, and that nothing the output holds as a literal would be
// redacted.
func TestMCPImportKeepsSecretsOut(t *testing.T) {
	out := importFile(t, sample)
	src, _ := os.ReadFile(sample)
	for _, secret := range sampleSecrets {
		if !bytes.Contains(src, []byte(secret)) {
			t.Fatalf("%s does not hold %q: the test is out of date", sample, secret)
		}
		if bytes.Contains(out, []byte(secret)) {
			t.Errorf("the output holds the secret %q:\n%s", secret, out)
		}
	}
	// With env() empty, what is left is the literal text.
	for label, attrs := range evalBlocks(t, out, func(string) string { return "" }) {
		for name, v := range attrs {
			for _, s := range stringsIn(v) {
				if r, changed := redact.String(s); changed {
					t.Errorf("mcp_server %q %s holds a secret: %q", label, name, r)
				}
			}
		}
	}
}

// TestMCPImportParses parses the output of each sample as HCL and checks
// that every value evaluates back to the one in the client's file, with
// env("NAME") in place of secrets and ${env:NAME} references.
func TestMCPImportParses(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			out := importFile(t, in)
			blocks := evalBlocks(t, out, func(name string) string { return "<" + name + ">" })
			src, _ := os.ReadFile(in)
			_, entries, err := parseClientConfig(src)
			if err != nil {
				t.Fatal(err)
			}
			var servers []*mcpServer
			for name, raw := range entries {
				s, errs := parseEntry(name, raw)
				if errs != nil {
					t.Fatal(errs)
				}
				servers = append(servers, s)
			}
			slices.SortFunc(servers, func(a, b *mcpServer) int { return strings.Compare(a.name, b.name) })
			assignLabels(servers, testMachine().config)
			if len(blocks) != len(servers) {
				t.Fatalf("%d blocks for %d servers", len(blocks), len(servers))
			}
			for _, s := range servers {
				attrs, ok := blocks[s.label]
				if !ok {
					t.Fatalf("no block %q for %q", s.label, s.name)
				}
				e := s.entry
				check := func(what, want string, got cty.Value) {
					t.Helper()
					if got.IsNull() || got.Type() != cty.String {
						t.Errorf("%s %s = %#v", s.label, what, got)
						return
					}
					// A reference reads <NAME>; a secret is all reference
					// (or a flag's, after --flag=).
					g := got.AsString()
					if g != want && g != placeholderRE.ReplaceAllStringFunc(want, func(p string) string {
						if name := envRef(p[2 : len(p)-1]); name != "" {
							return "<" + name + ">"
						}
						return p
					}) && !secretRefRE.MatchString(g) {
						t.Errorf("%s %s = %q, want %q", s.label, what, g, want)
					}
				}
				if e.URL != "" {
					check("url", e.URL, attrs["url"])
					for k, v := range e.Headers {
						check("headers."+k, v, attrs["headers"].GetAttr(k))
					}
					continue
				}
				check("command", e.Command, attrs["command"])
				for i, a := range e.Args {
					check("args", a, attrs["args"].Index(cty.NumberIntVal(int64(i))))
				}
				for k, v := range e.Env {
					check("env."+k, v, attrs["env"].GetAttr(k))
				}
			}
		})
	}
}

var secretRefRE = regexp.MustCompile(`^(--?[A-Za-z][\w.-]*=)?<[A-Z0-9_]+>$`)

// evalBlocks parses out as HCL, with no error allowed, and evaluates each
// mcp_server block's attributes with env() given.
func evalBlocks(t *testing.T, out []byte, env func(string) string) map[string]map[string]cty.Value {
	t.Helper()
	f, diags := hclsyntax.ParseConfig(out, "out.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("the output is not HCL: %v\n%s", diags, out)
	}
	ctx := &hcl.EvalContext{Functions: map[string]function.Function{"env": function.New(&function.Spec{
		Params: []function.Parameter{{Name: "name", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.StringVal(env(args[0].AsString())), nil
		},
	})}}
	blocks := map[string]map[string]cty.Value{}
	for _, blk := range f.Body.(*hclsyntax.Body).Blocks {
		if blk.Type != "mcp_server" || len(blk.Labels) != 1 {
			t.Fatalf("unexpected block %s %v", blk.Type, blk.Labels)
		}
		attrs := map[string]cty.Value{}
		for name, a := range blk.Body.Attributes {
			v, diags := a.Expr.Value(ctx)
			if diags.HasErrors() {
				t.Fatalf("mcp_server %q %s: %v", blk.Labels[0], name, diags)
			}
			attrs[name] = v
		}
		blocks[blk.Labels[0]] = attrs
	}
	return blocks
}

// stringsIn lists the strings in v, a string or a collection of them.
func stringsIn(v cty.Value) []string {
	if v.Type() == cty.String {
		return []string{v.AsString()}
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		out = append(out, e.AsString())
	}
	return out
}

// TestMCPImportLoads loads the sample's blocks with the config package, as
// toolhost will, with every variable they name set.
func TestMCPImportLoads(t *testing.T) {
	out := importFile(t, sample)
	getenv := func(name string) string {
		switch {
		case strings.HasPrefix(name, "TOOLHOST_"):
			return ""
		case strings.HasSuffix(name, "_URL"):
			return "postgres://u:p@db.example.com/x"
		}
		return "value-of-" + name
	}
	cfg, err := config.Parse(out, filepath.Join(t.TempDir(), "config.hcl"), &config.Options{Getenv: getenv})
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, out)
	}
	got := map[string]config.Plugin{}
	for _, p := range cfg.Plugins {
		got[p.Name] = p
	}
	if len(got) != 11 {
		t.Fatalf("%d modules, want 11: %v", len(got), slices.Sorted(maps.Keys(got)))
	}
	if p := got["fs"]; p.Kind != config.KindMCP || p.Env["API_KEY"] != "value-of-FS_API_KEY" || p.Env["LOG_LEVEL"] != "debug" {
		t.Errorf("fs = %+v", p)
	}
	if p := got["remote"]; p.URL != "https://mcp.example.com/mcp" || p.Headers["Authorization"] != "value-of-REMOTE_AUTHORIZATION" {
		t.Errorf("remote = %+v", p)
	}
	if p := got["search_engine"]; p.Headers["Authorization"] != "Bearer value-of-SEARCH_TOKEN" {
		t.Errorf("search_engine = %+v", p)
	}
	// Each stdio server runs in the sandbox written for it; an HTTP one in none.
	for name, p := range got {
		if (p.URL == "") != (p.Sandbox != nil) || p.Sandbox != nil && p.Sandbox.Limits != (sandbox.Limits{}) {
			t.Errorf("%s: sandbox %+v", name, p.Sandbox)
		}
	}
	if p := got["filesystem"].Sandbox; p == nil || !slices.Equal(p.ReadWrite, []string{"/srv/ws"}) || p.Network != sandbox.NetworkAllowed {
		t.Errorf("filesystem's sandbox = %+v", p)
	}
	if p := got["mcp_2nd_brain"].Sandbox; p == nil || !slices.Equal(p.ReadOnly, []string{"/opt/brain"}) || p.Network != "" {
		t.Errorf("mcp_2nd_brain's sandbox = %+v", p)
	}
}

// TestMCPImportLabels maps server names to mcp_server labels.
func TestMCPImportLabels(t *testing.T) {
	long := strings.Repeat("a", 70)
	for _, tc := range []struct {
		names []string
		want  []string // the labels, in the names' order
	}{
		{[]string{"fs"}, []string{"fs"}},
		{[]string{"My Server"}, []string{"my_server"}},
		{[]string{"GitHub.com/API"}, []string{"github_com_api"}},
		{[]string{"café-mcp"}, []string{"caf_-mcp"}},
		{[]string{"2fa"}, []string{"mcp_2fa"}},
		{[]string{"_x"}, []string{"mcp__x"}},
		{[]string{""}, []string{"mcp_"}},
		{[]string{"workspace", "Console", "tool_search"}, []string{"mcp_workspace", "mcp_console", "mcp_tool_search"}},
		{[]string{long}, []string{long[:64]}},
		{[]string{"9" + long}, []string{"mcp_9" + long[:59]}},
		// A name that is already a label keeps it; the others take _2, _3 in name order.
		{[]string{"a_b", "A B", "a.b", "A_B"}, []string{"a_b", "a_b_2", "a_b_4", "a_b_3"}},
		{[]string{"x_2", "X", "x"}, []string{"x_2", "x_3", "x"}},
		{[]string{long, strings.ToUpper(long)}, []string{long[:62] + "_2", long[:64]}}, // "AAA…" sorts first
	} {
		servers := make([]*mcpServer, len(tc.names))
		for i, n := range tc.names {
			servers[i] = &mcpServer{name: n}
		}
		sorted := slices.Clone(servers)
		slices.SortFunc(sorted, func(a, b *mcpServer) int { return strings.Compare(a.name, b.name) })
		assignLabels(sorted, &config.Config{})
		for i, s := range servers {
			if s.label != tc.want[i] {
				t.Errorf("%q among %q: label %q, want %q", s.name, tc.names, s.label, tc.want[i])
			}
			if !groupIDRE.MatchString(s.label) {
				t.Errorf("%q: label %q is not a group id", s.name, s.label)
			}
			if from := slices.ContainsFunc(s.comments, func(c string) bool { return strings.HasPrefix(c, "# from ") }); from != (s.label != s.name) {
				t.Errorf("%q → %q: # from comment = %v", s.name, s.label, from)
			}
		}
	}
}

// TestMCPImportLabelsBesideConfig: a server named as a block of the config
// the blocks go in takes another label, saying why.
func TestMCPImportLabelsBesideConfig(t *testing.T) {
	servers := []*mcpServer{{name: "Notes"}, {name: "chrome"}}
	assignLabels(servers, &config.Config{Plugins: []config.Plugin{{Name: "chrome"}, {Name: "notes"}}})
	for i, want := range []string{"chrome_2", "notes_2"} {
		if s := servers[i]; s.label != want || !slices.Contains(s.comments, "# from "+strconv.Quote(s.name)+": the config has a block of that name") {
			t.Errorf("%q: label %q, comments %q; want %q", s.name, s.label, s.comments, want)
		}
	}
}

var groupIDRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// TestMCPImportValues converts values that are hard to quote, or to tell
// from a secret, one at a time.
func TestMCPImportValues(t *testing.T) {
	for _, tc := range []struct {
		name, server string // server: a JSON object
		want         string // a line of the output
		export       string // a variable to export, if any
	}{
		{"quotes and backslashes", `{"command": "x", "args": ["say \"hi\"\\n"]}`, `args    = ["say \"hi\"\\n"]`, ""},
		{"newline and tab", `{"command": "x", "args": ["a\nb\tc"]}`, `args    = ["a\nb\tc"]`, ""},
		{"control character", `{"command": "x", "args": ["\u0007"]}`, `args    = ["\u0007"]`, ""},
		{"a template introducer stays text", `{"command": "x", "args": ["%{if}", "${userHome}"]}`, `args    = ["%%{if}", "$${userHome}"]`, ""},
		{"placeholder", `{"command": "x", "env": {"A": "${env:FOO}", "B": "${BAR}"}}`, `env     = { A = env("FOO"), B = env("BAR") }`, ""},
		{"placeholder in text", `{"command": "x", "args": ["--dir=${HOME}/.cache"]}`, `args    = ["--dir=${env("HOME")}/.cache"]`, ""},
		{"$ before a placeholder", `{"command": "x", "args": ["$${FOO}"]}`, `args    = ["${"$"}${env("FOO")}"]`, ""},
		{"keys that need quotes", `{"url": "https://x.example.com", "headers": {"for": "1", "X.Trace": "2", "9x": "3"}}`, `headers = { "9x" = "3", "X.Trace" = "2", "for" = "1" }`, ""},
		{"secret by name", `{"command": "x", "env": {"MY_PASS": "hunter2"}}`, `env     = { MY_PASS = env("S_MY_PASS") }`, "S_MY_PASS"},
		{"empty secret", `{"command": "x", "env": {"TOKEN": ""}}`, `env     = { TOKEN = "" }`, ""},
		{"secret by shape", `{"command": "x", "env": {"AWS_ID": "AKIAIOSFODNN7EXAMPLE"}}`, `env     = { AWS_ID = env("S_AWS_ID") }`, "S_AWS_ID"},
		{"cookie", `{"url": "https://x.example.com", "headers": {"Cookie": "sid=1"}}`, `headers = { Cookie = env("S_COOKIE") }`, "S_COOKIE"},
		{"bearer reference", `{"url": "https://x.example.com", "headers": {"Authorization": "Bearer ${env:T}"}}`, `headers = { Authorization = "Bearer ${env("T")}" }`, ""},
		{"secret around a reference", `{"url": "https://x.example.com", "headers": {"Authorization": "Basic dXNlcjpw${env:T}"}}`, `headers = { Authorization = env("S_AUTHORIZATION") }`, "S_AUTHORIZATION"},
		{"url with a password", `{"url": "https://u:Pa55w0rd@x.example.com/mcp"}`, `url = env("S_URL")`, "S_URL"},
		{"flag then secret", `{"command": "x", "args": ["--password", "hunter2"]}`, `args    = ["--password", env("S_PASSWORD")]`, "S_PASSWORD"},
		{"flag then reference", `{"command": "x", "args": ["--api-key", "${env:K}"]}`, `args    = ["--api-key", env("K")]`, ""},
		{"name taken by a reference", `{"command": "x", "env": {"KEY": "v1", "OTHER": "${env:S_KEY}"}}`, `env     = { KEY = env("S_KEY_2"), OTHER = env("S_KEY") }`, "S_KEY_2"},
		{"a secret in braces", `{"command": "x", "args": ["${ghp_abcdefghijklmnopqrstuvwxyz0123456789}"]}`, `args    = [env("S_ARG1")]`, "S_ARG1"},
		{"numbers and booleans", `{"command": "x", "args": [1, true], "env": {"N": 2.5}}`, `args    = ["1", "true"]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := importMCP(context.Background(), []byte(`{"mcpServers": {"s": `+tc.server+`}}`), "f.json", testMachine())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(strings.Split(string(out), "\n"), "  "+tc.want) {
				t.Errorf("no line %q in\n%s", tc.want, out)
			}
			if bytes.Contains(out, []byte("ghp_")) || bytes.Contains(out, []byte("hunter2")) {
				t.Errorf("a secret is in the output:\n%s", out)
			}
			if tc.export != "" && !bytes.Contains(out, []byte("\n# export "+tc.export+"=<")) {
				t.Errorf("%s is not among the variables to export:\n%s", tc.export, out)
			}
			evalBlocks(t, out, func(string) string { return "" })
		})
	}
}

// TestMCPImportErrors reports what is wrong, naming the file and the
// entry, and prints nothing.
func TestMCPImportErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"not JSON", "{\n  \"mcpServers\": x\n}", `f.json: 2,17: not JSON: invalid character 'x'`},
		{"cut short", "{\"mcpServers\": {", `f.json: 1,16: not JSON: unexpected end of JSON input`},
		{"empty", "", `f.json: 1,1: not JSON`},
		{"not an object", `["fs"]`, `f.json: holds a JSON array, not an object`},
		{"null", `null`, `f.json: not a JSON object`},
		{"no servers", `{"servers2": {}}`, `f.json: no "mcpServers" object (Claude Desktop, Cursor) or "servers" object (VS Code)`},
		{"servers not an object", `{"mcpServers": []}`, `f.json: "mcpServers" is not a JSON object`},
		{"both objects", `{"mcpServers": {}, "servers": {}}`, `f.json: has both "mcpServers" and "servers"`},
		{"entry not an object", `{"mcpServers": {"fs": "npx"}}`, `f.json: mcpServers."fs": not a JSON object`},
		{"neither", `{"servers": {"My Server": {"args": ["x"]}}}`, `f.json: servers."My Server": has neither command (a stdio server) nor url (an HTTP server)`},
		{"both", `{"mcpServers": {"fs": {"command": "npx", "url": "https://x.example.com"}}}`, `f.json: mcpServers."fs": has both command (a stdio server) and url (an HTTP server); keep one`},
		{"unknown type", `{"mcpServers": {"fs": {"type": "websocket", "url": "wss://x.example.com"}}}`, `mcpServers."fs": type "websocket" is not stdio, http, streamable-http or sse`},
		{"http type with command", `{"mcpServers": {"fs": {"type": "http", "command": "npx"}}}`, `mcpServers."fs": type "http" needs url, not command`},
		{"stdio type with url", `{"mcpServers": {"fs": {"type": "stdio", "url": "https://x.example.com"}}}`, `mcpServers."fs": type "stdio" needs command, not url`},
		{"empty command", `{"mcpServers": {"fs": {"command": " "}}}`, `mcpServers."fs": command is empty`},
		{"relative url", `{"mcpServers": {"fs": {"url": "/mcp"}}}`, `mcpServers."fs": url is not an absolute http or https URL`},
		{"args not a list", `{"mcpServers": {"fs": {"command": "npx", "args": "-y x"}}}`, `mcpServers."fs": args: want a list of strings, not a string`},
		{"null env value", `{"mcpServers": {"fs": {"command": "npx", "env": {"A": null}}}}`, `mcpServers."fs": env."A": want a string, not null`},
		{"bad env name", `{"mcpServers": {"fs": {"command": "npx", "env": {"my-var": "1"}}}}`, `mcpServers."fs": env: "my-var" is not an environment variable name`},
		{"headers not an object", `{"mcpServers": {"fs": {"url": "https://x.example.com", "headers": ["a"]}}}`, `mcpServers."fs": headers: want an object of strings, not a list`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := importMCP(context.Background(), []byte(tc.src), "f.json", testMachine())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
			if out != nil {
				t.Errorf("output %q", out)
			}
		})
	}
	// Every bad entry is reported, not only the first.
	_, _, err := importMCP(context.Background(), []byte(`{"mcpServers": {"a": {}, "b": {"command": "x"}, "c": {"url": null}}}`), "f.json", testMachine())
	if got := strings.Split(err.Error(), "\n"); len(got) != 2 || !strings.Contains(got[0], `"a"`) || !strings.Contains(got[1], `"c": url: want a string, not null`) {
		t.Errorf("errors = %q", got)
	}
}

// TestMCPImportLeavesOutOwnVars: a reference to one of toolhost's own
// variables, or an env entry named as one, is never passed to a server:
// it is left out, with a warning naming it.
func TestMCPImportLeavesOutOwnVars(t *testing.T) {
	const file = "claude.json"
	src := `{"mcpServers": {
  "env": {"command": "x", "env": {"API_TOKEN": "${TOOLHOST_TOKEN}", "TOOLHOST_LOG_LEVEL": "debug", "HOME_DIR": "$TOOLHOST_DATA_DIR/h", "KEEP": "1"}},
  "args": {"command": "x", "args": ["--token", "$TOOLHOST_TOKEN", "--dir=${env:TOOLHOST_WORKSPACE}/w", "plain"]},
  "headers": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${env:TOOLHOST_TOKEN}", "Accept-Language": "en"}},
  "itself": {"url": "${TOOLHOST_URL}/mcp/root"},
  "shell": {"command": "x", "args": ["${TOOLHOST_TOKEN:-x}", "${TOOLHOST_TOKEN-y}", "--dir=${TOOLHOST_DATA_DIR:=/d}/w", "$(printenv TOOLHOST_TOKEN)", "${#TOOLHOST_LISTEN}", "${HOME:-$TOOLHOST_WORKSPACE}", "a${X:-${TOOLHOST_PLUGIN_DIR}}"],
    "env": {"B": "${TOOLHOST_TOKEN:?unset}", "C": "` + "`" + `cat $TOOLHOST_DATA_DIR/t` + "`" + `"}},
  "secret": {"command": "x", "args": ["--api-key", "ak${TOOLHOST_TOKEN:-x}", "sk-proj-Zq3fT9uVb2WcXe7YhRj5KmNp${TOOLHOST_TOKEN}"]}
}}`
	out, warnings, err := Import(context.Background(), []byte(src), file, Options{ConfigFile: filepath.Join(t.TempDir(), "config.hcl")})
	if err != nil {
		t.Fatal(err)
	}
	blocks := evalBlocks(t, out, func(name string) string { return "<" + name + ">" })
	for label, attrs := range blocks {
		for name, v := range attrs {
			for _, s := range stringsIn(v) {
				if strings.Contains(s, "TOOLHOST") {
					t.Errorf("mcp_server %q %s = %q", label, name, s)
				}
			}
		}
	}
	if _, ok := blocks["itself"]; ok {
		t.Errorf("the server whose url is toolhost's own is imported:\n%s", out)
	}
	if env := blocks["env"]["env"]; env.LengthInt() != 1 || env.GetAttr("KEEP").AsString() != "1" {
		t.Errorf("env = %#v", env)
	}
	if got := stringsIn(blocks["args"]["args"]); !slices.Equal(got, []string{"--token", "", "--dir=/w", "plain"}) {
		t.Errorf("args = %q", got)
	}
	if got := stringsIn(blocks["shell"]["args"]); !slices.Equal(got, []string{"", "", "--dir=/w", "", "", "", "a"}) {
		t.Errorf("shell args = %q", got)
	}
	if _, ok := blocks["shell"]["env"]; ok {
		t.Errorf("shell env = %#v", blocks["shell"]["env"])
	}
	// The file still holds a secret argument's reference: an export
	// copied from it would expand to toolhost's own.
	if got := stringsIn(blocks["secret"]["args"]); !slices.Equal(got, []string{"--api-key", "", ""}) {
		t.Errorf("secret args = %q", got)
	}
	if strings.Contains(string(out), "# export ") {
		t.Errorf("an export for a value that refers to toolhost's variables:\n%s", out)
	}
	if h := blocks["headers"]["headers"]; h.LengthInt() != 1 || h.GetAttr("Accept-Language").AsString() != "en" {
		t.Errorf("headers = %#v", h)
	}
	for _, want := range []string{
		`"env" env API_TOKEN refers to TOOLHOST_TOKEN, toolhost's own: left out`,
		`"env" env TOOLHOST_LOG_LEVEL refers to TOOLHOST_LOG_LEVEL`,
		`"env" env HOME_DIR refers to TOOLHOST_DATA_DIR`,
		`"args" args[1] refers to TOOLHOST_TOKEN`,
		`"args" args[2] refers to TOOLHOST_WORKSPACE`,
		`"headers" header Authorization refers to TOOLHOST_TOKEN`,
		`"itself" url refers to TOOLHOST_URL, toolhost's own: the server is left out`,
		`"shell" args[0] refers to TOOLHOST_TOKEN`,
		`"shell" args[1] refers to TOOLHOST_TOKEN`,
		`"shell" args[2] refers to TOOLHOST_DATA_DIR`,
		`"shell" args[3] refers to TOOLHOST_TOKEN`,
		`"shell" args[4] refers to TOOLHOST_LISTEN`,
		`"shell" args[5] refers to TOOLHOST_WORKSPACE`,
		`"shell" args[6] refers to TOOLHOST_PLUGIN_DIR`,
		`"shell" env B refers to TOOLHOST_TOKEN`,
		`"shell" env C refers to TOOLHOST_DATA_DIR`,
		`"secret" args[1] refers to TOOLHOST_TOKEN`,
		`"secret" args[2] refers to TOOLHOST_TOKEN`,
	} {
		if !slices.ContainsFunc(warnings, func(w string) bool { return strings.HasPrefix(w, file+": "+want) }) {
			t.Errorf("no warning %q in\n%s", want, strings.Join(warnings, "\n"))
		}
	}
}

// TestMCPImportNamesNotHosts: a variable made for a secret is never one
// toolhost reads, whatever the server's label: following the export would
// set toolhost's own (TOOLHOST_TOKEN, TOOLHOST_DATA_DIR), and the host
// would pass its value to the server.
func TestMCPImportNamesNotHosts(t *testing.T) {
	secrets := `{"command": "/bin/echo", "args": ["--token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
    "env": {"TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "DATA_DIR": "sk-proj-Zq3fT9uVb2WcXe7YhRj5KmNp", "LISTEN": "xoxb-123456789012-123456789012-abcdefghijklmnop"}}`
	src := `{"mcpServers": {"toolhost": ` + secrets + `, "TOOLHOST": ` + secrets + `, "tool-host": ` + secrets + `,
  "https": {"command": "/bin/echo", "env": {"PROXY": "sk-proj-Zq3fT9uVb2WcXe7YhRj5KmNp"}},
  "openai": {"command": "/bin/echo", "env": {"API_KEY": "sk-proj-Zq3fT9uVb2WcXe7YhRj5KmNp"}},
  "otel": {"command": "/bin/echo", "env": {"SERVICE_NAME": "sk-proj-Zq3fT9uVb2WcXe7YhRj5KmNp"}}}}`
	out, _, err := Import(context.Background(), []byte(src), "claude.json", Options{ConfigFile: filepath.Join(t.TempDir(), "config.hcl")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`env\("([^"]*)"\)|# export ([A-Z0-9_]+)=`).FindAllStringSubmatch(string(out), -1) {
		names = append(names, m[1]+m[2])
	}
	if len(names) != 2*(3*4+3) {
		t.Errorf("%d references and exports, want %d:\n%s", len(names), 2*(3*4+3), out)
	}
	for _, name := range names {
		if strings.HasPrefix(name, "TOOLHOST_") || strings.HasPrefix(name, "OTEL_") || slices.Contains([]string{"HTTPS_PROXY", "OPENAI_API_KEY"}, name) {
			t.Errorf("a secret's variable is toolhost's %s:\n%s", name, out)
		}
	}
	for _, want := range []string{`env("MCP_TOOLHOST_TOKEN")`, `env("MCP_TOOLHOST_DATA_DIR")`, `env("MCP_TOOLHOST_2_TOKEN")`,
		`env("TOOL_HOST_TOKEN")`, `env("MCP_HTTPS_PROXY")`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
}

// TestMCPImportOwnRefs finds the references to toolhost's variables a
// client or a shell would expand, each cut whole, and only those.
func TestMCPImportOwnRefs(t *testing.T) {
	for _, tc := range []struct{ in, names, cut string }{
		{"${MY_TOOLHOST_DIR}/x $HOST_TOOLHOST_X TOOLHOST_TOKEN", "", "${MY_TOOLHOST_DIR}/x $HOST_TOOLHOST_X TOOLHOST_TOKEN"},
		{"a${TOOLHOST_TOKEN:-${HOME}}b", "TOOLHOST_TOKEN", "ab"},
		{"${A:-x}${B:+$TOOLHOST_LISTEN}/$TOOLHOST_DATA_DIR.d", "TOOLHOST_LISTEN,TOOLHOST_DATA_DIR", "${A:-x}/.d"},
		{"$(cat $(echo TOOLHOST_TOKEN)) `x`", "TOOLHOST_TOKEN", " `x`"},
		{"--t=${TOOLHOST_TOKEN", "TOOLHOST_TOKEN", "--t="},
	} {
		if got := strings.Join(ownVars(tc.in), ","); got != tc.names {
			t.Errorf("ownVars(%q) = %q, want %q", tc.in, got, tc.names)
		}
		if got := cutOwnVars(tc.in); got != tc.cut {
			t.Errorf("cutOwnVars(%q) = %q, want %q", tc.in, got, tc.cut)
		}
	}
}
