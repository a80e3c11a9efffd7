package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
)

// TestInflightBounds: the bytes of request bodies being handled are
// bounded per credential and in all; a request past either is refused with
// rate_limited and a retry, and an answered one frees its bytes at once.
func TestInflightBounds(t *testing.T) {
	var f inflight
	take := func(cred string, mib int64) (func(), error) { return f.take(cred, mib<<20) }
	releaseA, err := take("token/a/1", 40)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := take("token/a/1", 30); !errors.Is(err, toolhost.ErrRateLimited) || toolhost.RetryAfter(err) <= 0 ||
		!strings.Contains(err.Error(), "token/a/1 has 40 MiB of requests being handled") {
		t.Fatalf("past the credential's bound: %v", err)
	}
	if _, err := take("token/b/2", 30); err != nil {
		t.Fatalf("another credential: %v", err)
	}
	releaseA()
	if _, err := take("token/a/1", 30); err != nil {
		t.Fatalf("once answered: %v", err)
	}
	for i := range 3 {
		if _, err := take("oidc/"+string(rune('c'+i)), 60); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := take("oidc/z", 30); !errors.Is(err, toolhost.ErrRateLimited) || !strings.Contains(err.Error(), "the server holds 240 MiB") {
		t.Fatalf("past the server's bound: %v", err)
	}
	if _, err := f.take("oidc/z", 0); err != nil {
		t.Fatalf("a request without a body: %v", err)
	}
	for _, c := range []struct {
		length int64
		body   bool
		want   int64
	}{{-1, true, maxBody}, {-1, false, 0}, {10, true, 10}, {1 << 40, true, maxBody}} {
		r, _ := http.NewRequest("POST", "/", nil)
		if c.body {
			r.Body = io.NopCloser(strings.NewReader("x")) // a body of unknown length
		}
		r.ContentLength = c.length
		if got := bodySize(r); got != c.want {
			t.Errorf("bodySize(length %d, body %v) = %d, want %d", c.length, c.body, got, c.want)
		}
	}
}
