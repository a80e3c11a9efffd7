package host

import (
	"context"
	"fmt"
	"strings"
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
// and the throughput of 32 callers: of one credential, whose takes all go
// to one bucket (one row), and spread over 32 credentials; on each engine.
// A bucket is a credential's, so the 32 agents of one credential would
// share one.
func BenchmarkLimitedCall(b *testing.B) {
	for _, engine := range []string{store.DriverSQLite, store.DriverPostgres} {
		b.Run(engine, func(b *testing.B) {
			opts := testOptions(b)
			if engine == store.DriverPostgres {
				opts.Store = pgStores(b, 1)[0]
			}
			h := runHost(b, &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{testPlugin("bench", "good", nil)}}, opts)
			ctx := context.Background()
			// call calls noop as agents of role in turn, each of a
			// credential of its own.
			call := func(role string, agents int) func() error {
				if _, err := h.Roles().Get(role); err != nil {
					if _, err := h.Roles().Create(ctx, RoleSpec{Name: role, ToolGroups: []string{"testgroup"}}); err != nil {
						b.Fatal(err)
					}
				}
				var reqs []*toolhost.CallRequest
				for i := range agents {
					cred := fmt.Sprintf("token/bench/%d", i)
					agent, err := h.Agents().Create(ctx, role, store.Agent{Credential: cred})
					if err != nil {
						b.Fatal(err)
					}
					reqs = append(reqs, &toolhost.CallRequest{Tool: "noop", Arguments: []byte("{}"), Context: toolhost.CallContext{AgentID: agent.ID, Credential: cred}})
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
			b.Run("limited/callers=32/credentials=32", func(b *testing.B) { benchParallel(b, 32, spread) })
		})
	}
}

// BenchmarkApprovedCall measures what the approval path costs beside the
// approver's own wait: a call of the probe's echo against a call of its
// guarded tool, which requires an approval that the approver gives at once
// (approver "approve"), taking turns in the same run, with 1 KiB and 64 KiB
// of arguments (the preview, the SHA-256 of the arguments taken and checked,
// the credential's bound of pending work), and the throughput of 32
// callers of one credential.
func BenchmarkApprovedCall(b *testing.B) {
	h, _ := probeHost(b, nil, nil)
	ctx := context.Background()
	for _, size := range []int{1 << 10, 64 << 10} {
		args := []byte(`{"text":"` + strings.Repeat("x", size) + `"}`)
		call := func(tool string) func() error {
			req := &toolhost.CallRequest{Tool: tool, Arguments: args, Context: toolhost.CallContext{Credential: "token/bench/1"}}
			return func() error {
				res, err := h.Call(ctx, req)
				if err == nil && !res.OK {
					b.Fatalf("%s failed: %+v", tool, res.Error)
				}
				return err
			}
		}
		plain, approved := call("echo"), call("guarded")
		b.Run(fmt.Sprintf("latency/args=%d", size), func(b *testing.B) { benchPairAs(b, "plain", "approved", plain, approved) })
		b.Run(fmt.Sprintf("approved/callers=32/args=%d", size), func(b *testing.B) { benchParallel(b, 32, approved) })
	}
}
