package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RunWithModules is a TestMain that builds the first-party modules named
// (plugins/NAME below root, the repository's root as a path relative to the
// test's package) into a temporary directory, sets *dir to it, runs the
// tests, removes it and exits.
func RunWithModules(m *testing.M, root string, dir *string, names ...string) {
	tmp, err := os.MkdirTemp("", "toolhost-modules-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := BuildModules(root, tmp, names...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(tmp)
		os.Exit(1)
	}
	*dir = tmp
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// BuildModules builds the first-party modules named (plugins/NAME below
// root) into dir, each under its name.
func BuildModules(root, dir string, names ...string) error {
	for _, name := range names {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), filepath.Join(root, "plugins", name)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("build %s: %v\n%s", name, err, out)
		}
	}
	return nil
}
