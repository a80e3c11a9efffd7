package host

import (
	"context"
	"fmt"
	"time"
)

// Started is closed when [Host.Start] has finished: every configured plugin
// had its first outcome, and the host's roles and agents are loaded.
func (h *Host) Started() <-chan struct{} { return h.started }

// isStarted reports whether [Host.Start] has finished.
func (h *Host) isStarted() bool {
	select {
	case <-h.started:
		return true
	default:
		return false
	}
}

// Ready reports whether the host is ready to serve, or what it waits for:
// [Host.Start] has not finished (some configured plugins have not had their
// first outcome yet: running, or failed and waiting to restart), the host is
// closing, the store does not answer, or, in strict audit mode, the store
// cannot write events (its disk is full), so every call would be refused. A
// load balancer's readiness probe asks it; liveness is the process
// answering at all.
func (h *Host) Ready(ctx context.Context) error {
	h.mu.Lock()
	closed, sups := h.closed, h.plugins
	h.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("the host is closing")
	case !h.isStarted():
		waiting := 0
		for _, s := range sups {
			select {
			case <-s.ready:
			default:
				waiting++
			}
		}
		return fmt.Errorf("starting: %d of %d configured plugins have not had their first outcome", waiting+len(h.cfg.Plugins)-len(sups), len(h.cfg.Plugins))
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := h.store.Ping(ctx); err != nil {
		return fmt.Errorf("the store does not answer: %w", err)
	}
	if err := h.events.Down(); err != nil && h.cfg.Audit.Mode == "strict" {
		return fmt.Errorf("strict audit refuses every call while its events cannot be written: %w", err)
	}
	return nil
}

// Degraded reports what a host serves without, by check, or nil when
// nothing: "events" while the store cannot write the audit events (its disk
// is full, or its database unavailable), which then wait in memory, up to
// [Options.EventQueue], to be written once it can. In strict audit mode
// that makes the host not [Host.Ready] instead.
func (es Events) Degraded() map[string]string {
	h := es.h
	if err := h.events.Down(); err != nil {
		return map[string]string{"events": "the events wait in memory to be written: " + err.Error()}
	}
	return nil
}
