// Package hosttest holds what the tests of several packages do with a
// host.
package hosttest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
)

// Run starts a host on the config src, closed when the test ends, and
// waits for every module to run ([AwaitRunning], up to a minute).
func Run(t testing.TB, src string) *host.Host {
	t.Helper()
	cfg, err := config.Parse([]byte(src), filepath.Join(t.TempDir(), "config.hcl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := Start(t, cfg)
	if down := AwaitRunning(h, time.Minute); len(down) > 0 {
		t.Fatalf("modules not running: %v", down)
	}
	return h
}

// Start starts a host on cfg, closed when the test ends.
func Start(t testing.TB, cfg *config.Config) *host.Host {
	t.Helper()
	h, err := host.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

// AwaitRunning polls h until every configured module is running, for at
// most within, and returns the modules still not running then, each as
// "NAME: STATE LAST_ERROR"; none once they all are. Under load a module may
// miss its first start and come up on a restart.
func AwaitRunning(h *host.Host, within time.Duration) []string {
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		var down []string
		for _, p := range h.Modules().List() {
			if p.State != host.StateRunning {
				down = append(down, p.Name+": "+string(p.State)+" "+p.LastError)
			}
		}
		if len(down) == 0 || time.Now().After(deadline) {
			return down
		}
	}
}
