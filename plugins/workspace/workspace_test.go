package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/sandboxtest"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// fixture is a workspace root beside a directory outside it, which holds a
// secret and is reachable from inside the root only through symlinks.
type fixture struct {
	root, outside string
}

const secret = "top secret"

func newFixture(t testing.TB) fixture {
	t.Helper()
	base := t.TempDir()
	f := fixture{root: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{filepath.Join(f.root, "sub", "deep"), f.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(f.root, "a.txt"):                "alpha\n",
		filepath.Join(f.root, "sub", "b.txt"):         "beta\n",
		filepath.Join(f.root, "sub", "deep", "c.txt"): "gamma\n",
		filepath.Join(f.outside, "secret.txt"):        secret + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{ // in the root, leading out of it
		"link.txt": "../outside/secret.txt",
		"linkdir":  "../outside",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(f.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f fixture) plugin(t *testing.T) *sdktest.Plugin {
	t.Helper()
	return sdktest.New(t, newGroup(), &sdktest.Options{Config: map[string]any{"roots": []string{f.root}}})
}

func TestSpec(t *testing.T) {
	p := newFixture(t).plugin(t)
	var names []string
	for _, tool := range p.Spec.Tools {
		names = append(names, tool.Name)
	}
	want := []string{"get_workspace_info", "list_files", "read_file", "write_file", "edit_file", "find_files", "search_files"}
	if p.Spec.ID != "workspace" || !slices.Equal(names, want) {
		t.Fatalf("spec: id %q, tools %v; want workspace, %v", p.Spec.ID, names, want)
	}
}

func TestGetWorkspaceInfo(t *testing.T) {
	f := newFixture(t)
	other := t.TempDir()
	p := sdktest.New(t, newGroup(), &sdktest.Options{Config: map[string]any{
		"roots": []string{f.root + "/", other, f.root + "/sub/.."},
	}})
	res := p.Call("get_workspace_info", map[string]any{})
	var info Info
	if err := json.Unmarshal([]byte(sdktest.OK(t, res)), &info); err != nil {
		t.Fatal(err)
	}
	if want := []string{f.root, other}; !slices.Equal(info.Roots, want) {
		t.Errorf("roots = %v, want %v (cleaned, deduplicated)", info.Roots, want)
	}
	// The same as structured content, for MCP clients.
	if sc, _ := res.Meta[toolhost.MetaStructuredContent].(map[string]any); fmt.Sprint(sc["roots"]) != fmt.Sprint(info.Roots) {
		t.Errorf("structured content %v, want the roots %v", res.Meta[toolhost.MetaStructuredContent], info.Roots)
	}
}

func TestDefaultRootIsWorkingDirectory(t *testing.T) {
	p := sdktest.New(t, newGroup(), nil)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if out := sdktest.OK(t, p.Call("get_workspace_info", map[string]any{})); !strings.Contains(out, wd) {
		t.Errorf("info = %s, want the working directory %s", out, wd)
	}
}

func TestBadConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string][]byte{
		"empty roots":   []byte(`{"roots": []}`),
		"relative root": rootsConfig("relative/dir"),
		"missing root":  rootsConfig("/no/such/dir/anywhere"),
		"file as root":  rootsConfig(file),
		"one bad root":  rootsConfig(t.TempDir(), "relative"),
		"unknown key":   []byte(`{"root": "/tmp"}`),
		"not json":      []byte(`roots`),
	} {
		t.Run(name, func(t *testing.T) {
			err := newGroup().Configure(context.Background(), &sdk.ConfigureRequest{Config: cfg})
			if err == nil || !strings.Contains(err.Error(), "config: ") {
				t.Fatalf("Configure(%s) = %v, want a config error", cfg, err)
			}
			t.Log(err)
		})
	}
}

// rootsConfig is the config JSON naming roots.
func rootsConfig(roots ...string) []byte {
	b, _ := json.Marshal(map[string][]string{"roots": roots})
	return b
}

func TestListFiles(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t)
	for _, tc := range []struct {
		name string
		args ListArgs
		want string
	}{
		{"root", ListArgs{Path: "."}, "a.txt\nlink.txt\nlinkdir\nsub/"},
		{"empty path is the root", ListArgs{}, "a.txt\nlink.txt\nlinkdir\nsub/"},
		{"subdirectory", ListArgs{Path: "sub"}, "b.txt\ndeep/"},
		{"absolute", ListArgs{Path: filepath.Join(f.root, "sub")}, "b.txt\ndeep/"},
		{"recursive", ListArgs{Path: "sub", Recursive: true}, "b.txt\ndeep/\ndeep/c.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := p.Call("list_files", tc.args)
			if got := sdktest.OK(t, res); got != tc.want || res.TruncatedLines {
				t.Errorf("list_files = %q (truncated %v), want %q", got, res.TruncatedLines, tc.want)
			}
		})
	}
	t.Run("limit", func(t *testing.T) {
		res := p.Call("list_files", ListArgs{Path: ".", Recursive: true, Limit: 2})
		if got := sdktest.OK(t, res); got != "a.txt\nlink.txt" || !res.TruncatedLines {
			t.Errorf("list_files = %q (truncated %v), want 2 entries, truncated", got, res.TruncatedLines)
		}
		if total, _ := res.Meta["total"].(float64); total != 7 {
			t.Errorf("meta = %v, want total 7", res.Meta)
		}
	})
	sdktest.Fails(t, p.Call("list_files", ListArgs{Path: "nope"}), sdk.CodeToolExec)
	sdktest.Fails(t, p.Call("list_files", ListArgs{Path: "a.txt"}), sdk.CodeToolExec)
	sdktest.Fails(t, p.Call("list_files", ListArgs{Path: "..", Limit: 1}), sdk.CodePolicy)
	sdktest.Fails(t, p.Call("list_files", ListArgs{Path: "linkdir"}), sdk.CodePolicy)
	sdktest.Fails(t, p.Call("list_files", ListArgs{Path: ".", Limit: -1}), sdk.CodeValidation)
}

