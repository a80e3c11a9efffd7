package host

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// BenchmarkLimitedCall measures what a call limit costs: a no-op call of a
// real plugin by an agent of a role without limits against the same call by
// an agent of a role with one (never reached: 2^30 calls an hour), taking
// turns in the same run (latency, p50 and p99 of each and their ratios),
// and the throughput of 32 callers: of one agent, whose takes all go to one
// bucket (one row), and spread over 32 agents; on each engine.
func BenchmarkLimitedCall(b *testing.B) {
	for _, engine := range []string{store.DriverSQLite, store.DriverPostgres} {
		b.Run(engine, func(b *testing.B) {
			opts := testOptions(b)
			if engine == store.DriverPostgres {
				opts.Store = pgStores(b, 1)[0]
			}
			h := runHost(b, &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{testPlugin("bench", "good", nil)}}, opts)
			ctx := context.Background()
			// call calls noop as agents of role in turn.
			call := func(role string, agents int) func() error {
				if _, err := h.Role(role); err != nil {
					if _, err := h.CreateRole(ctx, RoleSpec{Name: role, ToolGroups: []string{"testgroup"}}); err != nil {
						b.Fatal(err)
					}
				}
				var reqs []*toolhost.CallRequest
				for range agents {
					agent, err := h.CreateAgent(ctx, role, store.Agent{})
					if err != nil {
						b.Fatal(err)
					}
					reqs = append(reqs, &toolhost.CallRequest{Tool: "noop", Arguments: []byte("{}"), Context: toolhost.CallContext{AgentID: agent.ID}})
				}
				var next atomic.Uint64
				return func() error {
					res, err := h.Call(ctx, reqs[next.Add(1)%uint64(agents)])
					if err == nil && !res.OK {
						b.Fatalf("noop failed: %+v", res.Error)
					}
					return err
				}
			}
			free, limited, spread := call("free", 1), call("limited", 1), call("limited", 32)
			setLimits(b, h, "limited", rules.Limit{Target: "noop", Calls: 1 << 30, Per: time.Hour})
			b.Run("latency", func(b *testing.B) { benchPairAs(b, "unlimited", "limited", free, limited) })
			b.Run("unlimited/callers=32", func(b *testing.B) { benchParallel(b, 32, free) })
			b.Run("limited/callers=32", func(b *testing.B) { benchParallel(b, 32, limited) })
			b.Run("limited/callers=32/agents=32", func(b *testing.B) { benchParallel(b, 32, spread) })
		})
	}
}
