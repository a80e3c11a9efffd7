package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/store"
)

// limboConfig is TestSIGKILLLeavesNoCallInLimbo's serve: the command module.
const limboConfig = `
data_dir   = "data"
plugin_dir = %q
builtin "command" {
  config {}
}
`

// TestSIGKILLLeavesNoCallInLimbo: a serve SIGKILLed while 8 callers run
// tool calls through POST /api/call, then started again on the same data
// directory, closes the calls the dead process left open (tool_call.failed,
// error_class host_exited): no tool_call.started stays without its
// terminal event.
func TestSIGKILLLeavesNoCallInLimbo(t *testing.T) {
	srv := newServe(t, fmt.Sprintf(limboConfig, pluginDir))
	serve := srv.start()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var calls sync.Map
	for i := range 8 {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				body := `{"tool": "run_command", "arguments": {"command": "sleep 0.02"}}`
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.base+"/api/call", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+srv.admin)
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
					calls.Store(fmt.Sprint(i, n), true)
				}
			}
		})
	}
	// Let calls run, then kill the host in the middle of them.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := 0
		calls.Range(func(any, any) bool { n++; return true })
		if n >= 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d calls answered in 10s", n)
		}
	}
	if err := serve.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()

	srv.start() // on the same data directory
	var events []store.Event
	sc := bufio.NewScanner(strings.NewReader(srv.cli("events", "-type", "tool_call.", "-json", "-limit", "1000000")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e store.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	open := map[string]bool{}
	started, exited := 0, 0
	for _, e := range events {
		switch e.Type {
		case store.EventCallStarted:
			open[e.CallID] = true
			started++
		case store.EventCallCompleted, store.EventCallFailed:
			delete(open, e.CallID)
			if e.Payload["error_class"] == "host_exited" {
				exited++
			}
		}
	}
	if len(open) > 0 {
		t.Errorf("%d of %d started calls have no outcome after the restart: %v", len(open), started, open)
	}
	if exited == 0 {
		t.Errorf("no call was closed as host_exited: the kill found none running (%d started)", started)
	}
	t.Logf("%d calls started, %d closed at the restart as host_exited", started, exited)
}
