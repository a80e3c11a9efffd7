package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
)

// TestReadiness: while a configured plugin's start is held back, /healthz
// answers 200 and /readyz 503 with the reason, and an API request waits;
// once the plugin has started, /readyz answers 200 and the request its
// answer.
func TestReadiness(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes-bin")
	if out, err := exec.Command("go", "build", "-o", notes, "../examples/notes").CombinedOutput(); err != nil {
		t.Fatalf("build notes: %v\n%s", err, out)
	}
	gate := filepath.Join(dir, "go")
	held := filepath.Join(dir, "notes")
	script := fmt.Sprintf("#!/bin/sh\nwhile [ ! -e %q ]; do sleep 0.01; done\nexec %q \"$@\"\n", gate, notes)
	if err := os.WriteFile(held, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := withTestToken(&config.Config{DataDir: filepath.Join(dir, "data"), Plugins: []config.Plugin{{Name: "notes", Kind: config.KindPlugin,
		Path: held, Restart: config.RestartNever, StartTimeout: proctest.Patience, Config: []byte("{}"),
		Sandbox: &sandbox.Policy{Off: true}}}}) // the script waits for a file of the test's
	h, err := host.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	srv := newHTTPServer(t, h, nil)
	started := make(chan error, 1)
	go func() { started <- h.Start(context.Background()) }()

	status := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := status("/healthz"); code != 200 {
		t.Errorf("healthz while starting = %d", code)
	}
	if code, body := status("/readyz"); code != 503 || !strings.Contains(body, "1 of 1 configured plugins have not had their first outcome") {
		t.Errorf("readyz while starting = %d %s", code, body)
	}
	groups := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/api/groups")
		if err != nil {
			groups <- 0
			return
		}
		resp.Body.Close()
		groups <- resp.StatusCode
	}()
	select {
	case code := <-groups:
		t.Fatalf("an API request was answered (%d) while the host started", code)
	case <-time.After(200 * time.Millisecond):
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if code := <-groups; code != 200 {
		t.Errorf("the waiting request, once started: %d", code)
	}
	if code, body := status("/readyz"); code != 200 || !strings.Contains(body, `"ready"`) {
		t.Errorf("readyz once started = %d %s", code, body)
	}
}