func TestReadFile(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.root, "lines.txt"), []byte("1\n2\n3\n4\n5"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := f.plugin(t)
	if got := sdktest.OK(t, p.Call("read_file", ReadArgs{Path: "a.txt"})); got != "alpha\n" {
		t.Errorf("read a.txt = %q", got)
	}
	if got := sdktest.OK(t, p.Call("read_file", ReadArgs{Path: filepath.Join(f.root, "sub/deep/c.txt")})); got != "gamma\n" {
		t.Errorf("read absolute c.txt = %q", got)
	}
	t.Run("paging", func(t *testing.T) {
		// Follow the cursor through the file, two lines a page.
		var pages []string
		cursor := "1"
		for cursor != "" {
			offset := 0
			if err := json.Unmarshal([]byte(cursor), &offset); err != nil {
				t.Fatalf("cursor %q: %v", cursor, err)
			}
			res := p.Call("read_file", ReadArgs{Path: "lines.txt", Offset: offset, Limit: 2})
			out := sdktest.OK(t, res)
			if res.TruncatedLines != (res.NextPageCursor != "") {
				t.Errorf("offset %d: truncated %v but cursor %q", offset, res.TruncatedLines, res.NextPageCursor)
			}
			if res.NextPageCursor != "" && !strings.HasSuffix(out, "\n[continue with offset="+res.NextPageCursor+"]") {
				t.Errorf("offset %d: %q does not end with the continuation line", offset, out)
			}
			pages = append(pages, out)
			cursor = res.NextPageCursor
		}
		want := []string{"1\n2\n[continue with offset=3]", "3\n4\n[continue with offset=5]", "5"}
		if !slices.Equal(pages, want) {
			t.Errorf("pages = %q, want %q", pages, want)
		}
	})
	t.Run("page ends at the last line", func(t *testing.T) {
		res := p.Call("read_file", ReadArgs{Path: "lines.txt", Offset: 4, Limit: 2})
		if got := sdktest.OK(t, res); got != "4\n5" || res.TruncatedLines || res.NextPageCursor != "" {
			t.Errorf("read = %q, truncated %v, cursor %q", got, res.TruncatedLines, res.NextPageCursor)
		}
	})
	sdktest.Fails(t, p.Call("read_file", ReadArgs{Path: "lines.txt", Offset: 9}), sdk.CodeValidation)
	sdktest.Fails(t, p.Call("read_file", ReadArgs{Path: "lines.txt", Offset: -1}), sdk.CodeValidation)
	msg := sdktest.Fails(t, p.Call("read_file", ReadArgs{Path: "missing.txt"}), sdk.CodeToolExec)
	if msg != "missing.txt: no such file or directory" {
		t.Errorf("missing file: %q", msg)
	}
	sdktest.Fails(t, p.Call("read_file", ReadArgs{Path: "sub"}), sdk.CodeToolExec)
}

