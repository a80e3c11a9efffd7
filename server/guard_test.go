package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
)

func TestTokenRequired(t *testing.T) {
	srv, _ := serve(t, &config.Config{Auth: config.Auth{Token: "s3cret"}})
	req := func(method, path, token string) int {
		r, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{}`))
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/api/groups", "", 401},
		{"GET", "/api/groups", "wrong", 401},
		{"POST", "/api/call", "", 401},
		{"GET", "/mcp/root", "", 401},
		{"GET", "/api/groups", "s3cret", 200},
		{"GET", "/healthz", "", 200},
	} {
		if got := req(c.method, c.path, c.token); got != c.want {
			t.Errorf("%s %s with %q = %d, want %d", c.method, c.path, c.token, got, c.want)
		}
	}
	var e apiError
	if code := do(t, "GET", srv.URL+"/api/roles", nil, &e); code != 401 || e.Error.Code != toolhost.CodePolicy || !strings.Contains(e.Error.Message, "bearer token") {
		t.Fatalf("unauthenticated = %d %+v", code, e)
	}
}

func TestCrossOriginWritesRefused(t *testing.T) {
	srv := apiServer(t)
	send := func(method string, headers map[string]string) int {
		r, _ := http.NewRequest(method, srv.URL+"/api/roles", strings.NewReader(`{"name":"x"}`))
		for k, v := range headers {
			r.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send("POST", map[string]string{"Origin": "http://evil.example"}); got != 403 {
		t.Errorf("cross-origin POST = %d", got)
	}
	if got := send("POST", map[string]string{"Sec-Fetch-Site": "cross-site"}); got != 403 {
		t.Errorf("cross-site POST = %d", got)
	}
	if got := send("GET", map[string]string{"Origin": "http://evil.example"}); got != 200 {
		t.Errorf("cross-origin GET = %d", got)
	}
	if got := send("POST", map[string]string{"Origin": srv.URL}); got != 201 {
		t.Errorf("same-origin POST = %d", got)
	}
}
