package host

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/toolhost/toolhost/store"
)

// TestDeadRunsCallsAreClosed: at start, a host closes the calls that a run
// of its own whose process died left open (tool_call.failed, cancelled,
// host_exited), and leaves alone those of a run that still runs (a CLI
// beside serve) and of another host on the same store. The attack it
// stops: a SIGKILLed host leaves calls in the audit log with a start and no
// outcome, forever.
func TestDeadRunsCallsAreClosed(t *testing.T) {
	ctx := context.Background()
	st := propertyStore(t)
	dir := st.Dir()
	id, err := hostID(dir)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadRun, _ := st.BeginRun(ctx, id, dead.Process.Pid, "1")
	liveRun, _ := st.BeginRun(ctx, id, os.Getpid(), procStart(os.Getpid()))
	otherRun, _ := st.BeginRun(ctx, "host_other", dead.Process.Pid, "1")
	w := st.NewEventWriter(nil)
	started := func(call string, run store.Run) {
		w.Emit(store.Event{Type: store.EventCallStarted, CallID: call, Tool: "write_file", Group: "workspace", Role: "dev", AgentID: "agent_1",
			Payload: map[string]any{"run": run.ID}})
	}
	started("in-limbo", deadRun)
	started("done", deadRun)
	w.Emit(store.Event{Type: store.EventCallCompleted, CallID: "done", Tool: "write_file"})
	started("still-running", liveRun)
	started("elsewhere", otherRun)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	h := newTestHost(t, nil, st)
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for call, closed := range map[string]bool{"in-limbo": true, "done": false, "still-running": false, "elsewhere": false} {
		evs, _ := h.Events().List(ctx, store.EventFilter{Call: call, Type: store.EventCallFailed})
		if got := len(evs) == 1; got != closed {
			t.Errorf("%s: closed %v, want %v (%+v)", call, got, closed, evs)
			continue
		}
		if closed {
			e := evs[0]
			if e.Payload["error_class"] != "host_exited" || e.Payload["code"] != "cancelled" || e.Payload["run"] != deadRun.ID ||
				e.Tool != "write_file" || e.AgentID != "agent_1" || e.Role != "dev" {
				t.Errorf("%s closed with %+v", call, e)
			}
		}
	}
	if runs, _ := st.OpenRuns(ctx, id, ""); len(runs) != 2 { // the live one and the new host's
		t.Errorf("open runs after the start: %+v", runs)
	}
	h.Close()
	if runs, _ := st.OpenRuns(ctx, id, ""); len(runs) != 1 || runs[0].ID != liveRun.ID {
		t.Errorf("open runs after the host closed: %+v", runs)
	}
}
