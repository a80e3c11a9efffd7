package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// TestRetentionPassAtStart: a host with audit { retention } runs a pass as
// it starts: the events older than the retention are exported and
// deleted, the pass is recorded as an event with its counts, and /metrics
// shows the counts, the time of the pass and the events' bytes.
func TestRetentionPassAtStart(t *testing.T) {
	ctx := context.Background()
	st := propertyStore(t)
	w := st.NewEventWriter(nil)
	old := time.Now().Add(-72 * time.Hour)
	const n = 50
	for i := range n {
		w.Emit(store.Event{Time: old.Add(time.Duration(i) * time.Second), Type: store.EventCallStarted})
	}
	w.Emit(store.Event{Type: store.EventCallCompleted})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h := runHost(t, &config.Config{Audit: config.Audit{Retention: 24 * time.Hour, Export: t.TempDir()}}, &Options{Store: st})
	var passes []store.Event
	deadline := time.Now().Add(time.Minute)
	for len(passes) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no events.retention event within a minute of the start")
		}
		if err := h.Events().Flush(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		if passes, err = h.Events().List(ctx, store.EventFilter{Type: eventRetention}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p := passes[0].Payload; p["exported"] != float64(n) || p["deleted"] != float64(n) || len(p["files"].([]any)) != 1 {
		t.Fatalf("the pass's event: %v, want %d exported and deleted into one file", p, n)
	}
	left, err := h.Events().List(ctx, store.EventFilter{Type: store.EventCallStarted})
	if err != nil || len(left) != 0 {
		t.Fatalf("%d old events left, %v", len(left), err)
	}
	for name, want := range map[string]float64{"toolhost_events_exported_total": n, "toolhost_events_deleted_total": n} {
		if v, ok := gathered(t, h.Metrics(), name); !ok || v != want {
			t.Errorf("%s = %v, %v; want %v", name, v, ok, want)
		}
	}
	for name, labels := range map[string][]string{"toolhost_events_retention_last_pass_timestamp_seconds": nil, "toolhost_storage_bytes": {"kind=events"}} {
		if v, ok := gathered(t, h.Metrics(), name, labels...); !ok || v <= 0 {
			t.Errorf("%s%v = %v, %v; want > 0", name, labels, v, ok)
		}
	}
}

// TestEndedAgentsRemoved: a host removes the agents that ended longer ago
// than store { agent_retention }, from the store and from its directory,
// and counts them in /metrics; an agent that has not ended stays.
func TestEndedAgentsRemoved(t *testing.T) {
	ctx := context.Background()
	h := runHost(t, &config.Config{Store: config.Store{AgentRetention: time.Second}}, nil)
	ended, err := h.Agents().Create(ctx, store.RootRole, store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	live, err := h.Agents().Create(ctx, store.RootRole, store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store().TerminateAgent(ctx, ended.ID, "the MCP session ended"); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the ended agent removed", func() bool {
		_, err := h.Store().Agent(ctx, ended.ID)
		_, cached := h.Agents().Get(ended.ID)
		return errors.Is(err, store.ErrNotFound) && !cached
	})
	if v, ok := gathered(t, h.Metrics(), "toolhost_agents_removed_total"); !ok || v != 1 {
		t.Errorf("toolhost_agents_removed_total = %v, %v; want 1", v, ok)
	}
	if a, err := h.Store().Agent(ctx, live.ID); err != nil || a.Status != store.StatusActive {
		t.Errorf("the live agent: %+v %v", a, err)
	}
}
