package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

// limboConfig is the SIGKILL tests' serve: the command module, with the
// audit mode given.
const limboConfig = `
data_dir   = "data"
plugin_dir = %q
audit {
  mode = %q
}
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
	killUnderLoad(t, "default")
}

// TestSIGKILLStrictAuditLosesNoCall: with audit { mode = "strict" }, the
// same kill also loses no started event: every call answered 200, and every
// call that reached the command module (its command wrote the call's marker
// file), has its tool_call.started in the log after the restart.
func TestSIGKILLStrictAuditLosesNoCall(t *testing.T) {
	l := killUnderLoad(t, "strict")
	if len(l.answeredUnlogged) > 0 {
		t.Errorf("%d of %d calls answered 200 have no started event: %v", len(l.answeredUnlogged), l.answered, l.answeredUnlogged)
	}
	if len(l.ranUnlogged) > 0 {
		t.Errorf("%d of %d calls that ran have no started event: %v", len(l.ranUnlogged), l.ran, l.ranUnlogged)
	}
}

// limbo is what killUnderLoad found in the log after the restart: how many
// calls were answered 200 and ran (wrote their marker), and the ids of
// those with no tool_call.started.
type limbo struct {
	answered, ran                 int
	answeredUnlogged, ranUnlogged []string
}

// killUnderLoad runs serve with the audit mode, SIGKILLs it while 8 callers
// run calls with ids of their choosing through POST /api/call (each call's
// command first writes marks/<call id> in the workspace, then sleeps 20 ms),
// starts it again on the same data directory and reads the tool_call events
// with the CLI. It fails t if a started call has no terminal event, or if
// none was closed as host_exited.
func killUnderLoad(t *testing.T, audit string) limbo {
	srv := newServe(t, fmt.Sprintf(limboConfig, pluginDir, audit))
	marks := filepath.Join(srv.dir, "marks")
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	serve := srv.start()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var answered sync.Map // call id → true: a 200 arrived
	for i := range 8 {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				id := fmt.Sprintf("limbo-%d-%d", i, n)
				body := fmt.Sprintf(`{"tool": "run_command", "callId": %q, "arguments": {"command": "echo %[1]s > marks/%[1]s; sleep 0.02"}}`, id)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.base+"/api/call", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+srv.admin)
				req.Header.Set("Content-Type", "application/json")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						answered.Store(id, true)
					}
				}
			}
		})
	}
	// Let calls run, then kill the host in the middle of them.
	proctest.Eventually(t, "40 calls are answered", func() bool {
		n := 0
		answered.Range(func(any, any) bool { n++; return true })
		return n >= 40
	})
	if err := serve.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Until the kill is done, the dead process holds the port the restart
	// listens on.
	_, _ = serve.Process.Wait()
	cancel()
	wg.Wait()

	srv.start() // on the same data directory
	var events []store.Event
	sc := bufio.NewScanner(strings.NewReader(srv.cli("events", "-type", "tool_call.", "-export", "-")))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e store.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	open, logged := map[string]bool{}, map[string]bool{}
	exited := 0
	for _, e := range events {
		switch e.Type {
		case store.EventCallStarted:
			open[e.CallID], logged[e.CallID] = true, true
		case store.EventCallCompleted, store.EventCallFailed:
			delete(open, e.CallID)
			if e.Payload["error_class"] == "host_exited" {
				exited++
			}
		}
	}
	if len(open) > 0 {
		t.Errorf("%d of %d started calls have no outcome after the restart: %v", len(open), len(logged), open)
	}
	if exited == 0 {
		t.Errorf("no call was closed as host_exited: the kill found none running (%d started)", len(logged))
	}

	var l limbo
	answered.Range(func(id, _ any) bool {
		l.answered++
		if !logged[id.(string)] {
			l.answeredUnlogged = append(l.answeredUnlogged, id.(string))
		}
		return true
	})
	ran, err := os.ReadDir(marks)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ran {
		l.ran++
		if !logged[m.Name()] {
			l.ranUnlogged = append(l.ranUnlogged, m.Name())
		}
	}
	t.Logf("audit %s: %d calls started, %d closed at the restart as host_exited; %d answered 200, %d without a started event; %d ran, %d without a started event",
		audit, len(logged), exited, l.answered, len(l.answeredUnlogged), l.ran, len(l.ranUnlogged))
	return l
}
