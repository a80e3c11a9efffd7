package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/store"
)

// TestReadmeDemo runs the README's agent demo, the command read from
// README.md as written, in a directory laid out as scripts/build lays out a
// clone (bin/toolhost, bin/plugins/, config.hcl and demo/ as shipped): it
// succeeds, the file its answer reports is in the workspace with the task
// in it, and the tree it prints shows every step done (✓).
func TestReadmeDemo(t *testing.T) {
	line := readmeCommand(t, "bin/toolhost run ")
	args := shellWords(t, line)
	if !strings.Contains(line, " -tree") || len(args) == 0 {
		t.Fatalf("the README's demo no longer prints its tree (-tree) or has no task: %s", line)
	}
	task := args[len(args)-1]

	dir := cloneLayout(t)
	stdout, stderr, err := asNewUser(dir, line)
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout, stderr)
	}
	out := stdout
	t.Logf("%s\n%s", line, out)

	// The file the answer reports, with the task in it.
	cfg, err := config.Load(filepath.Join(dir, "config.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`wrote (\S+) in the workspace\s*$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the answer reports no file written in the workspace:\n%s", out)
	}
	if got, err := os.ReadFile(filepath.Join(cfg.Workspace, m[1])); err != nil || string(got) != task+"\n" {
		t.Errorf("%s in the workspace: %q, %v; want the task %q", m[1], got, err, task+"\n")
	}

	// Every step of the tree is done, and the printed tree shows it so.
	id := regexp.MustCompile(`agent (agent_[0-9a-f]+) \(role root\) started`).FindStringSubmatch(stderr)
	if id == nil {
		t.Fatalf("stderr names no root agent:\n%s", stderr)
	}
	st, err := store.Open(context.Background(), cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tree, err := agents.Tree(context.Background(), st, id[1])
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	var check func(n *agents.Node)
	check = func(n *agents.Node) {
		switch n.Kind {
		case "call":
			calls++
			if n.Status != "ok" || !strings.Contains(out, n.Title) || !strings.Contains(n.Title, " ✓ ") {
				t.Errorf("step %q: %s, or not printed so", n.Title, n.Status)
			}
		case "turn", "agent":
			if n.Status == "failed" || n.Status == "running" {
				t.Errorf("%s %q: %s", n.Kind, n.Title, n.Status)
			}
		}
		for _, c := range n.Children {
			check(c)
		}
	}
	check(tree)
	if calls == 0 || strings.Contains(out, "✗") {
		t.Errorf("the tree shows %d tool calls, or a failed one:\n%s", calls, out)
	}
}

// TestReadmeTour runs the command lines of the README's tour, in order, as
// written, in a clone's layout with config.hcl as shipped: each succeeds,
// but one whose comment says "refused: CODE", which fails with that code.
// The lines that serve, print the page's address, run the agent demo
// (TestReadmeDemo's) or import a file of the user's are left out.
func TestReadmeTour(t *testing.T) {
	dir := cloneLayout(t)
	refused := regexp.MustCompile(`#.*refused: ([a-z_]+)`)
	ran := 0
	for _, line := range readmeCommands(t, "A short tour") {
		words := strings.Fields(line)
		if words[0] != "bin/toolhost" || slices.Contains([]string{"serve", "token", "run", "mcp"}, words[1]) {
			continue
		}
		ran++
		stdout, stderr, err := asNewUser(dir, line)
		if m := refused.FindStringSubmatch(line); m != nil {
			if err == nil || !strings.Contains(stdout+stderr, m[1]) {
				t.Errorf("%s: %v, want it refused with %s\nstdout:\n%s\nstderr:\n%s", line, err, m[1], stdout, stderr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout, stderr)
		}
	}
	if ran < 8 {
		t.Errorf("ran %d lines of the tour, want its CLI lines (8 or more)", ran)
	}
}

// cloneLayout returns a directory laid out as scripts/build lays out a
// clone: bin/toolhost, bin/plugins/ and config.hcl and demo/ as shipped.
func cloneLayout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for _, m := range []string{"workspace", "command", "network", "chrome"} {
		copyFile(t, filepath.Join(pluginDir, m), filepath.Join(bin, "plugins", m))
	}
	build(t, "../cmd/toolhost", filepath.Join(bin, "toolhost"))
	copyFile(t, filepath.Join("..", "config.hcl"), filepath.Join(dir, "config.hcl"))
	copyFile(t, filepath.Join("..", "demo", "agents.json"), filepath.Join(dir, "demo", "agents.json"))
	return dir
}

// asNewUser runs a command line with sh in dir, in a new user's
// environment (no TOOLHOST_ overrides), and returns its output.
func asNewUser(dir, line string) (stdout, stderr string, err error) {
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOOLHOST_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// readmeCommands returns the lines of the sh code blocks of README.md's
// section titled section, in order.
func readmeCommands(t *testing.T, section string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	in, code := false, false
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.TrimPrefix(line, "## ") == section
		case in && strings.HasPrefix(line, "```"):
			code = !code && line == "```sh"
		case in && code && strings.TrimSpace(line) != "":
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	if len(lines) == 0 {
		t.Fatalf("README.md has no sh lines under %q", section)
	}
	return lines
}

// readmeCommand returns the first line of README.md that starts with
// prefix.
func readmeCommand(t *testing.T, prefix string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, prefix) {
			return line
		}
	}
	t.Fatalf("README.md has no line starting with %q", prefix)
	return ""
}

// shellWords returns the words of a command line as sh splits them.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `words() { printf '%s\0' "$@"; }; words `+line).Output()
	if err != nil {
		t.Fatalf("splitting %s: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}
