// Package sandboxtest runs a package's tests again inside a sandbox, to show
// that a module works confined as a block's sandbox would confine it.
package sandboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sandbox"
)

// insideEnv marks the test binary's run inside the sandbox.
const insideEnv = "TOOLHOST_TEST_INSIDE_SANDBOX"

// Inside reports whether this test binary runs inside [RerunInside]'s sandbox.
func Inside() bool { return os.Getenv(insideEnv) != "" }

// RerunInside runs every other test of this test binary again inside a
// sandbox under policy (with the module, the test binary and the Go
// toolchain added read-only, the build cache read-write), and fails t with
// their output if any fails there. Call it from a test that returns at once
// when [Inside].
func RerunInside(t *testing.T, policy sandbox.Policy) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// The Go toolchain, the module and its caches, for tests that build a
	// plugin (sdktest.Build): read-only but the build cache.
	var goenv struct{ GOROOT, GOCACHE, GOMODCACHE, GOMOD string }
	if out, err := exec.Command("go", "env", "-json", "GOROOT", "GOCACHE", "GOMODCACHE", "GOMOD").Output(); err != nil || json.Unmarshal(out, &goenv) != nil {
		t.Fatalf("go env: %v", err)
	}
	policy.ReadOnly = append(policy.ReadOnly, filepath.Dir(exe), filepath.Dir(goenv.GOMOD), goenv.GOROOT, goenv.GOMODCACHE)
	policy.ReadWrite = append(policy.ReadWrite, goenv.GOCACHE)
	cmd, err := sandbox.Command(context.Background(), &policy, []string{exe, "-test.count=1", "-test.v", "-test.skip", "^" + t.Name() + "$"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Dir, cmd.Stdout, cmd.Stderr = wd, &out, &out
	cmd.Env = append(os.Environ(), insideEnv+"=1", "GOCACHE="+goenv.GOCACHE, "GOMODCACHE="+goenv.GOMODCACHE,
		"GOFLAGS=-mod=readonly", "GOPROXY=off", "GOTOOLCHAIN=local", "PATH="+filepath.Join(goenv.GOROOT, "bin")+":"+os.Getenv("PATH"))
	err = cmd.Run()
	passed := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "--- PASS: ") {
			passed++
		}
	}
	if err != nil || passed == 0 {
		t.Fatalf("inside the sandbox (%v, %d tests passed):\n%s", err, passed, out.String())
	}
	t.Logf("%d tests passed again inside the sandbox", passed)
}