func TestWriteFile(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t)
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(f.root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	res := p.Call("write_file", WriteArgs{Path: "new/dir/n.txt", Content: "one\n"})
	sdktest.OK(t, res)
	if n, _ := res.Meta["bytes"].(float64); n != 4 {
		t.Errorf("meta = %v, want bytes 4", res.Meta)
	}
	sdktest.OK(t, p.Call("write_file", WriteArgs{Path: "new/dir/n.txt", Content: "two\n", Mode: "append"}))
	if got := read("new/dir/n.txt"); got != "one\ntwo\n" {
		t.Errorf("after append: %q", got)
	}
	sdktest.OK(t, p.Call("write_file", WriteArgs{Path: filepath.Join(f.root, "new/dir/n.txt"), Content: "three\n", Mode: "overwrite"}))
	if got := read("new/dir/n.txt"); got != "three\n" {
		t.Errorf("after overwrite: %q", got)
	}
	sdktest.OK(t, p.Call("write_file", WriteArgs{Path: "appended.txt", Content: "x", Mode: "append"}))
	if got := read("appended.txt"); got != "x" {
		t.Errorf("append to a new file: %q", got)
	}
	sdktest.Fails(t, p.Call("write_file", WriteArgs{Path: "x.txt", Content: "x", Mode: "replace"}), sdk.CodeValidation)
	sdktest.Fails(t, p.Call("write_file", WriteArgs{Path: "sub", Content: "x"}), sdk.CodeToolExec)

	t.Run("overwrite is atomic and leaves no temporary file", func(t *testing.T) {
		name := filepath.Join(f.root, "sub", "b.txt")
		if err := os.Chmod(name, 0o600); err != nil {
			t.Fatal(err)
		}
		before, err := os.Open(name) // still reads the old content after the rename
		if err != nil {
			t.Fatal(err)
		}
		defer before.Close()
		for range 3 {
			sdktest.OK(t, p.Call("write_file", WriteArgs{Path: "sub/b.txt", Content: "new beta\n"}))
		}
		entries, err := os.ReadDir(filepath.Join(f.root, "sub"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if !slices.Equal(names, []string{"b.txt", "deep"}) {
			t.Errorf("sub holds %v, want only b.txt and deep", names)
		}
		old := make([]byte, 64)
		n, _ := before.Read(old)
		if string(old[:n]) != "beta\n" {
			t.Errorf("the old file reads %q: it was written in place, not replaced", old[:n])
		}
		if info, err := os.Stat(name); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("mode after overwrite: %v, %v; want 0600", info.Mode(), err)
		}
	})

	t.Run("through a symlink inside the root", func(t *testing.T) {
		if err := os.Symlink("a.txt", filepath.Join(f.root, "alias")); err != nil {
			t.Fatal(err)
		}
		sdktest.OK(t, p.Call("write_file", WriteArgs{Path: "alias", Content: "via alias\n"}))
		if got := read("a.txt"); got != "via alias\n" {
			t.Errorf("a.txt = %q, want the content written through alias", got)
		}
		if info, err := os.Lstat(filepath.Join(f.root, "alias")); err != nil || info.Mode()&os.ModeSymlink == 0 {
			t.Errorf("alias is no longer a symlink: %v, %v", info, err)
		}
	})
}

// TestEscapesRefused checks that no path leads out of the root, whatever the tool.
func TestEscapesRefused(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t)
	outsideFile := filepath.Join(f.outside, "secret.txt")
	for _, path := range []string{
		"../outside/secret.txt",
		"sub/../../outside/secret.txt",
		outsideFile,
		"/etc/passwd",
		"link.txt",
		"linkdir/secret.txt",
		"linkdir/new.txt",
	} {
		t.Run(path, func(t *testing.T) {
			sdktest.Fails(t, p.Call("read_file", ReadArgs{Path: path}), sdk.CodePolicy)
			for _, mode := range []string{"overwrite", "append"} {
				msg := sdktest.Fails(t, p.Call("write_file", WriteArgs{Path: path, Content: "pwned", Mode: mode}), sdk.CodePolicy)
				if want := "is outside the workspace roots"; !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %q", msg, want)
				}
			}
		})
	}
	if b, err := os.ReadFile(outsideFile); err != nil || string(b) != secret+"\n" {
		t.Errorf("the file outside was changed: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(f.outside, "new.txt")); !os.IsNotExist(err) {
		t.Errorf("a file was created outside the root: %v", err)
	}
}

