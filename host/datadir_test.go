package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
)

// TestDataDirMadePrivate: a data directory left readable by other users
// (conversations, call results, outputs, the admin token) is tightened when
// the host starts, and the host says so.
func TestDataDirMadePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "outputs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "outputs")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "outputs", "call.log")
	if err := os.WriteFile(out, []byte("secret output"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf proctest.Buffer
	h, err := New(&config.Config{DataDir: dir}, &Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "outputs"): 0o700, out: 0o600, filepath.Join(dir, "toolhost.db"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	if log := buf.String(); !strings.Contains(log, "[WARN]") || !strings.Contains(log, "made it private") || !strings.Contains(log, "paths=3") {
		t.Errorf("log = %q", log)
	}
}
