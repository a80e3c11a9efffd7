package agents_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// onPostgres is a start tune that puts the host's store on the PostgreSQL
// database dsn, with artifacts' bytes in the database.
func onPostgres(t *testing.T, dsn string) func(*config.Config, *host.Options) {
	return func(cfg *config.Config, o *host.Options) {
		st, err := store.OpenWith(context.Background(), t.TempDir(), store.Options{Driver: store.DriverPostgres, DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg.Store.Artifacts = "database"
		o.Store = st
	}
}

// TestTwoHostsShareAgentsArtifactsAndTrees: two hosts with runtimes on one
// PostgreSQL database: an artifact put through A (its bytes in the
// database) is read through B; an agent whose calls ran on both hosts has
// one event tree, the same from either.
func TestTwoHostsShareAgentsArtifactsAndTrees(t *testing.T) {
	dsn := pgtest.Start(t)
	a := start(t, `{"roles": {}}`, "", "", "", onPostgres(t, dsn))
	b := start(t, `{"roles": {}}`, "", "", "", onPostgres(t, dsn))
	ctx := context.Background()
	call := func(h *host.Host, agent, tool string, args any) *toolhost.Result {
		t.Helper()
		raw, _ := json.Marshal(args)
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: raw, Context: toolhost.CallContext{AgentID: agent}})
		if err != nil || !res.OK {
			t.Fatalf("%s: %+v, %v", tool, res, err)
		}
		return res
	}
	a.createRole("keeper", "artifact", "workspace")
	agent, err := a.h.Agents().Create(ctx, "keeper", store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "B knows the agent A created", func() bool { _, ok := b.h.Agents().Get(agent.ID); return ok })
	put := call(a.h, agent.ID, "put_artifact", map[string]any{"name": "note.txt", "content": "shared across hosts"})
	id, _ := put.Meta[toolhost.MetaStructuredContent].(map[string]any)["id"].(string)
	if got := call(b.h, agent.ID, "get_artifact", map[string]any{"id": id}); got.Stdout != "shared across hosts" {
		t.Fatalf("the artifact read through B: %q", got.Stdout)
	}
	call(b.h, agent.ID, "get_workspace_info", map[string]any{})
	for _, e := range []*env{a, b} {
		if err := e.h.Events().Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, e := range map[string]*env{"A": a, "B": b} {
		tree, err := agents.Tree(ctx, e.h.Store(), agent.ID)
		if err != nil {
			t.Fatal(err)
		}
		var calls []string
		for _, n := range tree.Children {
			if n.Kind == "call" {
				calls = append(calls, strings.Fields(n.Title)[0])
			}
		}
		if strings.Join(calls, ",") != "put_artifact,get_artifact,get_workspace_info" {
			t.Errorf("the tree read through %s holds the calls %v, want those made on A and B in order", name, calls)
		}
	}
}
