package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// setLimits gives role the call limits ls, as the roles API would.
func setLimits(t testing.TB, h *Host, role string, ls ...rules.Limit) {
	t.Helper()
	if _, err := h.Roles().Update(context.Background(), role, RoleUpdate{Limits: &ls}); err != nil {
		t.Fatal(err)
	}
}

// callAgent calls tool as the agent, with the credential "token/alice/1".
func callAgent(h *Host, agent, tool string) (*toolhost.Result, error) {
	return callWith(h, agent, "token/alice/1", tool)
}

// callWith calls tool as the agent with the credential cred.
func callWith(h *Host, agent, cred, tool string) (*toolhost.Result, error) {
	return h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Context: toolhost.CallContext{AgentID: agent, Credential: cred}})
}

// TestLimitsBeforeDispatch, with a real plugin that counts the calls that
// reach it: a limit refuses past its calls, with rate_limited and when to
// retry, and the refused call never reaches the plugin; a call two limits
// count spends nothing when one refuses; a limit counts per credential,
// whatever agent it calls as (another agent of the same credential is
// refused too), each credential, and the embedding program's calls
// (credential ""), have buckets of their own; a limit by role is shared by
// every credential; a caller without a role has no limits; the terminal
// events carry the verdicts.
func TestLimitsBeforeDispatch(t *testing.T) {
	counted := filepath.Join(t.TempDir(), "count")
	reached := func() int { b, _ := os.ReadFile(counted); return strings.Count(string(b), "\n") }
	h := startHost(t, testPlugin("lim", "good", map[string]string{countFileEnv: counted}))
	ctx := context.Background()
	if _, err := h.Roles().Create(ctx, RoleSpec{Name: "dev", ToolGroups: []string{"testgroup"}}); err != nil {
		t.Fatal(err)
	}
	a1, err := h.Agents().Create(ctx, "dev", store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := h.Agents().Create(ctx, "dev", store.Agent{})
	setLimits(t, h, "dev", rules.Limit{Target: "count", Calls: 3, Per: time.Hour}, rules.Limit{Target: "group:testgroup", Calls: 5, Per: time.Hour}, rules.Limit{Target: "echo", Calls: 1, Per: time.Hour})

	for i := range 3 {
		if res, err := callAgent(h, a1.ID, "count"); err != nil || !res.OK {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
	}
	_, err = callAgent(h, a1.ID, "count")
	if retry := toolhost.RetryAfter(err); !errors.Is(err, toolhost.ErrRateLimited) || retry <= 19*time.Minute || retry > 20*time.Minute ||
		!strings.Contains(err.Error(), `"count" (3 calls per 1h0m0s, counted for token/alice/1)`) || !strings.Contains(err.Error(), "retry in 19m") {
		t.Fatalf("fourth call: %v (retry after %s)", err, retry)
	}
	if n := reached(); n != 3 {
		t.Fatalf("%d calls reached the plugin, want 3", n)
	}
	// The refused call spent nothing of the group's limit: 2 are left.
	for i := range 2 {
		if res, err := callAgent(h, a1.ID, "noop"); err != nil || !res.OK {
			t.Fatalf("noop %d: %+v, %v", i, res, err)
		}
	}
	if _, err := callAgent(h, a1.ID, "noop"); !errors.Is(err, toolhost.ErrRateLimited) || !strings.Contains(err.Error(), `"group:testgroup"`) {
		t.Fatalf("past the group's limit: %v", err)
	}
	if _, err := callAgent(h, a2.ID, "count"); !errors.Is(err, toolhost.ErrRateLimited) || !strings.Contains(err.Error(), "counted for token/alice/1") {
		t.Fatalf("another agent of the same credential: %v", err)
	}
	if res, err := callWith(h, a2.ID, "token/bob/2", "count"); err != nil || !res.OK {
		t.Fatalf("another credential: %+v, %v", res, err)
	}
	asRole := &toolhost.CallRequest{Tool: "count", Context: toolhost.CallContext{Role: "dev"}}
	if res, err := h.Call(ctx, asRole); err != nil || !res.OK {
		t.Fatalf("the role without an agent: %+v, %v", res, err)
	}
	for range 4 {
		if res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "count"}); err != nil || !res.OK {
			t.Fatalf("no role: %+v, %v", res, err)
		}
	}
	if n := reached(); n != 3+1+1+4 {
		t.Fatalf("%d calls reached the plugin, want 9", n)
	}

	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := h.Events().List(ctx, store.EventFilter{Agent: a1.ID, Type: "tool_call."})
	if err != nil {
		t.Fatal(err)
	}
	var verdicts []string
	for _, e := range evs {
		if e.Type == store.EventCallStarted {
			continue
		}
		var parts []string
		for _, x := range e.Payload["limits"].([]any) {
			d := x.(map[string]any)
			switch {
			case d["taken"] == true:
				parts = append(parts, fmt.Sprint(d["limit"], ":left=", d["tokens_left"]))
			case d["retry_after_ms"] != nil:
				parts = append(parts, d["limit"].(string)+":refused")
			default:
				parts = append(parts, d["limit"].(string)+":not-taken")
			}
		}
		verdicts = append(verdicts, e.Type+" "+strings.Join(parts, ","))
	}
	want := []string{
		"tool_call.completed count:left=2,group:testgroup:left=4",
		"tool_call.completed count:left=1,group:testgroup:left=3",
		"tool_call.completed count:left=0,group:testgroup:left=2",
		"tool_call.failed count:refused,group:testgroup:not-taken",
		"tool_call.completed group:testgroup:left=1",
		"tool_call.completed group:testgroup:left=0",
		"tool_call.failed group:testgroup:refused",
	}
	if strings.Join(verdicts, "\n") != strings.Join(want, "\n") {
		t.Fatalf("verdicts in the events:\n%s\nwant:\n%s", strings.Join(verdicts, "\n"), strings.Join(want, "\n"))
	}
	if failed := evs[len(evs)-1]; failed.Payload["code"] != string(toolhost.CodeRateLimited) || failed.Payload["error_class"] != "policy" {
		t.Fatalf("the refusal's event: %+v", failed.Payload)
	}
	// By role: one bucket for every credential of the role.
	setLimits(t, h, "dev", rules.Limit{Target: "noop", Calls: 1, Per: time.Hour, By: rules.ByRole})
	if res, err := callWith(h, a1.ID, "token/carol/3", "noop"); err != nil || !res.OK {
		t.Fatalf("the role's one noop: %+v, %v", res, err)
	}
	if _, err := callWith(h, a2.ID, "token/dave/4", "noop"); !errors.Is(err, toolhost.ErrRateLimited) || !strings.Contains(err.Error(), "shared by the role's callers") {
		t.Fatalf("a second noop of the role, by another credential: %v", err)
	}
}

