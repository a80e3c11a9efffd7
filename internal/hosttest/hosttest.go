// Package hosttest holds what the tests of several packages do with a
// host.
package hosttest

import (
	"time"

	"github.com/toolhost/toolhost/host"
)

// AwaitRunning polls h until every configured module is running, for at
// most within, and returns the modules still not running then, each as
// "NAME: STATE LAST_ERROR"; none once they all are. Under load a module may
// miss its first start and come up on a restart.
func AwaitRunning(h *host.Host, within time.Duration) []string {
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		var down []string
		for _, p := range h.Plugins() {
			if p.State != host.StateRunning {
				down = append(down, p.Name+": "+string(p.State)+" "+p.LastError)
			}
		}
		if len(down) == 0 || time.Now().After(deadline) {
			return down
		}
	}
}
