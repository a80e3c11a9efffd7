package host

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/store"
)

// TestRestartRunsOnlyTheVerifiedBinary is the attack of an agent that could
// write a plugin's executable: it replaces the binary with a wrapper, then
// crashes the plugin so that the host restarts it. The host refuses the
// changed executable with policy, the group stays down, a plugin.refused
// event says why, and the wrapper never runs (it ran as the host's user
// before: its marker file appeared). The rows cover an unconfined plugin
// and one in its default sandbox.
func TestRestartRunsOnlyTheVerifiedBinary(t *testing.T) {
	for _, tt := range []struct {
		name string
		pol  *sandbox.Policy
	}{{"sandbox off", &sandbox.Policy{Off: true}}, {"default sandbox", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "victim")
			copyExecutable(t, bin)
			p := testPlugin("victim", "good", nil)
			p.Path, p.Sandbox = bin, tt.pol
			h := startHost(t, p)
			st := plugin(h, "victim")
			if st.State != StateRunning {
				t.Fatalf("plugin not running: %+v", st)
			}
			group := st.Group

			marker := filepath.Join(dir, "wrapper-ran")
			wrapper := fmt.Sprintf("#!/bin/sh\nid > %q\nexec %q \"$@\"\n", marker, os.Args[0])
			// Replace it as write_file does: a new file renamed over it.
			if err := os.WriteFile(bin+".tmp", []byte(wrapper), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(bin+".tmp", bin); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			proctest.Eventually(t, "the changed plugin is refused", func() bool { return plugin(h, "victim").State == StateFailed })
			st = plugin(h, "victim")
			if st.ErrorCode != toolhost.CodePolicy || !strings.Contains(st.LastError, "changed since the host started it") {
				t.Errorf("refused with %s %q, want policy and why", st.ErrorCode, st.LastError)
			}
			if _, ok := h.mgr.Get(group); ok {
				t.Error("the group is registered again")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the replaced executable ran")
			}
			if err := h.Events().Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			evs, err := h.Events().List(context.Background(), store.EventFilter{Type: store.EventPluginRefused})
			if err != nil || len(evs) != 1 || evs[0].Payload["code"] != string(toolhost.CodePolicy) ||
				!strings.Contains(fmt.Sprint(evs[0].Payload["error"]), "changed since the host started it") {
				t.Fatalf("plugin.refused events: %+v, %v", evs, err)
			}
		})
	}
}

// copyExecutable copies this test binary to dst.
func copyExecutable(t *testing.T, dst string) {
	t.Helper()
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFileIdentityChanges: a file rewritten in place with bytes of the same
// length, as cp does to an executable no process runs, has another
// identity; so has a file renamed over it; a file left alone keeps its own.
func TestFileIdentityChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exe")
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	first, err := identify(path)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := identify(path); again != first {
		t.Fatalf("the same file: %+v, then %+v", first, again)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho two\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rewritten, _ := identify(path)
	if rewritten == first || first.diff(rewritten) != "rewritten" {
		t.Errorf("rewritten in place: %+v, was %+v", rewritten, first)
	}
	if err := os.WriteFile(path+".new", []byte("#!/bin/sh\necho three\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if replaced, _ := identify(path); first.diff(replaced) != "another file in its place" {
		t.Errorf("renamed over: %+v, was %+v (%s)", replaced, first, first.diff(replaced))
	}
}
