package host

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/procstat"
	"github.com/toolhost/toolhost/store"
)

// hostIDFile names the file in the data directory that holds the host's
// id, which tells its runs on the store from other hosts' (several hosts
// may share one store).
const hostIDFile = "host.id"

// hostID returns the id of the host whose data directory is dir, made on
// first use.
func hostID(dir string) (string, error) {
	path := filepath.Join(dir, hostIDFile)
	for range 2 {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return string(bytes.TrimSpace(b)), nil
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, store.FileMode)
		if errors.Is(err, fs.ErrExist) {
			continue // another process made it: read theirs
		}
		if err != nil {
			return "", err
		}
		id := "host_" + strings.TrimPrefix(newCallID(), "call_")
		_, err = f.WriteString(id + "\n")
		return id, errors.Join(err, f.Close())
	}
	return "", errors.New(path + " is empty")
}

// procStart is process pid's start time (field 22 of /proc/PID/stat, in
// clock ticks since boot), which a reused pid does not share; "" when
// unknown, or when the process is a zombie (dead, not yet reaped).
func procStart(pid int) string {
	if f := procstat.Of(pid); len(f) > 19 && f[0] != "Z" {
		return f[19]
	}
	return ""
}

// alive reports whether a run's process still runs.
func alive(r store.Run) bool {
	if r.ProcStart != "" {
		return procStart(r.Pid) == r.ProcStart
	}
	return syscall.Kill(r.Pid, 0) == nil
}

// runLease is how long a renewal of the run's liveness holds
// (store.Store.RenewRun): the runtime block's lease, which bounds how long
// the other hosts take this one for alive after it died.
func (h *Host) runLease() time.Duration {
	return cmp.Or(h.cfg.Runtime.Lease, config.DefaultLease)
}

// renewRun renews the run's liveness every third of its lease until ctx
// ends; a renewal that fails is tried again at the next.
func (h *Host) renewRun(ctx context.Context) {
	t := time.NewTicker(h.runLease() / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := h.store.RenewRun(ctx, h.runID, time.Now().Add(h.runLease())); err != nil && ctx.Err() == nil {
			h.log.Warn("the run's liveness was not renewed: other hosts take it for dead once its lease passes", "error", err)
		}
	}
}

// hostExitedMessage is the error of a call that a dead run of the host
// left open.
const hostExitedMessage = "the host stopped; the call may or may not have run"

// beginRun records this process's run of the host, and closes the calls
// that earlier runs of the same host left open when their process died
// (SIGKILL, a crash, a lost machine): each gets its tool_call.failed, code
// cancelled, error_class host_exited, so that no call stays in limbo. Runs
// of other hosts on the same store, and live runs (a CLI beside serve), are
// left alone.
func (h *Host) beginRun(ctx context.Context) error {
	id, err := hostID(h.store.Dir())
	if err != nil {
		return err
	}
	run, err := h.store.BeginRun(ctx, id, os.Getpid(), procStart(os.Getpid()))
	if err != nil {
		return err
	}
	h.runID, h.hostID = run.ID, id
	if err := h.store.RenewRun(ctx, run.ID, time.Now().Add(h.runLease())); err != nil {
		return err
	}
	runs, err := h.store.OpenRuns(ctx, id, run.ID)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if alive(r) {
			continue
		}
		calls, err := h.store.OpenCalls(ctx, r)
		if err != nil {
			return err
		}
		for _, s := range calls {
			h.events.Emit(store.Event{Type: store.EventCallFailed, CallID: s.CallID, AgentID: s.AgentID, Role: s.Role, Tool: s.Tool,
				Group: s.Group, ParentID: s.ParentID, Payload: map[string]any{"code": toolhost.CodeCancelled, "error_class": "host_exited",
					"error": hostExitedMessage, "run": r.ID}})
		}
		if err := h.events.Flush(ctx); err != nil {
			return err
		}
		if _, err := h.store.CancelRunApprovals(ctx, r.ID); err != nil {
			return err
		}
		if err := h.store.EndRun(ctx, r.ID); err != nil {
			return err
		}
		if len(calls) > 0 {
			h.log.Warn("closed the calls a dead run of this host left open", "run", r.ID, "pid", r.Pid, "calls", len(calls))
		}
	}
	return nil
}
