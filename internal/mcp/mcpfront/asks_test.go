package mcpfront

import (
	"context"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLogQueueBounded: a module flooding log messages while its call has
// no request of its client open (between two rounds) never waits, and the
// call's queue never holds more than maxQueuedLogs; once the call has
// ended, its messages are dropped.
func TestLogQueueBounded(t *testing.T) {
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "flood"}}
	a := newClientAsker(context.Background(), roundRequestOf("tools/call", req, nil, ""))
	a.detach()
	for i := range 100 * maxQueuedLogs {
		a.Log(fmt.Appendf(nil, `{"level":"info","data":%d}`, i))
		a.mu.Lock()
		n := len(a.logs)
		a.mu.Unlock()
		if n > maxQueuedLogs {
			t.Fatalf("after %d messages the queue holds %d, more than %d", i+1, n, maxQueuedLogs)
		}
	}
	a.end()
	a.Log([]byte(`{"level":"info","data":"late"}`))
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.logs) != 0 {
		t.Errorf("after the call ended the queue holds %d messages", len(a.logs))
	}
}
