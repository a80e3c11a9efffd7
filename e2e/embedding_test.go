package e2e

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEmbeddingRecipe follows docs/embedding.md as an embedder outside this
// repository does: beside a clone (here links to this checkout's files,
// with bin/plugins built by the test), a module of its own whose go.mod,
// config.hcl and main.go are the page's, built with the page's command
// without the network, runs and prints what the page says it prints.
func TestEmbeddingRecipe(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "embedding.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, m := range regexp.MustCompile("(?ms)^`myagent/([^`]+)`:\n\n```[a-z]*\n(.*?)^```\n").FindAllStringSubmatch(string(doc), -1) {
		files[m[1]] = m[2]
	}
	if names := slices.Sorted(maps.Keys(files)); !slices.Equal(names, []string{"config.hcl", "go.mod", "main.go"}) {
		t.Fatalf("docs/embedding.md shows the files %v, want config.hcl, go.mod and main.go", names)
	}
	blocks := regexp.MustCompile("(?ms)^```(sh)?\n(.*?)^```\n").FindAllStringSubmatch(string(doc), -1)
	var steps, sample string
	for _, b := range blocks {
		switch {
		case b[1] == "sh":
			steps = b[2]
		case strings.HasPrefix(b[2], "module workspace running\n"):
			sample = b[2]
		}
	}
	const copySum, run = "cp ../toolhost/go.sum .", "go run -mod=mod ."
	if !strings.Contains(steps, copySum) || !strings.Contains(steps, run) {
		t.Fatalf("the page's steps no longer say %q and %q:\n%s", copySum, run, steps)
	}
	if sample == "" {
		t.Fatal("the page shows no output starting with the module's state")
	}

	work := t.TempDir()
	clone := filepath.Join(work, "toolhost")
	entries, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case "bin", "data", "workspace", ".git":
			continue // what scripts/build, serve and git make
		}
		src, _ := filepath.Abs(filepath.Join("..", e.Name()))
		if err := os.MkdirAll(clone, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(src, filepath.Join(clone, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, filepath.Join(pluginDir, "workspace"), filepath.Join(clone, "bin", "plugins", "workspace"))
	mod := filepath.Join(work, "myagent")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	sh := exec.Command("sh", "-c", copySum+" && "+run)
	sh.Dir = mod
	// No network: the module cache holds every module toolhost builds with.
	sh.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := sh.CombinedOutput()
	t.Logf("%s && %s:\n%s", copySum, run, out)
	if err != nil {
		t.Fatalf("the recipe failed: %v", err)
	}

	// Every line of the page's sample is in the output, ids and numbers
	// aside.
	norm := func(s string) string {
		s = regexp.MustCompile(`agent_[0-9a-f]+…?`).ReplaceAllString(s, "agent_X")
		return regexp.MustCompile(`[0-9]+(\.[0-9]+)?`).ReplaceAllString(s, "N")
	}
	got := norm(string(out))
	for _, line := range strings.Split(strings.TrimSpace(sample), "\n") {
		if line != "…" && !strings.Contains(got, norm(line)+"\n") {
			t.Errorf("the output lacks the page's line %q", line)
		}
	}
	if strings.Contains(string(out), "✗") {
		t.Error("a step of the agent failed")
	}
	for _, f := range []string{"hello.txt", "demo/task.txt"} {
		if _, err := os.Stat(filepath.Join(mod, "workspace", f)); err != nil {
			t.Errorf("the page says the program leaves workspace/%s: %v", f, err)
		}
	}
}
