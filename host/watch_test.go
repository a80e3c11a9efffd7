package host

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// TestWatchersHearOfRoleChangesOnly: other connections commit all the time
// (the event writer, agents); watchers (MCP sessions) hear only of a change
// to the roles.
func TestWatchersHearOfRoleChangesOnly(t *testing.T) {
	dir := t.TempDir()
	h := runHost(t, &config.Config{DataDir: dir, Limits: config.Limits{Timeout: 5 * time.Second}}, &Options{StoreWatch: 5 * time.Millisecond})
	ctx := context.Background()
	g := &sdk.Group{ID: "quiet", Description: "A no-op.", Tools: []sdk.Tool{
		sdk.NewTool("noop", "Do nothing.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return nil, nil }),
	}}
	if err := h.Modules().Register(ctx, g); err != nil {
		t.Fatal(err)
	}
	var heard atomic.Int32
	defer h.Watch(func() { heard.Add(1) })()
	for range 50 {
		if _, err := callTool(t, h, "noop", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Agents().Create(ctx, store.RootRole, store.Agent{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // about 20 polls of the store, each seeing new commits
	if n := heard.Load(); n != 0 {
		t.Fatalf("watchers were told %d times of commits that changed no role", n)
	}
	other, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.CreateRole(ctx, store.Role{Name: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "the watchers hear of the new role", func() bool { return heard.Load() == 1 })
	if _, err := h.Roles().Get("elsewhere"); err != nil {
		t.Fatal(err)
	}
}
