package server

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/sdk"
)

// overviewServer serves a host whose role "ops" has console_print (denied
// by a rule when its text says sudo), broken (which always fails) and
// guarded (which needs an approval from the queue), and one module that
// does not run (its executable exits at once). Before it answers, ops has
// made three ok calls, two failing ones, one denied by the rule, and one
// that waits for an approval until the test ends.
func overviewServer(t *testing.T) (*httptest.Server, *host.Host) {
	t.Helper()
	cfg := &config.Config{Executor: config.Executor{Approver: "queue", ApprovalTimeout: time.Hour},
		Plugins: []config.Plugin{{Name: "gone", Kind: config.KindMCP, Path: "/bin/false", Restart: config.RestartNever, StartTimeout: proctest.Patience}}}
	g := group("console", "console_print")
	g.Tools = append(g.Tools,
		sdk.NewTool("broken", "Always fails.", func(context.Context, *sdk.Request[textArgs]) (*sdk.Result, error) {
			return nil, sdk.Errorf(toolhost.CodeToolExec, "broken as designed")
		}),
		sdk.NewTool("guarded", "Needs approval.", func(_ context.Context, r *sdk.Request[textArgs]) (*sdk.Result, error) {
			return sdk.Text("guarded:" + r.Args.Text), nil
		}, sdk.RequiresApproval()))
	srv, h := serve(t, cfg, g)
	ctx := context.Background()
	if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: "ops", ToolGroups: []string{"console"},
		Rules: []rules.Rule{{Name: "no_sudo", Tools: []string{"console_print"}, When: "args.text.contains('sudo')", Action: rules.Deny}}}); err != nil {
		t.Fatal(err)
	}
	call := func(tool, text string, want int) {
		t.Helper()
		if code := do(t, "POST", srv.URL+"/api/call", fmt.Sprintf(`{"role":"ops","tool":%q,"arguments":{"text":%q}}`, tool, text), nil); code != want {
			t.Fatalf("%s %q = %d, want %d", tool, text, code, want)
		}
	}
	for range 3 {
		call("console_print", "hello", 200)
	}
	for range 2 {
		call("broken", "x", 200) // a failing tool is a result
	}
	call("console_print", "sudo rm", 403)

	// The call waiting for an approval is denied when the test ends, so
	// that the server's Close does not wait for it.
	waiting := make(chan struct{})
	go func() {
		defer close(waiting)
		req, _ := http.NewRequest("POST", srv.URL+"/api/call", strings.NewReader(`{"role":"ops","tool":"guarded","arguments":{"text":"a"}}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	t.Cleanup(func() {
		for _, p := range h.Approvals().Pending() {
			_ = h.Approvals().Decide(p.ID, host.Decision{Kind: host.Deny, Reason: "the test ends"})
		}
		<-waiting
	})
	proctest.Eventually(t, "the call waiting for an approval", func() bool { return len(h.Approvals().Pending()) == 1 })
	proctest.Eventually(t, "the module that does not run", func() bool {
		ms := h.Modules().List()
		return len(ms) == 1 && ms[0].State != host.StateStarting
	})
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return srv, h
}

// TestOverviewAPI: GET /api/overview counts the calls that ended in the
// window, by outcome, bucket, role and tool, beside the approvals waiting,
// the modules not running and the storage against its quotas; the window
// is 1h (by minute) or 24h (by ten minutes), anything else refused; and
// only the admin may ask.
func TestOverviewAPI(t *testing.T) {
	srv, h := overviewServer(t)
	for _, c := range []struct {
		window  string
		bucket  int
		buckets int
	}{{"", 60, 60}, {"1h", 60, 60}, {"24h", 600, 144}} {
		t.Run("window="+c.window, func(t *testing.T) {
			var o Overview
			path := "/api/overview"
			if c.window != "" {
				path += "?window=" + c.window
			}
			if code := get(t, srv.URL+path, &o); code != 200 {
				t.Fatalf("GET = %d", code)
			}
			if o.Window != cmp.Or(c.window, "1h") || o.BucketSeconds != c.bucket || len(o.Calls.Buckets) != c.buckets ||
				o.Calls.Until.Sub(o.Calls.Since) != time.Duration(c.buckets*c.bucket)*time.Second || time.Until(o.Calls.Until) <= 0 {
				t.Fatalf("window %q, %ds buckets, %d of them, from %v to %v", o.Window, o.BucketSeconds, len(o.Calls.Buckets), o.Calls.Since, o.Calls.Until)
			}
			c := o.Calls
			if c.Calls != 6 || c.Outcomes.OK != 3 || c.Outcomes.Failed != 2 || c.Outcomes.Denied != 1 || c.Outcomes.Approval != 0 {
				t.Errorf("calls %d, outcomes %+v", c.Calls, c.Outcomes)
			}
			var inBuckets int64
			for _, b := range c.Buckets {
				inBuckets += b.Outcomes.Total()
			}
			if inBuckets != 6 || len(c.Roles) != 1 || c.Roles[0].Role != "ops" || c.Roles[0].Calls != 6 {
				t.Errorf("%d calls in buckets, roles %+v", inBuckets, c.Roles)
			}
			if len(c.Tools) != 2 || c.Tools[0].Tool != "console_print" || c.Tools[0].Calls != 4 || c.Tools[0].Timed != 3 || c.Tools[0].P99 <= 0 ||
				c.Tools[1].Tool != "broken" || c.Tools[1].Outcomes.Failed != 2 {
				t.Errorf("tools %+v", c.Tools)
			}
			if len(o.Failing) != 1 || o.Failing[0].Tool != "broken" || len(o.Slowest) != 2 {
				t.Errorf("failing %+v, slowest %+v", o.Failing, o.Slowest)
			}
			if o.Approvals.Waiting != 1 || o.Approvals.Oldest.IsZero() {
				t.Errorf("approvals %+v", o.Approvals)
			}
			if o.Modules.Total != 1 || o.Modules.Running != 0 || len(o.Modules.Down) != 1 || o.Modules.Down[0].Name != "gone" {
				t.Errorf("modules %+v", o.Modules)
			}
			if o.Storage.Quota != config.DefaultQuota || o.Storage.RoleQuota != config.DefaultRoleQuota || o.Storage.Roles == nil {
				t.Errorf("storage %+v", o.Storage)
			}
		})
	}

	ctx := context.Background()
	roleSecret, _, err := h.Tokens().Create(ctx, "ops-client", "ops", time.Time{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	metricsSecret, _, err := h.Tokens().CreateMetrics(ctx, "prometheus", time.Time{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []attack{
		{name: "a window it does not count", method: "GET", path: "/api/overview?window=7d", token: testToken, status: 400, code: toolhost.CodeValidation, message: `window: "7d": want 1h or 24h`},
		{name: "an empty window", method: "GET", path: "/api/overview?window=", token: testToken, status: 400, code: toolhost.CodeValidation, message: `window: "": want 1h or 24h`},
		{name: "a window given twice", method: "GET", path: "/api/overview?window=1h&window=24h", token: testToken, status: 400, code: toolhost.CodeValidation, message: "window, once"},
		{name: "a parameter it does not take", method: "GET", path: "/api/overview?role=dev", token: testToken, status: 400, code: toolhost.CodeValidation, message: "role: the overview takes one parameter"},
		{name: "a role token", method: "GET", path: "/api/overview", token: roleSecret, status: 403, code: toolhost.CodePolicy},
		{name: "a metrics token", method: "GET", path: "/api/overview", token: metricsSecret, status: 403, code: toolhost.CodePolicy, message: "metrics token"},
		{name: "no token", method: "GET", path: "/api/overview", status: 401, code: toolhost.CodePolicy},
	} {
		a.send(t, srv)
	}
}

// TestUIOverview: the overview, opened after calls were made (ok, failing,
// denied by a rule, one waiting for an approval), draws its charts and
// shows the totals the API answers, for the last hour and the last day.
func TestUIOverview(t *testing.T) {
	srv, _ := overviewServer(t)
	b := startBrowser(t, srv.URL)
	b.open("#token="+testToken, "overview")
	b.wait("the overview", `document.querySelector('#overview-body').dataset.window === '1h'`)
	for _, window := range []string{"1h", "24h"} {
		if window != "1h" {
			b.click("#window-" + window)
			b.wait("the "+window+" overview", fmt.Sprintf(`document.querySelector('#overview-body').dataset.window === %q`, window))
		}
		var o Overview
		if code := get(t, srv.URL+"/api/overview?window="+window, &o); code != 200 {
			t.Fatalf("GET = %d", code)
		}
		c := o.Calls
		for id, want := range map[string]int64{"count-calls": c.Calls, "count-ok": c.Outcomes.OK, "count-failed": c.Outcomes.Failed,
			"count-denied": c.Outcomes.Denied, "count-rateLimited": c.Outcomes.RateLimited, "count-approval": c.Outcomes.Approval,
			"count-approvals": int64(o.Approvals.Waiting), "count-modules": int64(len(o.Modules.Down))} {
			if got := eval[int64](b, fmt.Sprintf(`+document.querySelector('#%s').dataset.count`, id)); got != want {
				t.Errorf("%s: %s shows %d, the API %d", window, id, got, want)
			}
		}
		if c.Calls != 6 || o.Approvals.Waiting != 1 {
			t.Fatalf("%s: the API counts %d calls, %d waiting", window, c.Calls, o.Approvals.Waiting)
		}
		// Each chart draws every call once: its bars' counts add up to the
		// total, in as many stacks as buckets.
		for _, chart := range []string{"chart-outcomes", "chart-roles"} {
			sum := eval[int64](b, fmt.Sprintf(`[...document.querySelectorAll('#%s rect')].reduce((s, r) => s + +r.dataset.n, 0)`, chart))
			stacks := eval[int](b, fmt.Sprintf(`document.querySelectorAll('#%s g.bucket').length`, chart))
			if sum != c.Calls || stacks != len(c.Buckets) {
				t.Errorf("%s %s: bars add up to %d in %d stacks; the API: %d calls in %d buckets", window, chart, sum, stacks, c.Calls, len(c.Buckets))
			}
		}
		if got := eval[string](b, `[...document.querySelectorAll('#chart-outcomes rect')].map(r => r.dataset.series).sort().join(',')`); !strings.Contains(got, "denied") ||
			!strings.Contains(got, "failed") || !strings.Contains(got, "ok") {
			t.Errorf("%s: the outcome chart's series: %s", window, got)
		}
		for _, tool := range c.Tools {
			if got := eval[int64](b, fmt.Sprintf(`+(document.querySelector('#tools tr[data-tool=%q]') || {dataset: {}}).dataset.calls`, tool.Tool)); got != tool.Calls {
				t.Errorf("%s: %s shows %d calls, the API %d", window, tool.Tool, got, tool.Calls)
			}
		}
		if !b.visible(`#tools tr[data-tool="console_print"] .pbar-fill.p99`) || !strings.Contains(b.text("#failing"), "broken") ||
			!strings.Contains(b.text("#modules-down"), "gone") || !b.visible("#storage-host") {
			t.Errorf("%s: the overview = %q", window, b.text("#main"))
		}
		b.shot("overview-" + window + ".png")
	}
	if os.Getenv("TOOLHOST_UI_DOC_SHOT") != "" {
		b.click("#window-1h")
		b.wait("the 1h overview", `document.querySelector('#overview-body').dataset.window === '1h'`)
		if err := b.screenshot(filepath.Join("..", "docs", "overview.png")); err != nil {
			t.Fatal(err)
		}
	}
}
