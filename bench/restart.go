package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/protocol"
)

// restartResult holds the kill/restart timings and their baseline.
type restartResult struct {
	Backoff time.Duration   // the configured restart backoff
	Gone    []time.Duration // SIGKILL → group unregistered (seen by a Watch callback)
	Back    []time.Duration // SIGKILL → group registered again, by a new process
	Start   []time.Duration // baseline: a plugin's start, launch → configured and described
}

// measureRestart kills the no-op plugin of an in-process host reps times
// and times how soon its group goes and comes back, as the host's Watch
// callbacks see it; and, alternately, launches the plugin directly
// (protocol.Launch, Configure, Describe) as the baseline.
func measureRestart(ctx context.Context, tmp, noop string, reps int) (*restartResult, error) {
	const backoff = 10 * time.Millisecond
	h, err := startHost(ctx, tmp, fmt.Sprintf("plugin \"noop\" {\n  path = %q\n  restart = \"always\"\n  max_restarts = 1000\n}\n", noop),
		&host.Options{RestartBackoff: backoff, MaxBackoff: backoff, HealthyAfter: time.Millisecond})
	if err != nil {
		return nil, err
	}
	defer h.Close()

	// Each change the host announces is checked here: the time at which
	// the group was first seen gone, and then back as a new registration.
	var mu sync.Mutex
	var old *host.Group
	var gone, back time.Time
	changed := make(chan struct{}, 1)
	cancel := h.Watch(func() {
		now := time.Now()
		g, ok := h.Modules().Group("noop")
		mu.Lock()
		switch {
		case !ok && gone.IsZero():
			gone = now
		case ok && g != old && back.IsZero():
			back = now
		}
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer cancel()

	res := &restartResult{Backoff: backoff}
	for range reps {
		start, err := launchOnce(ctx, noop)
		if err != nil {
			return nil, err
		}
		res.Start = append(res.Start, start)

		time.Sleep(20 * time.Millisecond) // let the host settle
		pid := groupPid(h, "noop")
		g, ok := h.Modules().Group("noop")
		if pid == 0 || !ok {
			return nil, fmt.Errorf("kill/restart: the no-op group is not registered")
		}
		mu.Lock()
		old, gone, back = g, time.Time{}, time.Time{}
		mu.Unlock()
		t0 := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return nil, err
		}
		deadline := time.After(5 * time.Second)
		for done := false; !done; {
			select {
			case <-changed:
			case <-deadline:
				return nil, fmt.Errorf("kill/restart: the group did not come back within 5s")
			}
			mu.Lock()
			if !back.IsZero() {
				if gone.IsZero() || gone.After(back) {
					gone = back // not seen gone apart from coming back: bound it
				}
				res.Gone, res.Back = append(res.Gone, gone.Sub(t0)), append(res.Back, back.Sub(t0))
				done = true
			}
			mu.Unlock()
		}
	}
	logf("  kill → unregistered p50 %s, → back p50 %s (backoff %s), plugin start p50 %s",
		fmtDur(median(res.Gone)), fmtDur(median(res.Back)), fmtDur(backoff), fmtDur(median(res.Start)))
	return res, nil
}

// groupPid returns the pid of the process serving the group, 0 when the
// group is not registered.
func groupPid(h *host.Host, id string) int {
	if _, ok := h.Modules().Group(id); !ok {
		return 0
	}
	for _, g := range h.Modules().Groups() {
		if g.ID == id {
			return g.Source.Pid
		}
	}
	return 0
}

// launchOnce starts the no-op plugin the way the host does, without a host:
// launch and handshake, Configure, Describe; it returns how long that took
// and stops the plugin.
func launchOnce(ctx context.Context, noop string) (time.Duration, error) {
	t := time.Now()
	proc, err := protocol.Launch(protocol.Options{Path: noop})
	if err != nil {
		return 0, err
	}
	defer proc.Stop()
	if err := proc.Provider.Configure(ctx, &toolhost.ConfigureRequest{Config: []byte("{}")}); err != nil {
		return 0, err
	}
	if _, err := proc.Provider.Describe(ctx, &toolhost.DescribeRequest{}); err != nil {
		return 0, err
	}
	return time.Since(t), nil
}
