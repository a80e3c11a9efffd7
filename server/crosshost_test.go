package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// pgHosts starts n hosts on one fresh PostgreSQL database, each with the
// in-process groups and a data directory of its own, as n machines behind a
// load balancer run; they stop when the test ends.
func pgHosts(t *testing.T, n int, cfg func() *config.Config, groups ...func() *sdk.Group) []*host.Host {
	t.Helper()
	dsn := pgtest.Start(t)
	out := make([]*host.Host, n)
	for i := range out {
		st, err := store.OpenWith(context.Background(), t.TempDir(), store.Options{Driver: store.DriverPostgres, DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		h, err := host.New(withTestToken(cfg()), &host.Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			if err := h.Modules().Register(context.Background(), g()); err != nil {
				t.Fatal(err)
			}
		}
		out[i] = h
	}
	return out
}

// TestRoleEditReachesOtherHosts: a role edited through host A's API changes
// what host B's MCP sessions and agents see: B's session is told
// (notifications/tools/list_changed; B hears of the edit from PostgreSQL,
// which nothing polls), and its next tools/list has the new group.
func TestRoleEditReachesOtherHosts(t *testing.T) {
	hosts := pgHosts(t, 2, func() *config.Config { return &config.Config{} },
		func() *sdk.Group { return group("console", "console_print") }, func() *sdk.Group { return group("notes", "note_add") })
	a, b := newHTTPServer(t, hosts[0], nil), newHTTPServer(t, hosts[1], nil)
	if code := do(t, "POST", a.URL+"/api/roles", map[string]any{"name": "writer", "toolGroups": []string{"console"}}, nil); code != 201 {
		t.Fatalf("create the role through A: %d", code)
	}
	names := func(cs *mcp.ClientSession) []string {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		slices.Sort(out)
		return out
	}
	// B learns of the role it never saw created.
	proctest.Eventually(t, "B knows the role A created", func() bool { _, err := hosts[1].Roles().Get("writer"); return err == nil })
	cs, changed := connect(t, &mcp.StreamableClientTransport{Endpoint: b.URL + "/mcp/writer"})
	if got := names(cs); !slices.Equal(got, []string{"console_print"}) {
		t.Fatalf("B's session lists %v", got)
	}
	agent, err := hosts[1].Store().CreateAgent(context.Background(), store.Agent{RoleID: mustRole(t, hosts[1], "writer").ID})
	if err != nil {
		t.Fatal(err)
	}
	edited := time.Now()
	if code := do(t, "PUT", a.URL+"/api/roles/writer", map[string]any{"toolGroups": []string{"console", "notes"}}, nil); code != 200 {
		t.Fatalf("edit the role through A: %d", code)
	}
	select {
	case <-changed:
		t.Logf("B's session was told %v after the edit on A", time.Since(edited).Round(time.Millisecond))
	case <-time.After(proctest.Patience):
		t.Fatal("B's session was not told of the edit on A")
	}
	if got := names(cs); !slices.Equal(got, []string{"console_print", "note_add"}) {
		t.Fatalf("after the edit, B's session lists %v", got)
	}
	list, err := hosts[1].Tools(host.ToolQuery{Agent: agent.ID, Unloaded: true})
	if err != nil || len(list.Tools) != 2 {
		t.Fatalf("B's agent of the role sees %d tools (%v), want 2", len(list.Tools), err)
	}
}

func mustRole(t *testing.T, h *host.Host, name string) store.Role {
	t.Helper()
	r, err := h.Roles().Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
