package main

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
	"github.com/toolhost/toolhost/store"
)

// adminToken is the secret in the host's data directory.
const adminToken = "th_admin_4f9c2e51-SECRET"

// hostFixture is a workspace root laid out as the default deployment's
// config directory: it holds data/, the host's data directory, with an
// admin token, the host's database and a saved output, and symlinks leading
// into it.
type hostFixture struct {
	root, data string
}

func newHostFixture(t testing.TB) hostFixture {
	t.Helper()
	f := hostFixture{root: t.TempDir()}
	f.data = filepath.Join(f.root, "data")
	if err := os.MkdirAll(filepath.Join(f.data, "outputs"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"data/admin.token":        adminToken,
		"data/outputs/call-1.log": "saved output: " + adminToken + "\n",
	} {
		if err := os.WriteFile(filepath.Join(f.root, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.Open(context.Background(), f.data)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	writeFiles(t, f.root, map[string]string{"notes.txt": "hello\n", "sub/b.txt": "beta\n"})
	for name, target := range map[string]string{ // relative links inside the root, into data/
		"d":      "data",
		"t":      "data/admin.token",
		"outs":   "data/outputs",
		"nd":     "data/new.txt", // dangling
		"sub/up": "../data",
		"sub/dd": "../d", // a link to a link
	} {
		if err := os.Symlink(target, filepath.Join(f.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// startHost starts a host on a config.hcl of its own whose workspace is
// the fixture's root, with its data directory elsewhere: blocks, then the
// workspace module built from this package, with no roots (so its root is
// the workspace), unconfined: its own guard is under test, not the sandbox
// that would hide the host's paths too. The host is closed when t ends.
func (f hostFixture) startHost(t testing.TB, blocks string) (*host.Host, *config.Config) {
	t.Helper()
	dir := t.TempDir()
	src := fmt.Sprintf("workspace = %q\n", f.root) + blocks + fmt.Sprintf("builtin \"workspace\" {\n  path    = %q\n  sandbox = \"off\"\n}\n", sdktest.Build(t, "."))
	cfg, err := config.Parse([]byte(src), filepath.Join(dir, "config.hcl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h, cfg
}

// snapshot records every entry of the data directory but the database's
// files (a running host writes them): its mode and, for a file, its content.
func (f hostFixture) snapshot(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(f.data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || strings.HasPrefix(d.Name(), "toolhost.db") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		entry := info.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			entry += " " + string(b)
		}
		out[path] = entry
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reveals reports what of the data directory out shows, if anything.
func reveals(out string) string {
	for _, s := range []string{adminToken, "admin.token", "toolhost.db", "call-1.log", "outputs"} {
		if strings.Contains(out, s) {
			return s
		}
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "data/") || strings.TrimSpace(line) == "data" {
			return line
		}
	}
	return ""
}

// hostAttacks are calls an agent holding only the workspace group makes to
// reach the host's data directory inside the root. Each is refused with
// code, or, when code is empty, succeeds without showing anything of it; in
// every case the data directory is unchanged afterwards.
func hostAttacks(f hostFixture) []struct {
	name string
	tool string
	args any
	code sdk.Code
} {
	abs := func(name string) string { return filepath.Join(f.root, name) }
	type row = struct {
		name string
		tool string
		args any
		code sdk.Code
	}
	return []row{
		{"read relative", "read_file", ReadArgs{Path: "data/admin.token"}, sdk.CodePolicy},
		{"read through ..", "read_file", ReadArgs{Path: "./data/../data/admin.token"}, sdk.CodePolicy},
		{"read absolute", "read_file", ReadArgs{Path: abs("data/admin.token")}, sdk.CodePolicy},
		{"read through a directory link", "read_file", ReadArgs{Path: "d/admin.token"}, sdk.CodePolicy},
		{"read a file link", "read_file", ReadArgs{Path: "t"}, sdk.CodePolicy},
		{"read through a link in a subdirectory", "read_file", ReadArgs{Path: "sub/up/admin.token"}, sdk.CodePolicy},
		{"read through a link to a link", "read_file", ReadArgs{Path: "sub/dd/admin.token"}, sdk.CodePolicy},
		{"read below, through a link", "read_file", ReadArgs{Path: "outs/call-1.log"}, sdk.CodePolicy},
		{"read the database", "read_file", ReadArgs{Path: "data/toolhost.db"}, sdk.CodePolicy},

		{"overwrite the token", "write_file", WriteArgs{Path: "data/admin.token", Content: "pwned"}, sdk.CodePolicy},
		{"append to the token", "write_file", WriteArgs{Path: "data/admin.token", Content: "pwned", Mode: "append"}, sdk.CodePolicy},
		{"create a file", "write_file", WriteArgs{Path: "data/new.txt", Content: "pwned"}, sdk.CodePolicy},
		{"create a file, absolute", "write_file", WriteArgs{Path: abs("data/new.txt"), Content: "pwned"}, sdk.CodePolicy},
		{"append a new file", "write_file", WriteArgs{Path: "data/new.txt", Content: "pwned", Mode: "append"}, sdk.CodePolicy},
		{"create a directory", "write_file", WriteArgs{Path: "data/newdir/x.txt", Content: "pwned"}, sdk.CodePolicy},
		{"create through a directory link", "write_file", WriteArgs{Path: "d/new.txt", Content: "pwned"}, sdk.CodePolicy},
		{"create a directory through a link", "write_file", WriteArgs{Path: "d/newdir/x.txt", Content: "pwned"}, sdk.CodePolicy},
		{"create through a link in a subdirectory", "write_file", WriteArgs{Path: "sub/up/new.txt", Content: "pwned"}, sdk.CodePolicy},
		{"overwrite through a file link", "write_file", WriteArgs{Path: "t", Content: "pwned"}, sdk.CodePolicy},
		{"append through a file link", "write_file", WriteArgs{Path: "t", Content: "pwned", Mode: "append"}, sdk.CodePolicy},
		// A dangling link is not followed to create its target.
		{"overwrite through a dangling link", "write_file", WriteArgs{Path: "nd", Content: "pwned"}, sdk.CodeToolExec},
		{"append through a dangling link", "write_file", WriteArgs{Path: "nd", Content: "pwned", Mode: "append"}, sdk.CodeToolExec},

		{"edit the token", "edit_file", EditArgs{Path: "data/admin.token", Find: "SECRET", Replace: "pwned"}, sdk.CodePolicy},
		{"edit through a file link", "edit_file", EditArgs{Path: "t", Find: "SECRET", Replace: "pwned"}, sdk.CodePolicy},
		{"edit through a directory link", "edit_file", EditArgs{Path: "d/admin.token", Find: "SECRET", Replace: "pwned"}, sdk.CodePolicy},

		{"list the data directory", "list_files", ListArgs{Path: "data"}, sdk.CodePolicy},
		{"list it absolute", "list_files", ListArgs{Path: abs("data")}, sdk.CodePolicy},
		{"list through a link", "list_files", ListArgs{Path: "d"}, sdk.CodePolicy},
		{"list through a link in a subdirectory", "list_files", ListArgs{Path: "sub/up", Recursive: true}, sdk.CodePolicy},
		{"list below, through a link", "list_files", ListArgs{Path: "outs"}, sdk.CodePolicy},
		{"list the root", "list_files", ListArgs{Path: "."}, ""},
		{"list the root recursively", "list_files", ListArgs{Path: ".", Recursive: true}, ""},

		{"find in the data directory", "find_files", FindArgs{Path: "data"}, sdk.CodePolicy},
		{"find through a link", "find_files", FindArgs{Path: "d"}, sdk.CodePolicy},
		{"find below, through a link", "find_files", FindArgs{Path: "outs"}, sdk.CodePolicy},
		{"find the token from the root", "find_files", FindArgs{NamePattern: "*token*"}, ""},
		{"find everything from the root", "find_files", FindArgs{}, ""},

		{"search the data directory", "search_files", SearchArgs{Path: "data", Pattern: "SECRET"}, sdk.CodePolicy},
		{"search the token", "search_files", SearchArgs{Path: "data/admin.token", Pattern: "SECRET"}, sdk.CodePolicy},
		{"search a file link", "search_files", SearchArgs{Path: "t", Pattern: "SECRET"}, sdk.CodePolicy},
		{"search through a directory link", "search_files", SearchArgs{Path: "d", Pattern: "SECRET"}, sdk.CodePolicy},
		{"search the token's content from the root", "search_files", SearchArgs{Pattern: "SECRET", Literal: true}, ""},
		// The data directory is left out even when the glob names it: rg
		// searches no file and says so.
		{"search with a glob naming it", "search_files", SearchArgs{Pattern: "SECRET", Glob: "data/**"}, sdk.CodeToolExec},
	}
}

// runHostAttacks runs every attack through call and checks the outcome and
// that the data directory is unchanged.
func runHostAttacks(t *testing.T, f hostFixture, call func(tool string, args any) *sdk.Result) {
	t.Helper()
	requirePrograms(t)
	want := f.snapshot(t)
	for _, a := range hostAttacks(f) {
		t.Run(a.name, func(t *testing.T) {
			res := call(a.tool, a.args)
			if a.code == "" {
				if what := reveals(sdktest.OK(t, res)); what != "" {
					t.Errorf("%s %+v showed %q of the data directory:\n%s", a.tool, a.args, what, res.Stdout)
				}
			} else {
				msg := sdktest.Fails(t, res, a.code)
				if a.code == sdk.CodePolicy && !strings.Contains(msg, "is in the host's data directory: refused") {
					t.Errorf("message %q does not say why", msg)
				}
			}
			if got := f.snapshot(t); !maps.Equal(got, want) {
				t.Errorf("the data directory changed:\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestHostPathsRefused(t *testing.T) {
	f := newHostFixture(t)
	p := sdktest.New(t, newGroup(), &sdktest.Options{
		Config:    map[string]any{"roots": []string{f.root}},
		HostPaths: []string{f.data},
	})
	runHostAttacks(t, f, p.Call)

	t.Run("the rest of the root is served as before", func(t *testing.T) {
		if got := sdktest.OK(t, p.Call("list_files", ListArgs{Path: ".", Recursive: true})); got != "d\nnd\nnotes.txt\nouts\nsub/\nsub/b.txt\nsub/dd\nsub/up\nt" {
			t.Errorf("list_files = %q", got)
		}
		sdktest.OK(t, p.Call("write_file", WriteArgs{Path: "sub/new/n.txt", Content: "ok\n"}))
		sdktest.OK(t, p.Call("write_file", WriteArgs{Path: "sub/new/n.txt", Content: "more\n", Mode: "append"}))
		sdktest.OK(t, p.Call("edit_file", EditArgs{Path: "sub/new/n.txt", Find: "more", Replace: "done"}))
		if got := sdktest.OK(t, p.Call("read_file", ReadArgs{Path: "sub/new/n.txt"})); got != "ok\ndone\n" {
			t.Errorf("read back %q", got)
		}
		if got := sdktest.OK(t, p.Call("search_files", SearchArgs{Path: "sub/new/n.txt", Pattern: "done"})); got != "n.txt:2:done" {
			t.Errorf("search_files = %q", got)
		}
		if got := sdktest.OK(t, p.Call("find_files", FindArgs{NamePattern: "*.txt"})); got != "notes.txt\nsub/b.txt\nsub/new/n.txt" {
			t.Errorf("find_files = %q", got)
		}
	})
}

// TestHostPathsThroughHost: the layout the attacks of runHostAttacks need
// through a host, a workspace holding the host's data directory (the
// default deployment's before the workspace moved to workspace/), is
// refused at start, naming both paths; the attacks run against the module
// alone (TestHostPathsRefused), its second layer.
func TestHostPathsThroughHost(t *testing.T) {
	f := newHostFixture(t)
	src := fmt.Sprintf("workspace = %q\ndata_dir = %q\nbuiltin \"workspace\" {\n  config {}\n}\n", f.root, f.data)
	_, err := config.Parse([]byte(src), filepath.Join(t.TempDir(), "config.hcl"), nil)
	if want := "the workspace " + f.root + " holds the data directory " + f.data; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a workspace holding the data directory: %v, want %q", err, want)
	}
}

// TestArtifactDirIsAHostPath: an artifact directory outside the data
// directory (store { artifact_dir }, shared by the hosts of one database)
// holds every role's artifacts, so a module must keep out of it as it keeps
// out of the data directory: a workspace whose root holds it cannot read
// an artifact there, nor list it.
func TestArtifactDirIsAHostPath(t *testing.T) {
	f := newHostFixture(t)
	writeFiles(t, f.root, map[string]string{"shared-artifacts/ab/abcd": "another role's artifact\n"})
	h, _ := f.startHost(t, fmt.Sprintf("store {\n  artifact_dir = %q\n}\n", filepath.Join(f.root, "shared-artifacts")))
	for tool, args := range map[string]string{
		"read_file":  `{"path": "shared-artifacts/ab/abcd"}`,
		"list_files": `{"path": "shared-artifacts/ab"}`,
	} {
		res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: []byte(args)})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if res.OK || res.Error == nil || res.Error.Code != toolhost.CodePolicy || strings.Contains(res.Stdout, "another role") {
			t.Errorf("%s of the artifact directory: %+v", tool, res)
		}
	}
}
