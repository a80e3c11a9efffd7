package procstat

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestNameWithParentheses: a command named "x) 1 2 (y" (spaces and
// parentheses, as any program may name itself) still gives its state and
// parent, and is found among its parent's descendants.
func TestNameWithParentheses(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(t.TempDir(), "x) 1 2 (y")
	if err := os.WriteFile(odd, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	f := Of(cmd.Process.Pid)
	if len(f) < 20 || f[1] != strconv.Itoa(os.Getpid()) || (f[0] != "S" && f[0] != "R") {
		t.Fatalf("fields %q: want state S or R, then parent %d", f, os.Getpid())
	}
	if !slices.Contains(Descendants(os.Getpid()), cmd.Process.Pid) {
		t.Fatalf("%d is not among the test's descendants %v", cmd.Process.Pid, Descendants(os.Getpid()))
	}
	if Of(-1) != nil || File(filepath.Join(t.TempDir(), "none")) != nil {
		t.Fatal("an unreadable stat file gave fields")
	}
}