// FuzzPaths checks that no path given to read_file reveals the file outside
// the root.
func FuzzPaths(f *testing.F) {
	for _, s := range []string{"a.txt", "../outside/secret.txt", "link.txt", "linkdir/secret.txt", "/", ".", "sub/./../a.txt", "//x", "sub/deep/../../../outside/secret.txt"} {
		f.Add(s)
	}
	fx := newFixture(f)
	w := &workspace{}
	if err := w.configure(context.Background(), &sdk.ConfigureRequest{Config: rootsConfig(fx.root)}); err != nil {
		f.Fatal(err)
	}
	realRoot, err := filepath.EvalSymlinks(fx.root)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string) {
		res, err := w.read(context.Background(), &sdk.Request[ReadArgs]{Args: ReadArgs{Path: path}})
		if err != nil {
			return
		}
		if strings.Contains(res.Stdout, secret) {
			t.Fatalf("read_file %q revealed the file outside the root", path)
		}
		// Resolve what was read independently of os.Root: it must lie inside the root.
		abs := path
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(fx.root, path)
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			if rel, err := filepath.Rel(realRoot, real); err != nil || !(rel == "." || filepath.IsLocal(rel)) {
				t.Fatalf("read_file %q read %s, outside the root %s", path, real, realRoot)
			}
		}
	})
}

