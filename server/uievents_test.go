package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
)

// TestUIEventsHistory: the Events page opened after the calls lists them
// from history, newest first, a page at a time ("Older" shows the rest);
// each filter, set in the form or linked in the address, narrows the list
// to what the API answers for it; a call's row opens its story, with its
// rule's verdict or its approver; new matching events appear on top while
// following.
func TestUIEventsHistory(t *testing.T) {
	srv, h := approvalServer(t)
	devSecret, devCred := historyCalls(t, srv.URL, h)
	ctx := context.Background()
	for i := range 30 { // more than a page
		if _, err := h.Call(ctx, &toolhost.CallRequest{Tool: "console_print", Arguments: json.RawMessage(`{"text":"n` + strconv.Itoa(i) + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	apiCount := func(query string) int {
		t.Helper()
		events, _ := getEvents(t, srv.URL, query+"&limit=50")
		return len(events)
	}
	all, _ := getEvents(t, srv.URL, "limit=1000")
	if len(all) <= 50 {
		t.Fatalf("%d events: the test wants more than a page", len(all))
	}

	b := newBrowser(t, srv.URL)
	rows := `document.querySelectorAll('#events tbody tr[data-id]').length`
	// show routes to the list at hash (shows it again when there) and waits
	// for a new list to be ready.
	show := func(hash string) {
		t.Helper()
		eval[any](b, `(e => e && (e.dataset.stale = '1'))(document.querySelector('#events'))`)
		eval[any](b, fmt.Sprintf("location.hash === %[1]s ? render() : (location.hash = %[1]s)", strconv.Quote(hash)))
		b.wait("the list at "+hash, `(e => !!e && !e.dataset.stale)(document.querySelector('#events')) && document.querySelector('#main').dataset.ready === 'events'`)
	}
	b.open("#/events", "events")
	b.wait("the first page", rows+` === 50`)
	ids := eval[[]int64](b, `[...document.querySelectorAll('#events tbody tr[data-id]')].map(r => +r.dataset.id)`)
	if ids[0] != all[len(all)-1].ID || ids[49] != all[len(all)-50].ID {
		t.Fatalf("the first page runs from %d to %d; want the newest 50, %d to %d", ids[0], ids[49], all[len(all)-1].ID, all[len(all)-50].ID)
	}
	b.keep("events")
	b.click("#events-older")
	b.wait("every event", fmt.Sprintf(`%s === %d`, rows, len(all)))
	if !eval[bool](b, `document.querySelector('#events-older').disabled`) {
		t.Error("Older is enabled after the oldest event")
	}
	b.wait("the calls made before the page opened", `[...document.querySelectorAll('#events tbody tr')].some(r => r.dataset.call === 'c-one')`)

	// The form's filter lands in the address, and the list narrows.
	eval[any](b, `(f => { f.elements.role.value = 'dev'; f.querySelector('button[type=submit]').click(); })(document.querySelector('#event-filters'))`)
	b.wait("the role in the address", `location.hash === '#/events?role=dev'`)
	b.wait("dev's events", fmt.Sprintf(`document.querySelector('#main').dataset.ready === 'events' && %s === %d`, rows, apiCount("role=dev")))

	// Each filter, linked, shows what the API answers for it.
	newest := all[len(all)-1].Time
	for _, q := range []string{
		"role=dev", "credential=" + url.QueryEscape(devCred), "tool=guarded", "call=c-one", "agent=root",
		"outcome=ok", "outcome=failed", "outcome=denied", "outcome=approved", "outcome=rate_limited", "outcome=failed:policy",
		"since=1h", "until=" + url.QueryEscape(newest.Add(-time.Nanosecond).Format(time.RFC3339Nano)), "role=dev&outcome=ok",
	} {
		show("#/events?" + q)
		want := apiCount(q)
		if got := eval[int](b, rows); got != want {
			t.Errorf("%s: %d rows, want %d as the API answers", q, got, want)
		}
		if q == "outcome=denied" {
			b.keep("events-denied")
		}
	}

	// A call's story: the rule that denied it.
	show("#/events?outcome=denied")
	b.click(`#events tbody tr .call-link`)
	b.ready("call")
	if rule := b.text(`[data-field="rule"]`); rule != "no_sudo → deny" {
		t.Errorf("the denied call's rule = %q", rule)
	}
	if who := b.text(`[data-field="caller"]`); !strings.Contains(who, "role dev") || !strings.Contains(who, devCred) {
		t.Errorf("the denied call's caller = %q", who)
	}
	// And the approved call's approver.
	show("#/events?outcome=approved")
	b.click(`#events tbody tr .call-link`)
	b.ready("call")
	if by := b.text(`[data-field="approver"]`); by != "admin" {
		t.Errorf("the approved call's approver = %q", by)
	}
	if a := b.text(`[data-field="approval"]`); !strings.Contains(a, "approve") || !strings.Contains(a, "looks fine") {
		t.Errorf("the approval = %q", a)
	}
	if args := b.text(`[data-field="arguments"]`); !strings.Contains(args, `"text": "secret-free"`) {
		t.Errorf("the arguments = %q", args)
	}
	b.keep("call-story")
	b.click("#back-to-events")
	b.ready("events")

	// Following: a new matching call's events appear on top.
	show("#/events?tool=console_print&role=dev")
	b.wait("the stream", `document.querySelector('#stream-status').textContent === 'live'`)
	before := eval[int](b, rows)
	top := eval[int64](b, `+document.querySelector('#events tbody tr[data-id]').dataset.id`)
	resp, err := bearerClient(devSecret).Post(srv.URL+"/api/call", "application/json", strings.NewReader(`{"role":"dev","tool":"console_print","arguments":{"text":"live"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Fatalf("a third call of dev within the minute = %d, want 429: its limit is 2", resp.StatusCode)
	}
	if _, err := h.Call(ctx, &toolhost.CallRequest{Tool: "console_print", Arguments: json.RawMessage(`{"text":"root's"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b.wait("the new call on top", fmt.Sprintf(`%s === %d && +document.querySelector('#events tbody tr[data-id]').dataset.id > %d && document.querySelector('#events tbody tr[data-id]').textContent.includes('rate_limited')`, rows, before+2, top))
}
