package host

import (
	"context"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// TestFailureWithoutAnError: a module whose result is not ok and carries
// no error (an sdk.Result left at its zero value) fails its own call with
// tool_exec, recorded as failed; before, the host dereferenced the missing
// error writing the call's terminal event and panicked.
func TestFailureWithoutAnError(t *testing.T) {
	h := runHost(t, &config.Config{}, testOptions(t))
	ctx := context.Background()
	if err := h.Modules().Register(ctx, &sdk.Group{ID: "mute", Description: "Fails silently.", Tools: []sdk.Tool{
		sdk.NewTool("shrug", "Fails without saying why.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
			return &sdk.Result{}, nil
		}),
	}}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "shrug", Arguments: []byte(`{}`), Context: toolhost.CallContext{CallID: "silent"}})
	if err != nil || res.OK || res.Error == nil || res.Error.Code != toolhost.CodeToolExec || !strings.Contains(res.Error.Message, "without saying why") {
		t.Fatalf("result %+v, error %v", res, err)
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := h.Events().List(ctx, store.EventFilter{Call: "silent", Type: store.EventCallFailed})
	if err != nil || len(evs) != 1 || evs[0].Payload["code"] != string(toolhost.CodeToolExec) {
		t.Fatalf("failed events %+v, %v", evs, err)
	}
}