// TestSubprocess runs the built plugin through the real plugin handshake.
func TestSubprocess(t *testing.T) {
	f := newFixture(t)
	p := sdktest.Exec(t, sdktest.Build(t, "."), &sdktest.Options{Config: map[string]any{"roots": []string{f.root}}})
	if p.Pid() == 0 {
		t.Fatal("subprocess plugin has no pid")
	}
	sdktest.OK(t, p.Call("write_file", WriteArgs{Path: "smoke.txt", Content: "smoke\n"}))
	if got := sdktest.OK(t, p.Call("read_file", ReadArgs{Path: "smoke.txt"})); got != "smoke\n" {
		t.Errorf("read back %q", got)
	}
	sdktest.Fails(t, p.Call("read_file", ReadArgs{Path: "link.txt"}), sdk.CodePolicy)
	if err := syscall.Mkfifo(filepath.Join(f.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	sdktest.Fails(t, p.Call("read_file", ReadArgs{Path: "fifo"}), sdk.CodeToolExec) // at once, not at the call's timeout
	if got := sdktest.OK(t, p.Call("edit_file", EditArgs{Path: "smoke.txt", Find: "smoke", Replace: "fire"})); got != "replaced 1 occurrence(s)" {
		t.Errorf("edit_file = %q", got)
	}
	if got := sdktest.OK(t, p.Call("find_files", FindArgs{NamePattern: "smoke.*"})); got != "smoke.txt" {
		t.Errorf("find_files = %q", got)
	}
	if got := sdktest.OK(t, p.Call("search_files", SearchArgs{Pattern: "fire"})); got != "smoke.txt:1:fire" {
		t.Errorf("search_files = %q", got)
	}
}

// writeFiles writes files (name → content) below dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		name = filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEditFile(t *testing.T) {
	f := newFixture(t)
	p := f.plugin(t)
	name := filepath.Join(f.root, "e.txt")
	const orig = "one two one\nthree one\n"
	reset := func(t *testing.T, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(name, []byte(orig), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(name, mode); err != nil {
			t.Fatal(err)
		}
	}
	content := func(t *testing.T) string {
		t.Helper()
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t.Run("single", func(t *testing.T) {
		reset(t, 0o644)
		res := p.Call("edit_file", EditArgs{Path: "e.txt", Find: "two", Replace: "2"})
		if got := sdktest.OK(t, res); got != "replaced 1 occurrence(s)" {
			t.Errorf("edit_file = %q", got)
		}
		if n, _ := res.Meta["replacements"].(float64); n != 1 {
			t.Errorf("meta = %v, want replacements 1", res.Meta)
		}
		if got := content(t); got != "one 2 one\nthree one\n" {
			t.Errorf("file = %q", got)
		}
	})
	t.Run("all", func(t *testing.T) {
		reset(t, 0o644)
		res := p.Call("edit_file", EditArgs{Path: name, Find: "one", Replace: "1", All: true})
		if got := sdktest.OK(t, res); got != "replaced 3 occurrence(s)" {
			t.Errorf("edit_file = %q", got)
		}
		if n, _ := res.Meta["replacements"].(float64); n != 3 {
			t.Errorf("meta = %v, want replacements 3", res.Meta)
		}
		if got := content(t); got != "1 two 1\nthree 1\n" {
			t.Errorf("file = %q", got)
		}
	})
	t.Run("zero matches leave the file untouched", func(t *testing.T) {
		reset(t, 0o644)
		msg := sdktest.Fails(t, p.Call("edit_file", EditArgs{Path: "e.txt", Find: "four", Replace: "4"}), sdk.CodeToolExec)
		if msg != "find text not found in e.txt" {
			t.Errorf("message %q", msg)
		}
		if got := content(t); got != orig {
			t.Errorf("file changed: %q", got)
		}
	})
	t.Run("several matches without all leave the file untouched", func(t *testing.T) {
		reset(t, 0o644)
		msg := sdktest.Fails(t, p.Call("edit_file", EditArgs{Path: "e.txt", Find: "one", Replace: "1"}), sdk.CodeToolExec)
		for _, want := range []string{"3 times", "all=true", "longer find"} {
			if !strings.Contains(msg, want) {
				t.Errorf("message %q lacks %q", msg, want)
			}
		}
		if got := content(t); got != orig {
			t.Errorf("file changed: %q", got)
		}
	})
	t.Run("mode kept, no temporary file left", func(t *testing.T) {
		reset(t, 0o640)
		sdktest.OK(t, p.Call("edit_file", EditArgs{Path: "e.txt", Find: "three", Replace: "3"}))
		if info, err := os.Stat(name); err != nil || info.Mode().Perm() != 0o640 {
			t.Errorf("mode after edit: %v, %v; want 0640", info.Mode(), err)
		}
		if tmp, _ := filepath.Glob(filepath.Join(f.root, ".e.txt.*")); len(tmp) > 0 {
			t.Errorf("temporary files left: %v", tmp)
		}
	})
	sdktest.Fails(t, p.Call("edit_file", EditArgs{Path: "e.txt", Find: "", Replace: "x"}), sdk.CodeValidation)
	sdktest.Fails(t, p.Call("edit_file", EditArgs{Path: "missing.txt", Find: "a", Replace: "b"}), sdk.CodeToolExec)
	sdktest.Fails(t, p.Call("edit_file", EditArgs{Path: "sub", Find: "a", Replace: "b"}), sdk.CodeToolExec)
	t.Run("outside the root refused", func(t *testing.T) {
		outsideFile := filepath.Join(f.outside, "secret.txt")
		for _, path := range []string{"../outside/secret.txt", outsideFile, "link.txt", "linkdir/secret.txt"} {
			sdktest.Fails(t, p.Call("edit_file", EditArgs{Path: path, Find: "secret", Replace: "pwned"}), sdk.CodePolicy)
		}
		if b, err := os.ReadFile(outsideFile); err != nil || string(b) != secret+"\n" {
			t.Errorf("the file outside was changed: %q, %v", b, err)
		}
	})
}

// requirePrograms fails the test when rg or fd is missing: they are part of
// the module's environment, so their tests must not pass by skipping.
func requirePrograms(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("rg"); err != nil {
		t.Fatal("ripgrep (rg) is needed: apt-get install ripgrep")
	}
	_, err1 := exec.LookPath("fd")
	_, err2 := exec.LookPath("fdfind")
	if err1 != nil && err2 != nil {
		t.Fatal("fd is needed: apt-get install fd-find")
	}
}

func TestFindFiles(t *testing.T) {
	requirePrograms(t)
	f := newFixture(t)
	writeFiles(t, f.root, map[string]string{"-dash.txt": "", "sub/deep/d.md": "", "sub/e.md": ""})
	p := f.plugin(t)
	for _, tc := range []struct {
		name string
		args FindArgs
		want string
	}{
		{"pattern", FindArgs{NamePattern: "*.md"}, "sub/deep/d.md\nsub/e.md"},
		{"pattern below a directory", FindArgs{Path: "sub", NamePattern: "*.txt"}, "b.txt\ndeep/c.txt"},
		{"absolute directory", FindArgs{Path: filepath.Join(f.root, "sub", "deep")}, "c.txt\nd.md"},
		{"max depth", FindArgs{Path: "sub", MaxDepth: 1}, "b.txt\ndeep/\ne.md"},
		{"pattern starting with -", FindArgs{NamePattern: "-dash*"}, "-dash.txt"},
		{"no match", FindArgs{NamePattern: "*.none"}, ""},
		// linkdir leads out of the root: listed as an entry, never entered.
		{"outward symlink not followed", FindArgs{NamePattern: "secret*"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := p.Call("find_files", tc.args)
			if got := sdktest.OK(t, res); got != tc.want || res.TruncatedLines {
				t.Errorf("find_files = %q (truncated %v), want %q", got, res.TruncatedLines, tc.want)
			}
		})
	}
	t.Run("limit", func(t *testing.T) {
		res := p.Call("find_files", FindArgs{NamePattern: "*.md", Limit: 1})
		if got := sdktest.OK(t, res); strings.Count(got, "\n") != 0 || !strings.HasSuffix(got, ".md") || !res.TruncatedLines {
			t.Errorf("find_files = %q (truncated %v), want one path, truncated", got, res.TruncatedLines)
		}
		res = p.Call("find_files", FindArgs{NamePattern: "*.md", Limit: 2})
		if sdktest.OK(t, res); res.TruncatedLines {
			t.Errorf("find_files with limit = total: truncated")
		}
	})
	for _, path := range []string{"..", "linkdir", f.outside, "/etc"} {
		sdktest.Fails(t, p.Call("find_files", FindArgs{Path: path}), sdk.CodePolicy)
	}
	sdktest.Fails(t, p.Call("find_files", FindArgs{Path: "a.txt"}), sdk.CodeToolExec)
	sdktest.Fails(t, p.Call("find_files", FindArgs{Path: "nope"}), sdk.CodeToolExec)
	sdktest.Fails(t, p.Call("find_files", FindArgs{Limit: -1}), sdk.CodeValidation)
}

func TestSearchFiles(t *testing.T) {
	requirePrograms(t)
	f := newFixture(t)
	writeFiles(t, f.root, map[string]string{
		"code/x.go":       "package x\n// a.b here\n// axb there\nfunc Hello() {}\n",
		"code/y.txt":      "hello world\n",
		"code/ctx.txt":    "1\n2\nmiddle\n4\n5\n",
		"ign/.gitignore":  "ignored.txt\n",
		"ign/ignored.txt": "needle\n",
		"ign/kept.txt":    "needle\n",
		"many.txt":        strings.Repeat("rep\n", 10),
		"long.txt":        "start" + strings.Repeat("x", 5000) + "\n",
		"-opt.txt":        "-v dash\n",
	})
	p := f.plugin(t)
	for _, tc := range []struct {
		name string
		args SearchArgs
		want string
	}{
		{"regex", SearchArgs{Path: "code", Pattern: "a.b"}, "x.go:2:// a.b here\nx.go:3:// axb there"},
		{"literal", SearchArgs{Path: "code", Pattern: "a.b", Literal: true}, "x.go:2:// a.b here"},
		{"case", SearchArgs{Path: "code", Pattern: "hello"}, "y.txt:1:hello world"},
		{"ignore case", SearchArgs{Path: "code", Pattern: "hello", IgnoreCase: true}, "x.go:4:func Hello() {}\ny.txt:1:hello world"},
		{"context", SearchArgs{Path: "code/ctx.txt", Pattern: "middle", Context: 1}, "ctx.txt-2-2\nctx.txt:3:middle\nctx.txt-4-4"},
		{"glob", SearchArgs{Path: "code", Pattern: "e", Glob: "*.txt"}, "ctx.txt:3:middle\ny.txt:1:hello world"},
		{"gitignore respected", SearchArgs{Path: "ign", Pattern: "needle"}, "kept.txt:1:needle"},
		{"absolute path", SearchArgs{Path: filepath.Join(f.root, "ign"), Pattern: "needle"}, "kept.txt:1:needle"},
		{"pattern starting with -", SearchArgs{Pattern: "-v", Glob: "-opt.txt"}, "-opt.txt:1:-v dash"},
		// link.txt and linkdir lead out of the root: never read.
		{"outward symlink not searched", SearchArgs{Pattern: "secret"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := p.Call("search_files", tc.args)
			if got := sdktest.OK(t, res); got != tc.want || res.TruncatedLines {
				t.Errorf("search_files = %q (truncated %v), want %q", got, res.TruncatedLines, tc.want)
			}
		})
	}
	t.Run("no match", func(t *testing.T) {
		res := p.Call("search_files", SearchArgs{Pattern: "no such text anywhere"})
		if got := sdktest.OK(t, res); got != "" {
			t.Errorf("search_files = %q, want nothing", got)
		}
		if n, ok := res.Meta["matches"].(float64); !ok || n != 0 {
			t.Errorf("meta = %v, want matches 0", res.Meta)
		}
	})
	t.Run("limit", func(t *testing.T) {
		res := p.Call("search_files", SearchArgs{Path: "many.txt", Pattern: "rep", Limit: 3})
		if got := sdktest.OK(t, res); got != "many.txt:1:rep\nmany.txt:2:rep\nmany.txt:3:rep" || !res.TruncatedLines {
			t.Errorf("search_files = %q (truncated %v), want 3 lines, truncated", got, res.TruncatedLines)
		}
		if n, _ := res.Meta["matches"].(float64); n != 3 {
			t.Errorf("meta = %v, want matches 3", res.Meta)
		}
		res = p.Call("search_files", SearchArgs{Path: "many.txt", Pattern: "rep", Limit: 10})
		if got := sdktest.OK(t, res); strings.Count(got, "\n") != 9 || res.TruncatedLines {
			t.Errorf("search_files with limit = total: %q (truncated %v)", got, res.TruncatedLines)
		}
	})
	t.Run("long lines cut", func(t *testing.T) {
		got := sdktest.OK(t, p.Call("search_files", SearchArgs{Path: "long.txt", Pattern: "start"}))
		if !strings.HasPrefix(got, "long.txt:1:start") || len(got) > 1000 {
			t.Errorf("search_files = %d bytes %.80q…, want the line cut to about 500 columns", len(got), got)
		}
	})
	msg := sdktest.Fails(t, p.Call("search_files", SearchArgs{Pattern: "("}), sdk.CodeToolExec)
	if !strings.Contains(msg, "regex parse error") {
		t.Errorf("bad regex: %q lacks rg's error", msg)
	}
	for _, path := range []string{"..", "linkdir", "link.txt", filepath.Join(f.outside, "secret.txt"), "/etc"} {
		sdktest.Fails(t, p.Call("search_files", SearchArgs{Path: path, Pattern: "secret"}), sdk.CodePolicy)
	}
	sdktest.Fails(t, p.Call("search_files", SearchArgs{Path: "nope", Pattern: "x"}), sdk.CodeToolExec)
	sdktest.Fails(t, p.Call("search_files", SearchArgs{Pattern: ""}), sdk.CodeValidation)
	sdktest.Fails(t, p.Call("search_files", SearchArgs{Pattern: "x", Context: -1}), sdk.CodeValidation)
}

func TestProgramsMissing(t *testing.T) {
	saved := lookPath
	t.Cleanup(func() { lookPath = saved })
	lookPath = func(string) (string, error) { return "", exec.ErrNotFound }
	p := newFixture(t).plugin(t)
	if msg := sdktest.Fails(t, p.Call("search_files", SearchArgs{Pattern: "x"}), sdk.CodeToolExec); msg != rgMissing {
		t.Errorf("search_files: %q, want %q", msg, rgMissing)
	}
	if msg := sdktest.Fails(t, p.Call("find_files", FindArgs{}), sdk.CodeToolExec); msg != fdMissing {
		t.Errorf("find_files: %q, want %q", msg, fdMissing)
	}
	if got := sdktest.OK(t, p.Call("read_file", ReadArgs{Path: "a.txt"})); got != "alpha\n" {
		t.Errorf("read_file = %q", got)
	}

	// Only fdfind, as on Debian: find_files works, search_files does not.
	lookPath = func(name string) (string, error) {
		if name == "fdfind" { // whichever name fd has here
			if p, err := saved("fd"); err == nil {
				return p, nil
			}
			return saved("fdfind")
		}
		return "", &exec.Error{Name: name, Err: errors.New("not found")}
	}
	p = newFixture(t).plugin(t)
	sdktest.OK(t, p.Call("find_files", FindArgs{}))
	sdktest.Fails(t, p.Call("search_files", SearchArgs{Pattern: "x"}), sdk.CodeToolExec)
}

// TestInsideSandbox runs the tests above again inside a sandbox with the
// defaults a block's sandbox {} gives: ripgrep and fd from /usr, the
// workspaces in the sandbox's own /tmp.
func TestInsideSandbox(t *testing.T) {
	if sandboxtest.Inside() {
		return
	}
	sandboxtest.RerunInside(t, sandbox.Policy{})
}
