package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/internal/proctest"
)

// TestCodeMode does the code-mode tasks each way once, through the
// agent runtime on a host with the workspace and network modules built
// here, as the bench does: every way must reach the task's answer (the
// measurement fails otherwise), and its section and summary lines render.
func TestCodeMode(t *testing.T) {
	dir := t.TempDir()
	if err := proctest.BuildModules("..", dir, "workspace", "network"); err != nil {
		t.Fatal(err)
	}
	res, err := measureCodeMode(context.Background(), dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tasks) != len(codeTasks) {
		t.Fatalf("%d tasks measured", len(res.Tasks))
	}
	for _, task := range res.Tasks {
		if len(task.Runs) != len(codeWays) {
			t.Fatalf("%s: %d ways", task.Name, len(task.Runs))
		}
		for _, r := range task.Runs {
			if r.Turns < 2 || r.Calls < 1 || r.Defs <= 0 || r.Said <= 0 || r.Read <= 0 || r.Prompt <= r.tokens()-r.Said {
				t.Errorf("%s, %s: %+v", task.Name, r.Way, r)
			}
			if r.Way == wayScript && (r.transcript() != "run_script → answer" || r.ScriptDef <= 0) {
				t.Errorf("%s, the script: %d tokens of run_script's definition, %s", task.Name, r.ScriptDef, r.transcript())
			}
		}
	}
	var lines []string
	goals := 0
	res.checks(func(name, fig, base string, v, maxV, minV float64) {
		lines = append(lines, fmt.Sprintf("%s: %s / %s = %.3f (target %.2f)", name, fig, base, v, maxV))
		if maxV > 0 {
			goals++
		}
	})
	// One search_files does the TODO task: it alone is held to no goal.
	if goals != 2*(len(codeTasks)-1) {
		t.Errorf("%d goals in the summary, want two for each multi-step task", goals)
	}
	var b strings.Builder
	res.write(func(f string, a ...any) { fmt.Fprintf(&b, f+"\n", a...) })
	if len(lines) != 3*len(codeTasks) || !strings.Contains(b.String(), "| 52: list_files → 50 turns of read_file → answer |") ||
		!strings.Contains(b.String(), "| 3: http_request → http_request×10 → answer |") ||
		!strings.Contains(b.String(), "| 13: 12 turns of http_request → answer |") {
		t.Fatalf("summary %q; section:\n%s", lines, b.String())
	}
	t.Logf("%s\n%s", strings.Join(lines, "\n"), b.String())
}
