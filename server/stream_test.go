package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/store"
)

func TestTokensPreview(t *testing.T) {
	srv := apiServer(t)
	var one, all map[string]int
	if code := do(t, "GET", srv.URL+"/api/tokens?groups=console", nil, &one); code != 200 || one["tools"] != 1 || one["tokens"] <= 0 {
		t.Fatalf("console only = %d %v", code, one)
	}
	if code := do(t, "GET", srv.URL+"/api/tokens", nil, &all); code != 200 || all["tools"] != 3 || all["tokens"] <= one["tokens"] || all["allTokens"] != all["tokens"] {
		t.Fatalf("every group = %d %v", code, all)
	}
	var e apiError
	if code := do(t, "GET", srv.URL+"/api/tokens?groups=nope", nil, &e); code != 400 || e.Error.Code != toolhost.CodeValidation {
		t.Fatalf("unknown group = %d %+v", code, e)
	}
}

func TestEventStream(t *testing.T) {
	srv, h := approvalServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Patience)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events/stream?type=tool_call.", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	if _, err := h.Call(ctx, &toolhost.CallRequest{Tool: "console_print", Arguments: []byte(`{"text":"live"}`), Context: toolhost.CallContext{CallID: "live-1"}}); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	var got []store.Event
	for len(got) < 2 && sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e store.Event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
		}
	}
	if len(got) != 2 || got[0].Type != store.EventCallStarted || got[1].Type != store.EventCallCompleted || got[1].CallID != "live-1" {
		t.Fatalf("streamed %+v (%v)", got, sc.Err())
	}
}

// TestEventStreamPagesThroughABurst: more events than a page between two
// polls all reach the client, in order.
func TestEventStreamPagesThroughABurst(t *testing.T) {
	srv, h := approvalServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), proctest.Patience)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/events/stream?type=tool_call.completed&limit=7", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	const calls = 50
	for i := range calls {
		if _, err := h.Call(ctx, &toolhost.CallRequest{Tool: "console_print", Arguments: []byte(`{"text":"burst"}`)}); err != nil {
			t.Fatal(i, err)
		}
	}
	sc := bufio.NewScanner(resp.Body)
	var last int64
	for n := 0; n < calls && sc.Scan(); {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e store.Event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatal(err)
			}
			if e.ID <= last {
				t.Fatalf("event %d after %d", e.ID, last)
			}
			last = e.ID
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("stream ended early: %v", err)
	}
}
