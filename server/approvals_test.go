package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// approvalHosts starts two HTTP servers, on two hosts sharing one fresh
// PostgreSQL database, whose "guarded" tool needs an approval from the
// queue.
func approvalHosts(t *testing.T) (a, b string) {
	t.Helper()
	dsn := pgtest.Start(t)
	var urls []string
	for range 2 {
		st, err := store.OpenWith(context.Background(), t.TempDir(), store.Options{Driver: store.DriverPostgres, DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg := withTestToken(&config.Config{Executor: config.Executor{Approver: "queue", ApprovalTimeout: time.Minute, IdempotencyWindow: time.Hour}})
		h, err := host.New(cfg, &host.Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		if err := h.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		g := group("console", "console_print")
		g.Tools = append(g.Tools, sdk.NewTool("guarded", "Needs approval.", func(_ context.Context, r *sdk.Request[textArgs]) (*sdk.Result, error) {
			return sdk.Text("guarded:" + r.Args.Text), nil
		}, sdk.RequiresApproval()))
		if err := h.Modules().Register(context.Background(), g); err != nil {
			t.Fatal(err)
		}
		urls = append(urls, newHTTPServer(t, h, nil).URL)
	}
	return urls[0], urls[1]
}

// TestApprovalsAPIAcrossHosts: a call made through host A's API waits for
// an approval that host B's API lists and decides; the decision posted to B
// releases the call on A (told by PostgreSQL, which nothing polls).
func TestApprovalsAPIAcrossHosts(t *testing.T) {
	a, b := approvalHosts(t)
	cases := []struct {
		decision string
		status   int
		want     string
	}{
		{`{"decision":"approve"}`, 200, `guarded:a`},
		{`{"decision":"modify","arguments":{"text":"b"}}`, 200, `guarded:b`},
		{`{"decision":"deny","reason":"not now"}`, 403, `not now`},
	}
	for _, c := range cases {
		type answer struct {
			code int
			body string
			at   time.Time
		}
		done := make(chan answer, 1)
		go func() {
			var raw json.RawMessage
			code := do(t, "POST", a+"/api/call", `{"tool":"guarded","arguments":{"text":"a"}}`, &raw)
			done <- answer{code, string(raw), time.Now()}
		}()
		var pending []host.ApprovalRequest
		proctest.Eventually(t, "B lists the call waiting on A", func() bool {
			do(t, "GET", b+"/api/approvals", nil, &pending)
			return len(pending) > 0
		})
		var args map[string]string
		if len(pending) == 1 {
			_ = json.Unmarshal(pending[0].Arguments, &args)
		}
		if len(pending) != 1 || pending[0].Tool != "guarded" || pending[0].Group != "console" || args["text"] != "a" {
			t.Fatalf("pending on B = %+v", pending)
		}
		start := time.Now()
		if code := do(t, "POST", b+"/api/approvals/"+pending[0].ID, c.decision, nil); code != 204 {
			t.Fatalf("decide %s on B = %d", c.decision, code)
		}
		var ans answer
		select {
		case ans = <-done:
		case <-time.After(proctest.Patience):
			t.Fatalf("%s: the call on A did not return", c.decision)
		}
		t.Logf("%s posted to B → the call returned through A's API in %v", c.decision, ans.at.Sub(start))
		if ans.code != c.status || !strings.Contains(ans.body, c.want) {
			t.Fatalf("%s: %d %s", c.decision, ans.code, ans.body)
		}
		// Decided once: posting again, to either host, is a 404.
		for _, url := range []string{a, b} {
			var e apiError
			if code := do(t, "POST", url+"/api/approvals/"+pending[0].ID, `{"decision":"approve"}`, &e); code != 404 || !strings.Contains(e.Error.Message, "already") {
				t.Fatalf("deciding again = %d %+v", code, e)
			}
		}
	}
}
