package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
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

// seenRequest is what a test server received.
type seenRequest struct {
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Header http.Header `json:"header"`
	Body   string      `json:"body"`
}

// recorder is a test server that records every request: /redirect sends
// the client on to its to parameter with the status in code, /echo answers
// with the request as JSON.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

// newRecorder starts a recorder listening on ip, a loopback address.
func newRecorder(t *testing.T, ip string) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen := seenRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: string(b)}
		rec.mu.Lock()
		rec.seen = append(rec.seen, seen)
		rec.mu.Unlock()
		switch r.URL.Path {
		case "/redirect":
			code, _ := strconv.Atoi(r.URL.Query().Get("code"))
			http.Redirect(w, r, r.URL.Query().Get("to"), cmp.Or(code, http.StatusFound))
		case "/echo":
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(seen)
		}
	}))
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	rec.Listener.Close()
	rec.Listener = l
	rec.Start()
	t.Cleanup(rec.Close)
	return rec
}

// requests returns what the recorder received so far, and forgets it.
func (rec *recorder) requests() []seenRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := rec.seen
	rec.seen = nil
	return seen
}

// redirect is the URL of rec's /redirect on to the URL with the status.
func (rec *recorder) redirect(to string, code int) string {
	return rec.URL + "/redirect?" + url.Values{"to": {to}, "code": {strconv.Itoa(code)}}.Encode()
}

// TestRedirectHeaders: a redirect that leaves the server a call named
// carries only headers that cannot hold a credential, whatever the
// credential's name; one row per way to leave, each with the headers the
// other server must not see, and one that stays, whose server sees all.
func TestRedirectHeaders(t *testing.T) {
	origin := newRecorder(t, "127.0.0.1")
	otherPort := newRecorder(t, "127.0.0.1")
	otherHost := newRecorder(t, "127.0.0.2") // loopback too: another host name
	p := newPlugin(t, map[string]any{"allow_hosts": []string{"127.0.0.0/8"}})
	credentials := map[string]string{
		"X-Api-Key":     "secret-key",
		"Private-Token": "secret-gitlab",
		"Authorization": "Bearer secret-token",
		"Cookie":        "session=secret-cookie",
	}
	safe := map[string]string{"Accept": "application/json", "Accept-Language": "fr", "User-Agent": "agent/1"}
	for _, tc := range []struct {
		name    string
		method  string
		url     string
		to      *recorder // where the request ends
		leaves  bool      // the credentials must not reach it, nor any server but origin
		body    bool      // the request reaching it has the body, and its Content-Type
		referer bool      // it is told where the client came from
	}{
		{"to another host", "GET", origin.redirect(otherHost.URL+"/echo", http.StatusFound), otherHost, true, false, false},
		{"to another port of the host", "GET", origin.redirect(otherPort.URL+"/echo", http.StatusFound), otherPort, true, false, false},
		{"to another host and back", "GET", origin.redirect(otherHost.redirect(origin.URL+"/echo", http.StatusFound), http.StatusFound), origin, true, false, false},
		{"307 to another host keeps the body", "POST", origin.redirect(otherHost.URL+"/echo", http.StatusTemporaryRedirect), otherHost, true, true, false},
		{"302 to another host drops the body", "POST", origin.redirect(otherHost.URL+"/echo", http.StatusFound), otherHost, true, false, false},
		{"within the server, everything", "POST", origin.redirect(origin.URL+"/echo", http.StatusTemporaryRedirect), origin, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := map[string]string{"Content-Type": "text/plain"}
			maps.Copy(headers, credentials)
			maps.Copy(headers, safe)
			r := decode(t, p.Call("http_request", RequestArgs{Method: tc.method, URL: tc.url, Headers: headers, Body: "the body"}))
			var got seenRequest
			if err := json.Unmarshal([]byte(r.Body), &got); err != nil || got.Path != "/echo" || r.FinalURL != tc.to.URL+"/echo" {
				t.Fatalf("ended at %s with %q (%v)", r.FinalURL, r.Body, err)
			}
			for k, v := range safe {
				if got.Header.Get(k) != v {
					t.Errorf("%s: %q, want %q", k, got.Header.Get(k), v)
				}
			}
			if hasBody := got.Body == "the body" && got.Header.Get("Content-Type") == "text/plain"; hasBody != tc.body {
				t.Errorf("body %q with Content-Type %q, want the body: %v", got.Body, got.Header.Get("Content-Type"), tc.body)
			}
			if (got.Header.Get("Referer") != "") != tc.referer {
				t.Errorf("Referer %q", got.Header.Get("Referer"))
			}
			if !tc.leaves {
				for k, v := range credentials {
					if got.Header.Get(k) != v {
						t.Errorf("%s: %q, want %q: a redirect within the server keeps it", k, got.Header.Get(k), v)
					}
				}
			}
			// What must be unchanged: no credential reached a server the
			// call did not name, nor the named one after the request left it.
			seen := map[string][]seenRequest{"origin": origin.requests(), "other port": otherPort.requests(), "other host": otherHost.requests()}
			for name, reqs := range seen {
				for i, req := range reqs {
					if name == "origin" && (i == 0 || !tc.leaves) {
						continue
					}
					for k, vs := range req.Header {
						if strings.Contains(strings.Join(vs, " "), "secret") {
							t.Errorf("the %s server got %s: %s at %s", name, k, vs, req.Path)
						}
					}
				}
			}
		})
	}
}

// TestSameServer: which redirects stay with the server, for headers.
func TestSameServer(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		same     bool
	}{
		{"http://api.example.com/a", "http://api.example.com/b", true},
		{"http://api.example.com/a", "http://API.example.com:80/b", true},
		{"https://api.example.com/a", "https://api.example.com:443/b", true},
		{"http://api.example.com/a", "https://api.example.com/b", true},  // an upgrade
		{"https://api.example.com/a", "http://api.example.com/b", false}, // a downgrade: in clear
		{"http://api.example.com:8080/a", "https://api.example.com:8443/b", false},
		{"http://api.example.com/a", "http://api.example.com:8080/b", false},
		{"http://api.example.com/a", "http://evil.example.com/b", false},
		{"http://example.com/a", "http://sub.example.com/b", false},
		{"http://127.0.0.1:80/a", "http://127.0.0.2:80/b", false},
		{"http://[::1]:80/a", "http://[::1]/b", true},
	} {
		from, _ := url.Parse(tc.from)
		to, _ := url.Parse(tc.to)
		if got := sameServer(from, to); got != tc.same {
			t.Errorf("%s → %s: same server %v, want %v", tc.from, tc.to, got, tc.same)
		}
	}
}