// TestLimitsAcrossHosts: two hosts on one PostgreSQL database share an
// agent's bucket: with 5 calls a minute, the sixth call is refused on
// either host, and no refused call ran.
func TestLimitsAcrossHosts(t *testing.T) {
	sts := pgStores(t, 2)
	a, pa := probeHost(t, nil, &Options{Store: sts[0]})
	b, pb := probeHost(t, nil, &Options{Store: sts[1]})
	ctx := context.Background()
	if _, err := a.Roles().Create(ctx, RoleSpec{Name: "dev", ToolGroups: []string{"probe"}}); err != nil {
		t.Fatal(err)
	}
	agent, err := a.Agents().Create(ctx, "dev", store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "host B knows the agent", func() bool { _, ok := b.Agents().Get(agent.ID); return ok })
	setLimits(t, a, "dev", rules.Limit{Target: "echo", Calls: 5, Per: time.Minute})
	proctest.Eventually(t, "host B knows the limit", func() bool { r, err := b.Roles().Get("dev"); return err == nil && len(r.Limits) == 1 })
	for i := range 5 {
		if res, err := callAgent([]*Host{a, b}[i%2], agent.ID, "echo"); err != nil || !res.OK {
			t.Fatalf("call %d: %+v, %v", i, res, err)
		}
	}
	for i, h := range []*Host{a, b} {
		if _, err := callAgent(h, agent.ID, "echo"); !errors.Is(err, toolhost.ErrRateLimited) {
			t.Fatalf("the sixth call on host %d: %v", i, err)
		}
	}
	if n := pa.calls.Load() + pb.calls.Load(); n != 5 {
		t.Fatalf("%d calls ran, want 5", n)
	}
}

// TestLimitsConcurrently: many callers at once, on each engine, get exactly
// the bucket's calls, and only those run (run with -race); a replay of a
// chosen call id runs nothing and spends nothing.
func TestLimitsConcurrently(t *testing.T) {
	for _, engine := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(engine, func(t *testing.T) {
			var opts *Options
			if engine == store.DriverPostgres {
				opts = &Options{Store: pgStores(t, 1)[0]}
			}
			h, p := probeHost(t, nil, opts)
			ctx := context.Background()
			if _, err := h.Roles().Create(ctx, RoleSpec{Name: "dev", ToolGroups: []string{"probe"}}); err != nil {
				t.Fatal(err)
			}
			agent, _ := h.Agents().Create(ctx, "dev", store.Agent{})
			setLimits(t, h, "dev", rules.Limit{Target: "*", Calls: 10, Per: time.Hour}, rules.Limit{Target: "group:probe", Calls: 12, Per: time.Hour})
			var ok, limited atomic.Int32
			var wg sync.WaitGroup
			for range 24 {
				wg.Go(func() {
					for range 3 {
						_, err := callAgent(h, agent.ID, "echo")
						switch {
						case err == nil:
							ok.Add(1)
						case errors.Is(err, toolhost.ErrRateLimited):
							limited.Add(1)
						default:
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if ok.Load() != 10 || limited.Load() != 62 || p.calls.Load() != 10 {
				t.Fatalf("%d granted, %d refused, %d ran; want 10, 62, 10", ok.Load(), limited.Load(), p.calls.Load())
			}

			other, _ := h.Agents().Create(ctx, "dev", store.Agent{})
			setLimits(t, h, "dev", rules.Limit{Target: "echo", Calls: 2, Per: time.Hour})
			req := func(id string) *toolhost.CallRequest {
				return &toolhost.CallRequest{Tool: "echo", Arguments: []byte(`{}`), Context: toolhost.CallContext{AgentID: other.ID, CallID: id}}
			}
			for _, id := range []string{"once", "once", "twice"} {
				if res, err := h.Call(ctx, req(id)); err != nil || !res.OK {
					t.Fatalf("%s: %+v, %v", id, res, err)
				}
			}
			if _, err := h.Call(ctx, req("thrice")); !errors.Is(err, toolhost.ErrRateLimited) {
				t.Fatalf("a third call after a replay: %v", err)
			}
		})
	}
}
