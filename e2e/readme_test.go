package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/runtime"
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

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for _, m := range []string{"workspace", "command", "network", "chrome"} {
		copyFile(t, filepath.Join(pluginDir, m), filepath.Join(bin, "plugins", m))
	}
	build(t, "../cmd/toolhost", filepath.Join(bin, "toolhost"))
	copyFile(t, filepath.Join("..", "config.hcl"), filepath.Join(dir, "config.hcl"))
	copyFile(t, filepath.Join("..", "demo", "agents.json"), filepath.Join(dir, "demo", "agents.json"))

	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = dir
	for _, kv := range os.Environ() { // a new user's environment: no overrides
		if !strings.HasPrefix(kv, "TOOLHOST_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, stdout.String(), stderr.String())
	}
	out := stdout.String()
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
	id := regexp.MustCompile(`agent (agent_[0-9a-f]+) \(role root\) started`).FindStringSubmatch(stderr.String())
	if id == nil {
		t.Fatalf("stderr names no root agent:\n%s", stderr.String())
	}
	st, err := store.Open(context.Background(), cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tree, err := runtime.Tree(context.Background(), st, id[1])
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	var check func(n *runtime.Node)
	check = func(n *runtime.Node) {
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
