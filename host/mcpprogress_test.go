package host

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
)

// TestMCPProgressBeforeResult: progress an MCP server reports just before
// its answer reaches the caller before the call returns, in order, the
// final report included; the go-sdk hands notifications to a queue of
// their own and answers the call as soon as it reads the response, so
// without the module's relay the last reports of a burst are lost now and
// then.
func TestMCPProgressBeforeResult(t *testing.T) {
	cfg := &config.Config{Limits: config.Limits{Timeout: proctest.Patience}, Plugins: []config.Plugin{testMCP("good", "good")}}
	h := runHost(t, cfg, testOptions(t))
	for i := range 40 {
		var mu sync.Mutex
		var got []float64
		ctx := toolhost.WithProgress(context.Background(), func(done, _ float64, _ string) {
			mu.Lock()
			got = append(got, done)
			mu.Unlock()
		})
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "burst", Arguments: []byte(`{}`)})
		if err != nil || !res.OK {
			t.Fatalf("burst: %+v, %v", res, err)
		}
		mu.Lock()
		reports := slices.Clone(got)
		mu.Unlock()
		// The host thins a burst to its first report, the newest held
		// and the final one.
		if !slices.IsSorted(reports) || len(reports) == 0 || reports[len(reports)-1] != 5 {
			t.Fatalf("call %d: progress %v when the call returned, want the final 5 last", i, reports)
		}
	}
}
