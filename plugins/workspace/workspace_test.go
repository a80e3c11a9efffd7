package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	want := []string{"get_workspace_info", "list_files", "read_file", "write_file"}
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
	var info struct{ Roots []string }
	if err := json.Unmarshal([]byte(sdktest.OK(t, p.Call("get_workspace_info", map[string]any{}))), &info); err != nil {
		t.Fatal(err)
	}
	if want := []string{f.root, other}; !slices.Equal(info.Roots, want) {
		t.Errorf("roots = %v, want %v (cleaned, deduplicated)", info.Roots, want)
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
	f.Fuzz(func(t *testing.T, path string) {
		res, err := w.read(context.Background(), &sdk.Request[ReadArgs]{Args: ReadArgs{Path: path}})
		if err == nil && strings.Contains(res.Stdout, secret) {
			t.Fatalf("read_file %q revealed the file outside the root", path)
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
}
