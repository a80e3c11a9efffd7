package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// local allows the 127.0.0.1 test servers, and only them.
var local = map[string]any{"allow_hosts": []string{"127.0.0.1"}}

func newPlugin(t *testing.T, cfg map[string]any) *sdktest.Plugin {
	t.Helper()
	return sdktest.New(t, newGroup(), &sdktest.Options{Config: cfg})
}

// newServer starts a test server on 127.0.0.1 (httptest listens there).
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server at %s, want 127.0.0.1", srv.URL)
	}
	return srv
}

func decode(t *testing.T, res *sdk.Result) Response {
	t.Helper()
	var r Response
	if err := json.Unmarshal([]byte(sdktest.OK(t, res)), &r); err != nil {
		t.Fatalf("result is not a Response: %v\n%s", err, res.Stdout)
	}
	return r
}

func TestSpec(t *testing.T) {
	p := newPlugin(t, nil)
	if p.Spec.ID != "network" || len(p.Spec.Tools) != 1 || p.Spec.Tools[0].Name != "http_request" {
		t.Fatalf("spec = %+v", p.Spec)
	}
}

func TestRequests(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Add("X-Multi", "a")
			w.Header().Add("X-Multi", "b")
			fmt.Fprint(w, "hello, world")
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{
				"method": r.Method, "body": string(b), "x_test": r.Header.Get("X-Test"),
				"user_agent": r.Header.Get("User-Agent"), "content_type": r.Header.Get("Content-Type"),
				"host": r.Host, "connection": r.Header.Get("Connection"),
			})
		case "/missing":
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, "no such thing")
		case "/binary":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff})
		case "/untyped":
			w.Header()["Content-Type"] = nil // no sniffing
			_, _ = w.Write([]byte{0xff, 0xfe, 0, 0x80})
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(bytes.Repeat([]byte("x"), 5000))
		}
	})
	p := newPlugin(t, map[string]any{"allow_hosts": []string{"127.0.0.1"}, "max_response_bytes": 1000})

	t.Run("get text", func(t *testing.T) {
		r := decode(t, p.Call("http_request", RequestArgs{URL: srv.URL + "/text"}))
		if r.Status != 200 || r.StatusText != "OK" || r.Body != "hello, world" || r.BodyBytes != 12 || r.Truncated {
			t.Errorf("response %+v", r)
		}
		if r.Headers["X-Multi"] != "a, b" || !strings.HasPrefix(r.ContentType, "text/plain") || r.FinalURL != srv.URL+"/text" || r.Redirects != 0 {
			t.Errorf("response %+v", r)
		}
	})
	t.Run("post with body and headers", func(t *testing.T) {
		r := decode(t, p.Call("http_request", RequestArgs{
			Method: "post", URL: srv.URL + "/echo", Body: `{"a":1}`,
			Headers: map[string]string{"X-Test": "yes", "Content-Type": "application/json", "Host": "evil.example", "Connection": "close"},
		}))
		var echo map[string]string
		if err := json.Unmarshal([]byte(r.Body), &echo); err != nil {
			t.Fatalf("body %q: %v", r.Body, err)
		}
		want := map[string]string{"method": "POST", "body": `{"a":1}`, "x_test": "yes", "user_agent": userAgent,
			"content_type": "application/json", "host": strings.TrimPrefix(srv.URL, "http://"), "connection": ""}
		for k, v := range want {
			if echo[k] != v {
				t.Errorf("server saw %s = %q, want %q", k, echo[k], v)
			}
		}
	})
	t.Run("user agent given", func(t *testing.T) {
		r := decode(t, p.Call("http_request", RequestArgs{URL: srv.URL + "/echo", Headers: map[string]string{"user-agent": "me/1"}}))
		if !strings.Contains(r.Body, `"user_agent":"me/1"`) {
			t.Errorf("body %s", r.Body)
		}
	})
	t.Run("non-2xx still ok", func(t *testing.T) {
		r := decode(t, p.Call("http_request", RequestArgs{URL: srv.URL + "/missing"}))
		if r.Status != 404 || r.StatusText != "Not Found" || r.Body != "no such thing" {
			t.Errorf("response %+v", r)
		}
	})
	t.Run("head", func(t *testing.T) {
		r := decode(t, p.Call("http_request", RequestArgs{Method: "HEAD", URL: srv.URL + "/text"}))
		if r.Status != 200 || r.Body != "" || r.BodyBytes != 0 {
			t.Errorf("response %+v", r)
		}
	})
	t.Run("binary summarised", func(t *testing.T) {
		r := decode(t, p.Call("http_request", RequestArgs{URL: srv.URL + "/binary"}))
		if !strings.HasPrefix(r.Body, "binary body: 8 bytes, content-type image/png, sha256 ") || r.BodyBytes != 8 {
			t.Errorf("response %+v", r)
		}
		r = decode(t, p.Call("http_request", RequestArgs{URL: srv.URL + "/untyped"}))
		if !strings.HasPrefix(r.Body, "binary body: 4 bytes, content-type (none), sha256 ") {
			t.Errorf("response %+v", r)
		}
	})
	t.Run("size cap", func(t *testing.T) {
		r := decode(t, p.Call("http_request", RequestArgs{URL: srv.URL + "/big"}))
		if !r.Truncated || r.BodyBytes != 1000 || len(r.Body) != 1000 {
			t.Errorf("truncated %v, body_bytes %d, len(body) %d", r.Truncated, r.BodyBytes, len(r.Body))
		}
	})
}

