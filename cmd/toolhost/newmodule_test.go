package main

import (
	"bytes"
	"encoding/json"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scriptGoEnv is what a script needs to run go like this test does (the
// caches, the proxy and flags; testscript sets HOME to /no-home), plus the
// root of this checkout in $TOOLHOST_SRC.
func scriptGoEnv(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH",
		"GOPROXY", "GOSUMDB", "GONOSUMDB", "GOPRIVATE", "GOFLAGS", "GOTOOLCHAIN").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	env := map[string]string{}
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatalf("go env: %v", err)
	}
	for k, v := range env {
		if v == "" {
			delete(env, k)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	env["TOOLHOST_SRC"] = root
	return env
}

func TestNewModuleFiles(t *testing.T) {
	root, _ := filepath.Abs("../..")
	dir := filepath.Join(t.TempDir(), "my-tool")
	g, err := newModule("my-tool", dir, root)
	if err != nil {
		t.Fatal(err)
	}
	if g.Dir != dir || g.Toolhost != root || g.GoVersion == "" {
		t.Fatalf("generated = %+v", g)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mod := read("go.mod")
	for _, want := range []string{
		"module example.com/my-tool\n",
		"go " + g.GoVersion + "\n",
		"require github.com/toolhost/toolhost v0.0.0-00010101000000-000000000000\n",
		"\tgithub.com/hashicorp/go-plugin v", // what sdk imports, listed so that go test needs no go mod tidy
		"replace github.com/toolhost/toolhost => " + root + "\n",
	} {
		if !strings.Contains(mod, want) {
			t.Errorf("go.mod lacks %q:\n%s", want, mod)
		}
	}
	if want, err := os.ReadFile(filepath.Join(root, "go.sum")); err != nil || read("go.sum") != string(want) {
		t.Error("go.sum is not a copy of the checkout's")
	}
	for _, f := range []string{"main.go", "main_test.go"} {
		src := read(f)
		if formatted, err := format.Source([]byte(src)); err != nil || !bytes.Equal(formatted, []byte(src)) {
			t.Errorf("%s is not gofmt'd Go (%v):\n%s", f, err, src)
		}
		if !strings.Contains(src, `"my-tool"`) {
			t.Errorf("%s does not name the group my-tool", f)
		}
	}
	if main := read("main.go"); !strings.Contains(main, `sdk.NewTool("hello"`) || !strings.Contains(main, "sdk.Serve(newGroup(), nil)") {
		t.Errorf("main.go:\n%s", main)
	}
	if test := read("main_test.go"); !strings.Contains(test, "sdktest.New(") || !strings.Contains(test, "sdktest.Exec(t, sdktest.Build(t, \".\")") {
		t.Errorf("main_test.go:\n%s", test)
	}
}

func TestNewModuleRefuses(t *testing.T) {
	root, _ := filepath.Abs("../..")
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	notModule := t.TempDir()
	if err := os.WriteFile(filepath.Join(notModule, "go.mod"), []byte("module example.com/other\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, nameArg, dir, src, want string
	}{
		{"uppercase", "Greeter", "", root, "not a valid group id"},
		{"leading digit", "1tool", "", root, "not a valid group id"},
		{"dot", "a.b", "", root, "not a valid group id"},
		{"slash", "a/b", "", root, "not a valid group id"},
		{"too long", "a" + strings.Repeat("b", 64), "", root, "not a valid group id"},
		{"reserved", "workspace", "", root, "reserved group id"},
		{"non-empty dir", "greeter", full, root, "exists and is not empty"},
		{"no go.mod", "greeter", filepath.Join(t.TempDir(), "g"), t.TempDir(), "-toolhost"},
		{"another module", "greeter", filepath.Join(t.TempDir(), "g"), notModule, "is not the go.mod of module github.com/toolhost/toolhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newModule(tc.nameArg, tc.dir, tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("newModule(%q) = %v, want an error containing %q", tc.nameArg, err, tc.want)
			}
		})
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Errorf("the non-empty directory was changed: %v", entries)
	}
}

// TestWalkUpToolhost finds the checkout from a directory inside it, as
// newModule does from bin/toolhost when -toolhost is not given.
func TestWalkUpToolhost(t *testing.T) {
	root, _ := filepath.Abs("../..")
	for _, start := range []string{root, filepath.Join(root, "cmd", "toolhost", "testdata")} {
		got, v, ok := walkUpToolhost(start)
		if !ok || got != root || v == "" {
			t.Errorf("walkUpToolhost(%s) = %q, %q, %v; want %s", start, got, v, ok, root)
		}
	}
	if got, _, ok := walkUpToolhost(t.TempDir()); ok {
		t.Errorf("walkUpToolhost(temp) found %s", got)
	}
}

// TestNewModuleGrows: the generated module's test keeps passing when its
// author adds a tool as the scaffold invites, and when the spec is wrong it
// prints it as JSON, its schemas as text rather than bytes. It runs the
// module's own go test against this checkout, offline.
func TestNewModuleGrows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a generated module")
	}
	root, _ := filepath.Abs("../..")
	dir := filepath.Join(t.TempDir(), "grower")
	if _, err := newModule("grower", dir, root); err != nil {
		t.Fatal(err)
	}
	edit := func(name, old, new string) {
		t.Helper()
		path := filepath.Join(dir, name)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(src, []byte(old)) {
			t.Fatalf("%s has no %q", name, old)
		}
		if err := os.WriteFile(path, bytes.Replace(src, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goTest := func(args ...string) (string, error) {
		cmd := exec.Command("go", append([]string{"test", "-count=1"}, args...)...)
		cmd.Dir = dir
		cmd.Env = os.Environ()
		for k, v := range scriptGoEnv(t) {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Env = append(cmd.Env, "GOPROXY=off", "GOFLAGS=-mod=readonly")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	edit("main.go", `sdk.NewTool("hello", "Greet someone by name.", hello, sdk.Title("Say hello")),`,
		`sdk.NewTool("hello", "Greet someone by name.", hello, sdk.Title("Say hello")),
			sdk.NewTool("shout", "Shout a word.", shout),`)
	edit("main.go", "// main serves the group.", `// ShoutArgs are shout's arguments.
type ShoutArgs struct {
	Word string `+"`"+`json:"word"`+"`"+`
}

func shout(_ context.Context, req *sdk.Request[ShoutArgs]) (*sdk.Result, error) {
	return sdk.Text(strings.ToUpper(req.Args.Word) + "!"), nil
}

// main serves the group.`)
	if out, err := goTest("./..."); err != nil {
		t.Fatalf("go test with a second tool: %v\n%s", err, out)
	}

	// A wrong spec: hello's argument renamed, as the table does not say.
	edit("main.go", "`json:\"name\" jsonschema:\"who to greet\"`", "`json:\"who\" jsonschema:\"who to greet\"`")
	out, err := goTest("-run", "^TestSpec$", ".")
	if err == nil {
		t.Fatalf("go test passed with hello requiring who:\n%s", out)
	}
	for _, want := range []string{`tool hello requires ["who"], want ["name"]; spec:`, `"input_schema": {`, `"required": [`, `"who"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the failure lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "[123 34") {
		t.Errorf("the failure prints a schema as bytes:\n%s", out)
	}
}
