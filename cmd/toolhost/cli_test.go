package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
)

var update = flag.Bool("update", false, "rewrite testdata/help*.golden from the commands' help")

// allUsages is every command and subcommand under u, u first.
func allUsages(u *usage) []*usage {
	out := []*usage{u}
	for _, s := range u.subs {
		out = append(out, allUsages(s)...)
	}
	return out
}

// goldenName is the golden file of u's help.
func goldenName(u *usage) string {
	return filepath.Join("testdata", strings.Join(append([]string{"help"}, strings.Fields(u.name)...), "_")+".golden")
}

// runCLI runs toolhost with args, returning its exit status and outputs.
func runCLI(args ...string) (int, string, string) {
	var stdout, stderr strings.Builder
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestHelpGolden: every command's and subcommand's -h is its golden file
// (go test -run TestHelpGolden -update rewrites them): a synopsis, a
// one-line summary, its flags and an example, on stdout with exit status
// 0; --help and `toolhost help WORDS` print the same.
func TestHelpGolden(t *testing.T) {
	t.Setenv("TOOLHOST_LOG_LEVEL", "") // the -log-level default shows in the help
	want := map[string]bool{}
	for _, u := range allUsages(toolhostUsage) {
		words := strings.Fields(u.name)
		file := goldenName(u)
		want[file] = true
		t.Run(strings.Join(append([]string{"toolhost"}, words...), " "), func(t *testing.T) {
			if handlers[u] == nil && len(u.subs) == 0 && u != helpUsage {
				t.Errorf("no handler runs it, and it has no subcommand")
			}
			code, out, errOut := runCLI(append(slices.Clone(words), "-h")...)
			if code != 0 || errOut != "" {
				t.Fatalf("-h: exit %d, stderr:\n%s", code, errOut)
			}
			for _, form := range [][]string{append(slices.Clone(words), "--help"), append([]string{"help"}, words...)} {
				if c, o, e := runCLI(form...); c != 0 || o != out || e != "" {
					t.Errorf("toolhost %s: exit %d, stderr %q, and stdout differs from -h's:\n%s", strings.Join(form, " "), c, e, o)
				}
			}
			if !strings.HasPrefix(out, "usage: toolhost") || !strings.Contains(out, "\n\n"+u.summary+"\n") || !strings.Contains(out, "\nexample:\n  toolhost ") {
				t.Errorf("the help lacks a synopsis, the summary or an example:\n%s", out)
			}
			if *update {
				if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			golden, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (go test -run TestHelpGolden -update writes it)", err)
			}
			if out != string(golden) {
				t.Errorf("the help differs from %s (go test -run TestHelpGolden -update rewrites it):\n%s", file, out)
			}
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "help*.golden"))
	for _, f := range files {
		if !want[f] {
			t.Errorf("%s is the help of no command", f)
		}
	}
}

// TestHelpNamesWhatApplies: a subcommand's help lists its own flags only,
// and a command's help lists every subcommand.
func TestHelpNamesWhatApplies(t *testing.T) {
	for _, tt := range []struct {
		args     []string
		has, not []string
	}{
		{[]string{"roles", "list", "-h"}, []string{"-json", "-config"}, []string{"-groups", "-description", "-read-only"}},
		{[]string{"roles", "create", "-h"}, []string{"-groups", "-description", "-read-only"}, nil},
		{[]string{"tokens", "list", "-h"}, []string{"-json"}, []string{"-role", "-metrics", "-expires"}},
		{[]string{"agents", "send", "-h"}, []string{"ID MESSAGE"}, []string{"-json"}},
		{[]string{"mcp", "-h"}, []string{"-role", "  import ", "  inspect "}, nil},
		{[]string{"-h"}, []string{"  mcp inspect ", "  mcp import ", "  roles create ", "  new module ", "  version "}, nil},
	} {
		_, out, _ := runCLI(tt.args...)
		for _, s := range tt.has {
			if !strings.Contains(out, s) {
				t.Errorf("toolhost %s does not show %q:\n%s", strings.Join(tt.args, " "), s, out)
			}
		}
		for _, s := range tt.not {
			if strings.Contains(out, s) {
				t.Errorf("toolhost %s shows %q, which is not its flag:\n%s", strings.Join(tt.args, " "), s, out)
			}
		}
	}
}

// TestExitStatus: help is exit status 0 on stdout; a usage error is 2 on
// stderr, with the synopsis; a command that ran and failed is 1.
func TestExitStatus(t *testing.T) {
	t.Setenv("TOOLHOST_LOG_LEVEL", "")
	missing := filepath.Join(t.TempDir(), "missing.hcl")
	for _, tt := range []struct {
		args   []string
		code   int
		stderr []string // on stderr, in order; help (0) wants stderr empty
	}{
		{[]string{"-h"}, 0, nil},
		{[]string{"--help"}, 0, nil},
		{[]string{"help"}, 0, nil},
		{[]string{"help", "roles", "create"}, 0, nil},
		{[]string{"roles", "help", "create"}, 0, nil},
		{[]string{"roles", "-h"}, 0, nil},
		{[]string{"roles", "create", "tester", "-h"}, 0, nil},
		{[]string{"help", "-h"}, 0, nil},
		{nil, 2, []string{"toolhost: missing command", "usage: toolhost COMMAND [flags] [ARGS]", "commands: validate, ", "Run 'toolhost -h' for help."}},
		{[]string{"nope"}, 2, []string{`toolhost: unknown command "nope"`, "usage: toolhost COMMAND"}},
		{[]string{"help", "nope"}, 2, []string{`toolhost: unknown command "nope"`}},
		{[]string{"roles"}, 2, []string{"toolhost roles: missing command", "usage: toolhost roles COMMAND", "commands: list, show, create, set-groups, set-deferred, delete"}},
		{[]string{"roles", "create"}, 2, []string{"toolhost roles create: got 0 arguments, want 1", "usage: toolhost roles create [flags] NAME"}},
		{[]string{"roles", "create", "a", "b"}, 2, []string{"got 2 arguments, want 1"}},
		{[]string{"roles", "list", "-groups", "x"}, 2, []string{"toolhost roles list: flag provided but not defined: -groups", "usage: toolhost roles list [flags]"}},
		{[]string{"validate", "extra"}, 2, []string{"got 1 argument, want none"}},
		{[]string{"call"}, 2, []string{"usage: toolhost call [flags] TOOL [JSON-ARGS]"}},
		{[]string{"call", "add_note", "[1]"}, 2, []string{"JSON-ARGS must be a JSON object"}},
		{[]string{"mcp"}, 2, []string{"toolhost mcp: -role is required", "usage: toolhost mcp COMMAND [flags] [ARGS]", "toolhost mcp [flags]"}},
		{[]string{"mcp", "inspect"}, 2, []string{`give the server's command after "--", or -url URL`, "usage: toolhost mcp inspect [flags] -- COMMAND [ARGS...]"}},
		{[]string{"mcp", "inspect", "-url", "http://127.0.0.1:1/mcp", "--", "server"}, 2, []string{"the flags go before the command"}},
		{[]string{"mcp", "inspect", "npx", "server", "-tool-prefix", "p"}, 2, []string{`toolhost mcp inspect: -tool-prefix after the command is the command's own: toolhost mcp inspect's flags go before the command`}},
		{[]string{"tokens", "create"}, 2, []string{"give -role R or -metrics"}},
		{[]string{"run", "task"}, 2, []string{"toolhost run: -role is required"}},
		{[]string{"agents", "send", "agent_x"}, 2, []string{"got 1 argument, want 2", "usage: toolhost agents send [flags] ID MESSAGE"}},
		{[]string{"new"}, 2, []string{"toolhost new: missing command", "commands: module"}},
		{[]string{"version", "-json", "x"}, 2, []string{"got 1 argument, want none"}},
		{[]string{"validate", "-config", missing}, 1, []string{"missing.hcl"}},
	} {
		code, out, errOut := runCLI(tt.args...)
		name := strings.TrimSpace("toolhost " + strings.Join(tt.args, " "))
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", name, code, tt.code, errOut)
		}
		switch {
		case tt.code == 0 && (errOut != "" || !strings.HasPrefix(out, "usage: toolhost")):
			t.Errorf("%s: help not on stdout alone; stdout:\n%s\nstderr:\n%s", name, out, errOut)
		case tt.code == 2 && out != "":
			t.Errorf("%s: a usage error printed on stdout:\n%s", name, out)
		}
		rest := errOut
		for _, s := range tt.stderr {
			i := strings.Index(rest, s)
			if i < 0 {
				t.Errorf("%s: stderr lacks %q (in order); stderr:\n%s", name, s, errOut)
				break
			}
			rest = rest[i+len(s):]
		}
	}
}

// TestFlagsAnywhere: flags are read before, between and after positional
// arguments; "--" makes the rest positional (as a flag's value it is a
// value); a command whose arguments are a command line reads flags only
// before it.
func TestFlagsAnywhere(t *testing.T) {
	for _, tt := range []struct {
		args       []string
		flagsFirst bool
		pos        []string
		name       string
		asJSON     bool
	}{
		{[]string{"tester", "-name", "n"}, false, []string{"tester"}, "n", false},
		{[]string{"-name", "n", "tester"}, false, []string{"tester"}, "n", false},
		{[]string{"a", "-json", "b", "--name=n"}, false, []string{"a", "b"}, "n", true},
		{[]string{"a", "-json=false", "b"}, false, []string{"a", "b"}, "", false},
		{[]string{"a", "--", "-json", "-name", "n"}, false, []string{"a", "-json", "-name", "n"}, "", false},
		{[]string{"-name", "--", "a"}, false, []string{"a"}, "--", false},
		{[]string{"-", "-json"}, false, []string{"-"}, "", true},
		{[]string{"-json", "npx", "-y", "server", "-x"}, true, []string{"npx", "-y", "server", "-x"}, "", true},
		{[]string{"-name", "n", "--", "cmd", "-json"}, true, []string{"cmd", "-json"}, "n", false},
	} {
		u := &usage{name: "test", args: "[ARG...]", max: -1, flagsFirst: tt.flagsFirst, summary: "a test", example: "toolhost test"}
		fs := newFlags(u, nil, nil)
		name := fs.String("name", "", "a name")
		asJSON := fs.Bool("json", false, "JSON")
		if code, ok := fs.parse(tt.args); !ok {
			t.Errorf("%q: parse failed with exit %d", tt.args, code)
			continue
		}
		if !slices.Equal(fs.Args(), tt.pos) || *name != tt.name || *asJSON != tt.asJSON {
			t.Errorf("%q: args %q, -name %q, -json %v; want %q, %q, %v", tt.args, fs.Args(), *name, *asJSON, tt.pos, tt.name, tt.asJSON)
		}
	}
}

// TestVersion: `toolhost version` says the build's version, the one MCP
// clients get (TestMCPStdio compares it with serverInfo.version through a
// real `toolhost mcp`), and its Go version; -json says the same.
func TestVersion(t *testing.T) {
	code, out, errOut := runCLI("version")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "toolhost "+toolhost.Version()+"\n") || !strings.Contains(out, "\ngo        "+runtime.Version()+"\n") {
		t.Errorf("toolhost version: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	code, out, errOut = runCLI("version", "-json")
	var b toolhost.BuildInfo
	if err := json.Unmarshal([]byte(out), &b); code != 0 || errOut != "" || err != nil {
		t.Fatalf("toolhost version -json: exit %d, %v, stderr %q, stdout:\n%s", code, err, errOut, out)
	}
	if b != toolhost.Build() || b.Version != toolhost.Version() || b.GoVersion != runtime.Version() {
		t.Errorf("toolhost version -json = %+v, want %+v", b, toolhost.Build())
	}
}

// TestToolsCell: the groups table's TOOLS cell holds every tool that fits
// in its width, then how many more there are; never past the width.
func TestToolsCell(t *testing.T) {
	names := []string{"read_file", "write_file", "edit_file", "list_dir", "find_files", "grep"}
	for _, tt := range []struct {
		names []string
		width int
		want  string
	}{
		{names, 200, "read_file, write_file, edit_file, list_dir, find_files, grep"},
		{names, 60, "read_file, write_file, edit_file, list_dir, find_files, grep"},
		{names, 59, "read_file, write_file, edit_file, list_dir, … +2 more"},
		{names, 32, "read_file, write_file, … +4 more"},
		{names, 31, "read_file, … +5 more"},
		{names, 20, "read_file, … +5 more"},
		{names, 19, "6 tools"},
		{nil, 10, ""},
		{[]string{"a_very_long_tool_name_indeed"}, 10, "1 tool"},
	} {
		got := toolsCell(tt.names, tt.width)
		if got != tt.want {
			t.Errorf("toolsCell(%d names, %d) = %q, want %q", len(tt.names), tt.width, got, tt.want)
		}
	}
}

// TestGroupsTableWidth: the groups table keeps within the width, where the
// TOOLS column once held every tool's name: the tools that fit and how
// many more, the description cut.
func TestGroupsTableWidth(t *testing.T) {
	tools := make([]string, 60)
	for i := range tools {
		tools[i] = fmt.Sprintf("tool_number_%02d", i)
	}
	groups := []host.GroupInfo{
		{ID: "many", Description: "Sixty tools, " + strings.Repeat("and a long description ", 10), Tools: tools, Source: host.SourceInfo{Kind: "plugin", Name: "many", State: host.StateRunning, Pid: 4242}},
		{ID: "few", Description: "Two.", Tools: []string{"a", "b"}, Source: host.SourceInfo{Kind: "builtin", Name: "few", State: host.StateRunning}},
	}
	for _, tt := range []struct {
		width int
		tools string
	}{
		{100, "tool_number_00, … +59 more  Sixty tools, and a "},
		{120, "tool_number_00, tool_number_01, … +58 more  Sixty tools, and a "},
		{200, "tool_number_05, tool_number_06, … +53 more  Sixty tools, and a "},
	} {
		var b strings.Builder
		printGroups(&b, groups, tt.width)
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if n := len([]rune(line)); n > tt.width {
				t.Errorf("width %d: a line of %d characters: %q", tt.width, n, line)
			}
		}
		if !strings.Contains(b.String(), tt.tools) || !strings.Contains(b.String(), "…\n") || !strings.Contains(b.String(), "  a, b  ") {
			t.Errorf("width %d: the table has no %q, or an uncut description:\n%s", tt.width, tt.tools, b.String())
		}
	}
}
