package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// historyCalls are the calls a history test makes before it reads the
// trail: the admin's call c-one; as role dev with token "dev-token", two
// calls that run, one its rule denies and one past its limit of two calls
// a minute; and the admin's call of the guarded tool, approved by the
// admin. It returns the dev token's secret and its credential.
func historyCalls(t *testing.T, srv string, h *host.Host) (devSecret, devCred string) {
	t.Helper()
	ctx := context.Background()
	_, err := h.Roles().Create(ctx, host.RoleSpec{Name: "dev", ToolGroups: []string{"console"},
		Rules:  []rules.Rule{{Name: "no_sudo", When: "args.text.contains('sudo')", Action: rules.Action("deny"), Reason: "no sudo here"}},
		Limits: []rules.Limit{{Target: "console_print", Calls: 2, Per: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	devSecret, tok, err := h.Store().CreateToken(ctx, "dev-token", "dev", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	call := func(client *http.Client, body map[string]any, want int) {
		t.Helper()
		raw, _ := json.Marshal(body)
		resp, err := client.Post(srv+"/api/call", "application/json", strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("call %s = %d, want %d", raw, resp.StatusCode, want)
		}
	}
	call(http.DefaultClient, map[string]any{"tool": "console_print", "arguments": map[string]string{"text": "one"}, "callId": "c-one"}, 200)
	dev := bearerClient(devSecret)
	for _, c := range []struct {
		text string
		want int
	}{{"a", 200}, {"b", 200}, {"sudo rm", 403}, {"c", 429}} {
		call(dev, map[string]any{"role": "dev", "tool": "console_print", "arguments": map[string]string{"text": c.text}}, c.want)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(http.DefaultClient, map[string]any{"tool": "guarded", "arguments": map[string]string{"text": "secret-free"}, "callId": "c-guarded"}, 200)
	}()
	var pending []host.ApprovalRequest
	proctest.Eventually(t, "the guarded call is pending", func() bool {
		do(t, "GET", srv+"/api/approvals", nil, &pending)
		return len(pending) == 1
	})
	if code := do(t, "POST", srv+"/api/approvals/"+pending[0].ID, `{"decision":"approve","reason":"looks fine"}`, nil); code != 204 {
		t.Fatalf("approve = %d", code)
	}
	<-done
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return devSecret, tok.Credential()
}

// getEvents reads a page of GET /api/events?query and the next page's
// path from its Link header ("" when none).
func getEvents(t *testing.T, srv, query string) ([]store.Event, string) {
	t.Helper()
	resp, err := http.Get(srv + "/api/events?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []store.Event
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&events) != nil {
		t.Fatalf("events?%s = %d", query, resp.StatusCode)
	}
	next := ""
	if m := regexp.MustCompile(`<([^>]+)>;\s*rel="next"`).FindStringSubmatch(resp.Header.Get("Link")); m != nil {
		next = m[1]
	}
	return events, next
}

// TestEventsHistoryAPI: GET /api/events filters the calls made before it
// by role, credential, tool, outcome (with a failure's code) and call id,
// pages back through a Link header, shows arguments as JSON, exports a
// filtered range as JSON lines, and tells a call's story; each bad filter
// is a 400 naming its parameter.
func TestEventsHistoryAPI(t *testing.T) {
	srv, h := approvalServer(t)
	_, devCred := historyCalls(t, srv.URL, h)

	all, next := getEvents(t, srv.URL, "")
	if next != "" {
		t.Fatalf("one page of %d events names a next: %s", len(all), next)
	}
	count := func(keep func(store.Event) bool) int {
		n := 0
		for _, e := range all {
			if keep(e) {
				n++
			}
		}
		return n
	}
	terminal := func(code string) func(store.Event) bool {
		return func(e store.Event) bool { return e.Type == store.EventCallFailed && e.Payload["code"] == code }
	}
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"role=dev", 8},
		{"credential=" + url.QueryEscape(devCred), 8},
		{"credential=admin", count(func(e store.Event) bool { return e.Payload["credential"] == "admin" })},
		{"tool=guarded", 2},
		{"call=c-one", 2},
		{"outcome=ok", 4},
		{"outcome=failed", 2},
		{"outcome=denied", count(terminal("policy"))},
		{"outcome=failed:policy", 1},
		{"outcome=rate_limited", count(terminal("rate_limited"))},
		{"outcome=approved", 1},
		{"role=dev&outcome=ok", 2},
		{"until=" + url.QueryEscape(all[0].Time.Format(time.RFC3339Nano)), 0},
		{"since=1h&until=-1h", len(all)},
		{"before=" + itoa(all[len(all)-1].ID), len(all) - 1},
	} {
		if got, _ := getEvents(t, srv.URL, tc.query); len(got) != tc.want {
			t.Errorf("%s: %d events, want %d", tc.query, len(got), tc.want)
		}
	}
	if n := count(terminal("rate_limited")); n != 1 {
		t.Errorf("%d rate_limited calls, want 1", n)
	}

	// Arguments are JSON, not JSON in a string.
	started, _ := getEvents(t, srv.URL, "call=c-one&type=tool_call.started")
	if args, ok := started[0].Payload["arguments"].(map[string]any); !ok || args["text"] != "one" {
		t.Fatalf("arguments = %#v", started[0].Payload["arguments"])
	}

	// Paging back: each page names the one before it, until the first.
	var paged []store.Event
	for path, pages := "/api/events?role=dev&limit=3", 0; path != ""; pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages")
		}
		var page []store.Event
		page, next = getEvents(t, srv.URL, strings.TrimPrefix(path, "/api/events?"))
		paged = append(page, paged...)
		path = next
	}
	if len(paged) != 8 || paged[0].Role != "dev" {
		t.Fatalf("paged back through %d events, want 8", len(paged))
	}
	for i := 1; i < len(paged); i++ {
		if paged[i].ID <= paged[i-1].ID {
			t.Fatalf("pages out of order: %d after %d", paged[i].ID, paged[i-1].ID)
		}
	}

	// The export: every matching event, one JSON object a line.
	for _, tc := range []struct {
		query string
		want  int
	}{{"format=jsonl", len(all)}, {"format=jsonl&role=dev", 8}, {"format=jsonl&outcome=denied", 1}} {
		resp, err := http.Get(srv.URL + "/api/events?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		lines := 0
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); lines++ {
			var e store.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ID == 0 {
				t.Fatalf("%s: line %d: %q: %v", tc.query, lines+1, sc.Text(), err)
			}
			if e.Type == store.EventCallStarted {
				if _, ok := e.Payload["arguments"].(map[string]any); !ok {
					t.Fatalf("%s: arguments %#v", tc.query, e.Payload["arguments"])
				}
			}
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/jsonl" || lines != tc.want {
			t.Fatalf("%s = %d %q, %d lines; want %d", tc.query, resp.StatusCode, resp.Header.Get("Content-Type"), lines, tc.want)
		}
	}

	// A call's story: who called, the approval and its approver, the rule.
	var story store.CallStory
	if code := do(t, "GET", srv.URL+"/api/events/calls/c-guarded", nil, &story); code != 200 {
		t.Fatalf("story = %d", code)
	}
	approval, _ := story.Approval.(map[string]any)
	args, _ := story.Arguments.(map[string]any)
	if story.Outcome != "ok" || story.Tool != "guarded" || story.Credential != store.CredentialAdmin || approval["by"] != store.CredentialAdmin ||
		approval["decision"] != "approve" || approval["reason"] != "looks fine" || args["text"] != "secret-free" || story.LatencyMs == nil || len(story.Events) != 2 {
		t.Fatalf("story = %+v", story)
	}
	denied, _ := getEvents(t, srv.URL, "outcome=denied")
	if code := do(t, "GET", srv.URL+"/api/events/calls/"+url.PathEscape(denied[0].CallID), nil, &story); code != 200 ||
		story.Rule != "no_sudo" || story.RuleAction != "deny" || story.Code != "policy" || story.Credential != devCred || story.Role != "dev" {
		t.Fatalf("denied story = %d %+v", code, story)
	}
	var e apiError
	if code := do(t, "GET", srv.URL+"/api/events/calls/nope", nil, &e); code != 404 || e.Error.Code != toolhost.CodeValidation {
		t.Fatalf("unknown call's story = %d %+v", code, e)
	}
	// A call id is the caller's text: one with a slash and a space is found
	// escaped in the path.
	odd := "../x/y z"
	if code := do(t, "POST", srv.URL+"/api/call", map[string]any{"tool": "console_print", "arguments": map[string]string{"text": "odd"}, "callId": odd}, nil); code != 200 {
		t.Fatalf("the odd call = %d", code)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := do(t, "GET", srv.URL+"/api/events/calls/"+url.PathEscape(odd), nil, &story); code != 200 || story.CallID != odd || story.Outcome != "ok" {
		t.Fatalf("the odd call's story = %d %+v", code, story)
	}

	// Bad filters: 400, naming the parameter.
	for _, tc := range []struct{ query, names string }{
		{"outcome=fine", "outcome"},
		{"outcome=failed:nope", "outcome"},
		{"outcome=ok:timeout", "outcome"},
		{"since=yesterday", "since"},
		{"until=tomorrow", "until"},
		{"before=x", "before"},
		{"after=-1", "after"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"agentId=a1", `"agentId"`},
		{"role=a&role=b", "role"},
		{"format=xml", "format"},
		{"format=jsonl&limit=5", "limit"},
		{"role=", "role"},
		{"before=0", "before"},
		{"outcome=failed:", "outcome"},
	} {
		if code := do(t, "GET", srv.URL+"/api/events?"+tc.query, nil, &e); code != 400 || e.Error.Code != toolhost.CodeValidation ||
			!strings.Contains(e.Error.Message, tc.names+":") && !strings.Contains(e.Error.Message, tc.names+" ") {
			t.Errorf("%s = %d %+v; want 400 naming %s", tc.query, code, e, tc.names)
		}
	}
	if code := do(t, "GET", srv.URL+"/api/events/stream?outcome=fine", nil, &e); code != 400 || !strings.Contains(e.Error.Message, "outcome") {
		t.Errorf("the stream's bad filter = %d %+v", code, e)
	}
}

// TestEventsHistoryRefused: the history, its export and a call's story
// are the admin's: a role token, a metrics token and no token are refused.
func TestEventsHistoryRefused(t *testing.T) {
	srv, h := approvalServer(t)
	devSecret, _ := historyCalls(t, srv.URL, h)
	metrics, _, err := h.Tokens().CreateMetrics(context.Background(), "prom", time.Time{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/events?role=dev", "/api/events?format=jsonl", "/api/events/calls/c-one", "/api/events/stream?role=dev"} {
		for _, who := range []struct {
			name, token string
			status      int
		}{{"the role's token", devSecret, 403}, {"a metrics token", metrics, 403}, {"no token", "", 401}} {
			req, _ := http.NewRequest("GET", srv.URL+path, nil)
			if who.token != "" {
				req.Header.Set("Authorization", "Bearer "+who.token)
			}
			resp, err := plainTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			var e apiError
			_ = json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			if resp.StatusCode != who.status || e.Error.Code != toolhost.CodePolicy {
				t.Errorf("%s with %s = %d %+v, want %d", path, who.name, resp.StatusCode, e, who.status)
			}
		}
	}
}
