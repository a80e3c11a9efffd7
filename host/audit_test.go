package host

import (
	"context"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/store"
)

// auditProbe is a group whose tool looks, while it runs, for its own call's
// tool_call.started event on disk.
type auditProbe struct {
	okProvider
	st    *store.Store
	found chan bool
}

func (p auditProbe) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	evs, err := p.st.Events(ctx, store.EventFilter{Call: req.Context.CallID, Type: store.EventCallStarted})
	p.found <- err == nil && len(evs) == 1
	return &toolhost.Result{OK: true}, nil
}

// TestStrictAuditCommitsBeforeDispatch: with audit { mode = "strict" }, a
// tool runs only once its call's started event is on disk, for each of
// several concurrent calls. The attack: a host killed right after
// dispatching leaves no trace of a call that ran.
func TestStrictAuditCommitsBeforeDispatch(t *testing.T) {
	st := propertyStore(t)
	h := newTestHost(t, &config.Config{Audit: config.Audit{Mode: "strict"}}, st)
	p := auditProbe{st: st, found: make(chan bool, 8)}
	spec := toolhost.GroupSpec{ID: "audited", Description: "audited", Tools: []toolhost.ToolSpec{tool("touch")}}
	if err := h.register(&Group{Spec: spec, Kind: SourcePlugin, SourceName: "audited", Provider: p}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "touch", Arguments: []byte(`{}`)})
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !<-p.found {
			t.Error("a tool ran before its call's started event was written")
		}
	}
}