func TestTimeout(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // blocks until the client gives up
	})
	p := newPlugin(t, local)
	start := time.Now()
	msg := sdktest.Fails(t, p.Call("http_request", RequestArgs{URL: srv.URL, TimeoutSeconds: 1}), sdk.CodeTimeout)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	if !strings.Contains(msg, "timeout of 1s") {
		t.Errorf("message %q", msg)
	}
}

func TestPolicy(t *testing.T) {
	var hits atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/to-denied":
			http.Redirect(w, r, "http://denied.example.test/x", http.StatusFound)
		case "/to-other":
			http.Redirect(w, r, "http://other.example.test/x", http.StatusFound)
		case "/to-ftp":
			http.Redirect(w, r, "ftp://127.0.0.1/x", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/twice":
			http.Redirect(w, r, "/once", http.StatusFound)
		case "/once":
			http.Redirect(w, r, "/done", http.StatusFound)
		default:
			fmt.Fprint(w, "done")
		}
	})
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")

	t.Run("default refuses 127.0.0.1", func(t *testing.T) {
		msg := sdktest.Fails(t, newPlugin(t, nil).Call("http_request", RequestArgs{URL: srv.URL}), sdk.CodePolicy)
		if !strings.Contains(msg, "resolves to 127.0.0.1, a loopback address: refused") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("default refuses localhost", func(t *testing.T) {
		msg := sdktest.Fails(t, newPlugin(t, nil).Call("http_request", RequestArgs{URL: "http://localhost:" + port + "/"}), sdk.CodePolicy)
		if !strings.Contains(msg, "localhost resolves to") || !strings.Contains(msg, "a loopback address: refused") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("allow_hosts allows 127.0.0.1", func(t *testing.T) {
		r := decode(t, newPlugin(t, local).Call("http_request", RequestArgs{URL: srv.URL}))
		if r.Body != "done" {
			t.Errorf("response %+v", r)
		}
	})
	t.Run("allow_private allows 127.0.0.1", func(t *testing.T) {
		r := decode(t, newPlugin(t, map[string]any{"allow_private": true}).Call("http_request", RequestArgs{URL: srv.URL}))
		if r.Body != "done" {
			t.Errorf("response %+v", r)
		}
	})
	t.Run("allow_hosts CIDR", func(t *testing.T) {
		decode(t, newPlugin(t, map[string]any{"allow_hosts": []string{"127.0.0.0/8"}}).Call("http_request", RequestArgs{URL: srv.URL}))
	})
	t.Run("not in allow_hosts", func(t *testing.T) {
		p := newPlugin(t, map[string]any{"allow_hosts": []string{"example.com"}, "allow_private": true})
		msg := sdktest.Fails(t, p.Call("http_request", RequestArgs{URL: srv.URL}), sdk.CodePolicy)
		if !strings.Contains(msg, "not in allow_hosts") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("deny wins over allow", func(t *testing.T) {
		for _, deny := range []string{"127.0.0.1", "127.0.0.0/8", "::ffff:127.0.0.1"} {
			p := newPlugin(t, map[string]any{"allow_hosts": []string{"127.0.0.1"}, "deny_hosts": []string{deny}, "allow_private": true})
			msg := sdktest.Fails(t, p.Call("http_request", RequestArgs{URL: srv.URL}), sdk.CodePolicy)
			if !strings.Contains(msg, "deny_hosts") {
				t.Errorf("deny %s: message %q", deny, msg)
			}
		}
	})
	t.Run("deny by resolved address", func(t *testing.T) {
		p := newPlugin(t, map[string]any{"allow_private": true, "deny_hosts": []string{"127.0.0.0/8", "::1"}})
		msg := sdktest.Fails(t, p.Call("http_request", RequestArgs{URL: "http://localhost:" + port + "/"}), sdk.CodePolicy)
		if !strings.Contains(msg, "which is in deny_hosts") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("redirects followed", func(t *testing.T) {
		r := decode(t, newPlugin(t, local).Call("http_request", RequestArgs{URL: srv.URL + "/twice"}))
		if r.Body != "done" || r.Redirects != 2 || r.FinalURL != srv.URL+"/done" {
			t.Errorf("response %+v", r)
		}
	})
	t.Run("redirect to a denied host", func(t *testing.T) {
		before := hits.Load()
		p := newPlugin(t, map[string]any{"allow_hosts": []string{"127.0.0.1", "*.example.test"}, "deny_hosts": []string{"denied.example.test"}})
		msg := sdktest.Fails(t, p.Call("http_request", RequestArgs{URL: srv.URL + "/to-denied"}), sdk.CodePolicy)
		if !strings.Contains(msg, "denied.example.test is in deny_hosts") || hits.Load() != before+1 {
			t.Errorf("message %q, hits %d", msg, hits.Load()-before)
		}
	})
	t.Run("redirect outside allow_hosts", func(t *testing.T) {
		msg := sdktest.Fails(t, newPlugin(t, local).Call("http_request", RequestArgs{URL: srv.URL + "/to-other"}), sdk.CodePolicy)
		if !strings.Contains(msg, "not in allow_hosts") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("redirect to another scheme", func(t *testing.T) {
		sdktest.Fails(t, newPlugin(t, local).Call("http_request", RequestArgs{URL: srv.URL + "/to-ftp"}), sdk.CodeValidation)
	})
	t.Run("too many redirects", func(t *testing.T) {
		msg := sdktest.Fails(t, newPlugin(t, local).Call("http_request", RequestArgs{URL: srv.URL + "/loop"}), sdk.CodeToolExec)
		if !strings.Contains(msg, "too many redirects") {
			t.Errorf("message %q", msg)
		}
		p := newPlugin(t, map[string]any{"allow_hosts": []string{"127.0.0.1"}, "max_redirects": 1})
		sdktest.Fails(t, p.Call("http_request", RequestArgs{URL: srv.URL + "/twice"}), sdk.CodeToolExec)
	})
}

// TestRebinding checks that the policy applies to the addresses a name
// resolves to when the connection is made, whatever the name: a fake resolver
// answers with loopback, and nothing beyond 127.0.0.1 is ever dialled.
func TestRebinding(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") })
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	c := newClient()
	c.dialer.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if host != "rebind.example.test" {
			return nil, fmt.Errorf("unexpected lookup of %s", host)
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	p := sdktest.New(t, c.group(), &sdktest.Options{Config: map[string]any{"allow_hosts": []string{"rebind.example.test"}}})
	msg := sdktest.Fails(t, p.Call("http_request", RequestArgs{URL: "http://rebind.example.test:" + port + "/"}), sdk.CodePolicy)
	if !strings.Contains(msg, "rebind.example.test resolves to 127.0.0.1, a loopback address: refused") {
		t.Errorf("message %q", msg)
	}
}

func TestValidation(t *testing.T) {
	p := newPlugin(t, local)
	for _, args := range []RequestArgs{
		{Method: "TRACE", URL: "http://127.0.0.1/"},
		{Method: "CONNECT", URL: "http://127.0.0.1/"},
		{URL: "ftp://127.0.0.1/"},
		{URL: "file:///etc/passwd"},
		{URL: "/relative/path"},
		{URL: "127.0.0.1:80"},
		{URL: "http:///nohost"},
		{URL: "http://127.0.0.1/", TimeoutSeconds: -1},
		{URL: "http://127.0.0.1/", Headers: map[string]string{"X-Bad": "a\r\nInjected: 1"}},
	} {
		sdktest.Fails(t, p.Call("http_request", args), sdk.CodeValidation)
	}
	sdktest.Fails(t, p.Call("http_request", map[string]any{}), sdk.CodeValidation)
}

func TestConfig(t *testing.T) {
	for _, cfg := range []string{
		`{"bogus": 1}`,
		`{"allow_hosts": "127.0.0.1"}`,
		`{"allow_hosts": ["not a host"]}`,
		`{"deny_hosts": ["10.0.0.0/99"]}`,
		`{"deny_hosts": ["*."]}`,
		`{"max_response_bytes": -1}`,
		`{"max_timeout_seconds": -1}`,
		`{"max_redirects": -1}`,
	} {
		err := newGroup().OnConfigure(context.Background(), &sdk.ConfigureRequest{Config: []byte(cfg)})
		if !errors.Is(err, sdk.Errorf(sdk.CodeValidation, "")) {
			t.Errorf("config %s: error %v, want a validation error", cfg, err)
		}
	}
	g := newGroup()
	if err := g.OnConfigure(context.Background(), &sdk.ConfigureRequest{Config: []byte(`{"bogus": 1}`)}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown key: error %v", err)
	}
}

func TestSubprocess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin")
	}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "from a subprocess") })
	p := sdktest.Exec(t, sdktest.Build(t, "."), &sdktest.Options{Config: local})
	r := decode(t, p.Call("http_request", RequestArgs{URL: srv.URL}))
	if r.Body != "from a subprocess" || r.Status != 200 {
		t.Errorf("response %+v", r)
	}
}
