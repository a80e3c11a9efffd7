package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrustBoundary: a config in which a path an agent can write holds
// what the host trusts is refused at the block or attribute that makes it
// writable, naming both paths; the default layout, with agents in
// workspace/, is accepted.
func TestTrustBoundary(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"bin/plugins", "workspace", "tools"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "tools", "toolhost")
	for _, tt := range []struct {
		name, src string
		want      string // "" for accepted; else the position and a part of the message
	}{
		{name: "default layout", src: "builtin \"workspace\" {\n  config {}\n}\nbuiltin \"command\" {\n  config {}\n}\n"},
		{name: "workspace root holds the config file", src: "builtin \"workspace\" {\n  config {\n    roots = [\".\"]\n  }\n}\n",
			want: ":1,1: An agent could write what the host trusts: builtin \"workspace\"'s writable path " + dir + " holds the config file"},
		{name: "command workdir holds the plugin directory", src: "builtin \"command\" {\n  config {\n    workdir = \"bin\"\n  }\n}\n",
			want: ":1,1: An agent could write what the host trusts: builtin \"command\"'s writable path " + filepath.Join(dir, "bin") + " holds the plugin directory"},
		{name: "workspace holds the data directory", src: "data_dir = \"workspace/data\"\n",
			want: "the workspace " + filepath.Join(dir, "workspace") + " holds the data directory"},
		{name: "workspace attribute at the config's directory", src: "workspace = \".\"\n",
			want: ":1,1: An agent could write what the host trusts: the workspace " + dir + " holds the config file"},
		{name: "workspace inside the plugin directory", src: "workspace = \"bin/plugins/ws\"\n",
			want: "lies inside the plugin directory"},
		{name: "sandbox read_write holds a plugin's executable", src: "plugin \"p\" {\n  path = \"/opt/p/p\"\n  sandbox {\n    read_write = [\"/opt/p\"]\n  }\n}\n",
			want: ":1,1: An agent could write what the host trusts: plugin \"p\"'s writable path /opt/p holds the executable of plugin \"p\" /opt/p/p"},
		{name: "an mcp_server command in the workspace", src: "mcp_server \"m\" {\n  command = \"workspace/server\"\n}\n",
			want: "holds the executable of mcp_server \"m\""},
		{name: "the toolhost binary in a root", src: "builtin \"workspace\" {\n  config {\n    roots = [\"tools\"]\n  }\n}\n",
			want: "holds the toolhost binary " + exe},
		{name: "artifact directory holds the config file", src: "store {\n  artifact_dir = \".\"\n}\n",
			want: "the artifact directory " + dir + " holds the config file"},
		{name: "workspace holds the audit export directory", src: "audit {\n  retention = \"90d\"\n  export    = \"workspace/exports\"\n}\n",
			want: "the workspace " + filepath.Join(dir, "workspace") + " holds the audit export directory " + filepath.Join(dir, "workspace", "exports")},
		{name: "sandbox off is still a trust question for roots", src: "builtin \"workspace\" {\n  sandbox = \"off\"\n  config {\n    roots = [\"bin/plugins\"]\n  }\n}\n",
			want: "writable path " + filepath.Join(dir, "bin", "plugins") + " holds the plugin directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, "config.hcl")
			cfg, err := Parse([]byte(tt.src), file, &Options{Getenv: func(string) string { return "" }})
			if err == nil {
				err = cfg.CheckTrust(exe)
				if err.(Diagnostics) == nil {
					err = nil
				}
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("accepted, want %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error %q\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

// TestTrustFollowsSymlinks: a root that is a symbolic link to the config's
// directory is refused like the directory itself.
func TestTrustFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(dir, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	src := "builtin \"workspace\" {\n  config {\n    roots = [\"link\"]\n  }\n}\n"
	_, err := Parse([]byte(src), filepath.Join(dir, "config.hcl"), &Options{Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "holds the config file") {
		t.Fatalf("a root linked to the config's directory: %v", err)
	}
}

// TestDefaultConfigKeepsAgentsApart: the repository's config.hcl parses,
// and its workspace is a directory of its own beside it.
func TestDefaultConfigKeepsAgentsApart(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "config.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(filepath.Dir(cfg.File), "workspace"); cfg.Workspace != want {
		t.Fatalf("workspace %s, want %s", cfg.Workspace, want)
	}
}

// TestTrustExecutableLinks: a read_write directory that holds a module's
// command as written (a bare mcp_server command found in PATH, a symbolic
// link to a script elsewhere) or the interpreter its `#!` line runs is
// refused like one that holds the script itself.
func TestTrustExecutableLinks(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"npmbin", "lib", "interp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, body string) {
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("lib/tool.js", "#!/usr/bin/env -S fakenode --flag\n")
	write("interp/fakenode", "#!/bin/sh\n")
	if err := os.Symlink("../lib/tool.js", filepath.Join(dir, "npmbin", "tool")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Join(dir, "npmbin")+":"+filepath.Join(dir, "interp")+":"+os.Getenv("PATH"))
	for _, tt := range []struct{ rw, want string }{
		{"npmbin", "holds the executable of mcp_server \"m\" " + filepath.Join(dir, "npmbin", "tool")},
		{"lib", "holds the executable of mcp_server \"m\""},
		{"interp", "holds the interpreter of mcp_server \"m\"'s executable " + filepath.Join(dir, "interp", "fakenode")},
	} {
		src := "mcp_server \"m\" {\n  command = \"tool\"\n  sandbox {\n    read_write = [\"" + tt.rw + "\"]\n  }\n}\n"
		_, err := Parse([]byte(src), filepath.Join(dir, "config.hcl"), &Options{Getenv: func(string) string { return "" }})
		if err == nil || !strings.Contains(err.Error(), ":1,1: An agent could write what the host trusts") || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("read_write %s: %v\nwant %q", tt.rw, err, tt.want)
		}
	}
}

// TestSandboxPathInDataDir: a sandbox path that is the data directory or
// lies inside it, read-only or read-write, directly or through a symbolic
// link, is refused at its block, naming the path; one beside it is
// accepted.
func TestSandboxPathInDataDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "admin.token"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("data", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ list, path, want string }{
		{"read_only", "data/admin.token", "read_only names " + filepath.Join(dir, "data", "admin.token") + ", which lies inside the data directory"},
		{"read_only", "data/toolhost.db", "lies inside the data directory"},
		{"read_only", "data", "read_only names " + filepath.Join(dir, "data") + ","},
		{"read_only", "link/admin.token", "read_only names " + filepath.Join(dir, "link", "admin.token")},
		{"read_write", "data/cache", "read_write names"},
		{"read_only", "elsewhere", ""},
	} {
		src := "data_dir = \"data\"\nmcp_server \"m\" {\n  command = \"/bin/true\"\n  sandbox {\n    " + tt.list + " = [\"" + tt.path + "\"]\n  }\n}\n"
		_, err := Parse([]byte(src), filepath.Join(dir, "config.hcl"), &Options{Getenv: func(string) string { return "" }})
		switch {
		case tt.want == "" && err != nil:
			t.Fatalf("%s %s refused: %v", tt.list, tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), ":2,1: A sandbox path in the data directory") || !strings.Contains(err.Error(), tt.want)):
			t.Fatalf("%s %s: %v\nwant %q", tt.list, tt.path, err, tt.want)
		}
	}
}
