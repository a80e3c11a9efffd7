package main

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/sandboxtest"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// chromeLimits are the limits of config.hcl's chrome sandbox: Chromium
// reserves far more address space than it uses, and runs many threads.
var chromeLimits = sandbox.Limits{MemoryMB: -1, Processes: 2048}

// newPlugin serves a fresh browser's group in-process; the browser is
// stopped when the test ends.
func newPlugin(t *testing.T, cfg map[string]any) (*sdktest.Plugin, *browser) {
	t.Helper()
	b := newBrowser()
	t.Cleanup(b.close)
	return sdktest.New(t, newGroup(b), &sdktest.Options{Config: cfg}), b
}

func TestChromiumMissing(t *testing.T) {
	for name, cfg := range map[string]func(t *testing.T) map[string]any{
		"chromium_path names no file": func(*testing.T) map[string]any {
			return map[string]any{"chromium_path": "/nonexistent/chromium", "allow_hosts": []string{"127.0.0.2"}}
		},
		"nothing on PATH": func(t *testing.T) map[string]any {
			t.Setenv("PATH", t.TempDir())
			return map[string]any{"allow_hosts": []string{"127.0.0.2"}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			p, _ := newPlugin(t, cfg(t))
			if p.Spec.ID != "chrome" || len(p.Spec.Tools) != 9 {
				t.Fatalf("the group must load without Chromium; spec = %+v", p.Spec)
			}
			for _, call := range []struct {
				tool string
				args any
			}{
				{"navigate", NavigateArgs{URL: "http://127.0.0.2:1/"}},
				{"get_text", TextArgs{}},
			} {
				if msg := sdktest.Fails(t, p.Call(call.tool, call.args), sdk.CodeToolExec); msg != notFound {
					t.Errorf("%s: message %q, want %q", call.tool, msg, notFound)
				}
			}
		})
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []string{
		`{"headless": "yes"}`, `{"path": "/usr/bin/chromium"}`,
		`{"allow_hosts": ["not a host"]}`, `{"deny_hosts": "10.0.0.0/8"}`, `{"deny_hosts": ["10.0.0.0/99"]}`,
	} {
		err := newGroup(newBrowser()).Configure(context.Background(), &sdk.ConfigureRequest{Config: []byte(cfg)})
		if err == nil || !strings.Contains(err.Error(), "config: ") {
			t.Errorf("Configure(%s) = %v, want a config error", cfg, err)
		}
	}
}

// server is a test server on a loopback address that counts what reaches
// it.
type server struct {
	*httptest.Server
	conns, hits atomic.Int32
}

// newServer starts a server on ip, a loopback address.
func newServer(t *testing.T, ip string, h http.Handler) *server {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	s.Listener.Close()
	s.Listener = ln
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// hostPort is the server's address, "127.0.0.2:PORT".
func (s *server) hostPort() string { return s.Listener.Addr().String() }

// formPage has a form whose button copies the field into #out, and an
// element that appears after a moment.
const formPage = `<!doctype html><title>Form</title><body style="margin:0">
<input id="name"><button id="go" onclick="document.getElementById('out').innerText = 'hello ' + document.getElementById('name').value">go</button>
<p id="out"></p><div id="late" style="display:none;width:50px;height:20px;background:red">late</div>
<script>setTimeout(() => { document.getElementById('late').style.display = 'block' }, 200)</script>
<div style="height:3000px"></div></body>`

// swScript is a service worker that fetches the URL each message names
// and answers on the message's port.
const swScript = `self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('message', e => {
  fetch(e.data).then(r => r.text().then(t => r.status + ' ' + t), err => 'error ' + err).then(v => e.ports[0].postMessage(v));
});`

// pages serves the test pages (on 127.0.0.2): a greeting, a redirect to
// it, a page that never ends, a form, redirects to the victim, a service
// worker, and a WebSocket endpoint that completes the handshake.
func pages(victim string, release <-chan struct{}) http.Handler {
	mux := http.NewServeMux()
	html := func(w http.ResponseWriter, s string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(s))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		html(w, `<!doctype html><title>Greeting</title><body><h1>Hi</h1><p id="greeting">Hello, <b>toolhost</b>!</p></body>`)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/form", func(w http.ResponseWriter, r *http.Request) { html(w, formPage) })
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.ReplaceAll(r.URL.Query().Get("u"), "VICTIM", victim), http.StatusFound)
	})
	mux.HandleFunc("/sw.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write([]byte(swScript))
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			base64.StdEncoding.EncodeToString(sum[:]))
		_, _ = io.Copy(io.Discard, conn) // until the browser closes it
	})
	return mux
}

// TestChromium drives one real browser through every tool and every attack
// on the network policy: pages on 127.0.0.2 (allowed), a victim on
// 127.0.0.1 (refused) that must see nothing. It fails, never skips, without
// Chromium: scripts/test installs it.
func TestChromium(t *testing.T) {
	if _, err := findChromium(""); err != nil {
		t.Fatalf("%s (%v)", notFound, err)
	}
	victim := newServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Write([]byte("secret"))
	}))
	udpVictim, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udpVictim.Close() })
	var udpPackets atomic.Int32
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := udpVictim.ReadFrom(buf); err != nil {
				return
			}
			udpPackets.Add(1)
		}
	}()
	release := make(chan struct{}) // ends the slow page's response
	srv := newServer(t, "127.0.0.2", pages(victim.hostPort(), release))
	t.Cleanup(func() { close(release) })
	_, vport, _ := net.SplitHostPort(victim.hostPort())
	shots := t.TempDir()
	p, b := newPlugin(t, map[string]any{
		"allow_hosts":    []string{"127.0.0.2", "localhost"},
		"screenshot_dir": shots,
		"viewport":       map[string]int{"width": 800, "height": 600},
	})
	t.Cleanup(func() {
		if n, h, u := victim.conns.Load(), victim.hits.Load(), udpPackets.Load(); n+h+u != 0 {
			t.Errorf("the victim saw %d connections, %d requests, %d UDP packets", n, h, u)
		}
	})

	t.Run("pages", func(t *testing.T) {
		// The load reports its progress, ending with the load event.
		var steps []string
		ctx := toolhost.WithProgress(context.Background(), func(done, total float64, msg string) {
			steps = append(steps, fmt.Sprintf("%v/%v %s", done, total, msg))
		})
		res, err := p.Do(ctx, &toolhost.CallRequest{Tool: "navigate", Arguments: []byte(fmt.Sprintf(`{"url": %q}`, srv.URL+"/moved"))})
		if err != nil {
			t.Fatal(err)
		}
		var got pageInfo
		if err := json.Unmarshal([]byte(sdktest.OK(t, res)), &got); err != nil {
			t.Fatal(err)
		}
		if want := (pageInfo{URL: srv.URL + "/", Title: "Greeting"}); got != want {
			t.Errorf("navigate = %+v, want %+v", got, want)
		}
		if sc, _ := res.Meta[toolhost.MetaStructuredContent].(map[string]any); sc["url"] != got.URL || sc["title"] != got.Title {
			t.Errorf("structured content %v, want the page %+v", res.Meta[toolhost.MetaStructuredContent], got)
		}
		if len(steps) < 2 || !strings.HasPrefix(steps[0], "1/4 requesting "+srv.URL+"/moved") || steps[len(steps)-1] != "4/4 loaded" {
			t.Errorf("progress %q, want the request first and the load last", steps)
		}
		if text := sdktest.OK(t, p.Call("get_text", TextArgs{Selector: "#greeting"})); text != "Hello, toolhost!" {
			t.Errorf("get_text #greeting = %q", text)
		}
		if text := sdktest.OK(t, p.Call("get_text", TextArgs{})); !strings.HasPrefix(text, "Hi\n") || !strings.Contains(text, "Hello, toolhost!") {
			t.Errorf("get_text of the body = %q", text)
		}
		sdktest.Fails(t, p.Call("get_text", TextArgs{Selector: "#missing"}), sdk.CodeToolExec)
		sdktest.Fails(t, p.Call("get_text", TextArgs{Selector: "[["}), sdk.CodeToolExec)
	})

	t.Run("a call's deadline ends it, and the tab stays usable", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := b.navigate(ctx, &sdk.Request[NavigateArgs]{Args: NavigateArgs{URL: srv.URL + "/slow"}})
		if err == nil || ctx.Err() == nil {
			t.Fatalf("navigate to a page that never loads returned %v", err)
		}
		sdktest.OK(t, p.Call("navigate", NavigateArgs{URL: srv.URL + "/"}))
		if text := sdktest.OK(t, p.Call("get_text", TextArgs{Selector: "h1"})); text != "Hi" {
			t.Errorf("get_text h1 = %q", text)
		}
	})

	t.Run("interaction", func(t *testing.T) { interact(t, p, srv.URL+"/form", shots) })

	t.Run("navigate attacks", func(t *testing.T) {
		to := func(u string) string { return srv.URL + "/to?u=" + u }
		for _, tc := range []struct {
			url  string
			code sdk.Code
			want string // in the message
		}{
			{"http://127.0.0.1:" + vport + "/", sdk.CodePolicy, "host 127.0.0.1 is not in allow_hosts: refused"},
			{"http://[::1]:" + vport + "/", sdk.CodePolicy, "host ::1 is not in allow_hosts: refused"},
			{"http://localhost:" + vport + "/", sdk.CodePolicy, "localhost resolves to"},
			{"http://LocalHost:" + vport + "/", sdk.CodePolicy, "a loopback address: refused"},
			{"http://127.1:" + vport + "/", sdk.CodePolicy, "host 127.1 is not in allow_hosts"},
			{to("http://VICTIM/"), sdk.CodePolicy, "host 127.0.0.1 is not in allow_hosts: refused"},
			{to("https://VICTIM/"), sdk.CodePolicy, "host 127.0.0.1 is not in allow_hosts: refused"},
			{to("http://localhost:" + vport + "/"), sdk.CodePolicy, "localhost resolves to 127.0.0.1, a loopback address: refused"},
			{to("ws://VICTIM/"), sdk.CodeToolExec, ""}, // Chromium does not follow it
			{"file:///etc/passwd", sdk.CodePolicy, "the file: scheme is refused"},
			{"FILE:///etc/passwd", sdk.CodePolicy, "the file: scheme is refused"},
			{"chrome://version", sdk.CodePolicy, "the chrome: scheme is refused"},
			{"devtools://devtools/bundled/inspector.html", sdk.CodePolicy, "the devtools: scheme is refused"},
			{"javascript:fetch('http://127.0.0.1:" + vport + "/')", sdk.CodePolicy, "the javascript: scheme is refused"},
			{"data:text/html,<script>fetch('http://127.0.0.1:" + vport + "/')</script>", sdk.CodePolicy, "the data: scheme is refused"},
			{"about:blank", sdk.CodePolicy, "the about: scheme is refused"},
			{"view-source:" + srv.URL, sdk.CodePolicy, "the view-source: scheme is refused"},
			{"ws://127.0.0.2/", sdk.CodePolicy, "the ws: scheme is refused"},
			{"/relative", sdk.CodeValidation, ""},
			{"127.0.0.1:80", sdk.CodeValidation, ""},
			{"http:///nohost", sdk.CodeValidation, ""},
		} {
			msg := sdktest.Fails(t, p.Call("navigate", NavigateArgs{URL: tc.url}), tc.code)
			if !strings.Contains(msg, tc.want) {
				t.Errorf("navigate %s: message %q lacks %q", tc.url, msg, tc.want)
			}
		}
		sdktest.OK(t, p.Call("navigate", NavigateArgs{URL: srv.URL + "/"})) // still fine afterwards
	})

	t.Run("page script attacks", func(t *testing.T) {
		sdktest.OK(t, p.Call("navigate", NavigateArgs{URL: srv.URL + "/"}))
		victimURL := "http://" + victim.hostPort()
		wsOpen := `new Promise(res => { const w = new WebSocket(%q); w.onopen = () => res('open'); w.onerror = () => res('error') })`
		load := `new Promise(res => { const e = document.createElement(%q); e.onload = () => res('load'); e.onerror = () => res('error'); e.src = %q; document.body.append(e) })`
		sw := `(async () => {
			await navigator.serviceWorker.register('/sw.js');
			const reg = await navigator.serviceWorker.ready;
			return await new Promise(res => { const ch = new MessageChannel(); ch.port1.onmessage = e => res(e.data); reg.active.postMessage(%q, [ch.port2]) });
		})()`
		for _, tc := range []struct {
			name, script string
			want         string // the script's value, as JSON
			refused      string // the host the proxy must have refused, proving the request went through it
		}{
			{"fetch", fmt.Sprintf(`fetch(%q).then(r => r.text(), e => 'error')`, victimURL), `"error"`, "127.0.0.1"},
			{"fetch no-cors", fmt.Sprintf(`fetch(%q, {mode: 'no-cors'}).then(r => r.type, e => 'error')`, victimURL), `"error"`, "127.0.0.1"},
			{"fetch by name", fmt.Sprintf(`fetch('http://localhost:%s/').then(r => r.text(), e => 'error')`, vport), `"error"`, "localhost"},
			{"fetch [::1]", fmt.Sprintf(`fetch('http://[::1]:%s/').then(r => r.text(), e => 'error')`, vport), `"error"`, "::1"},
			{"fetch https", fmt.Sprintf(`fetch('https://%s/').then(r => r.text(), e => 'error')`, victim.hostPort()), `"error"`, "127.0.0.1"},
			{"img", fmt.Sprintf(load, "img", victimURL+"/i.png"), `"error"`, "127.0.0.1"},
			{"iframe", fmt.Sprintf(load, "iframe", victimURL+"/frame"), `"load"`, "127.0.0.1"}, // an error page loads in it
			{"WebSocket ws", fmt.Sprintf(wsOpen, "ws://"+victim.hostPort()+"/"), `"error"`, "127.0.0.1"},
			{"WebSocket wss", fmt.Sprintf(wsOpen, "wss://"+victim.hostPort()+"/"), `"error"`, "127.0.0.1"},
			{"WebSocket to an allowed host", fmt.Sprintf(wsOpen, "ws://"+srv.hostPort()+"/ws"), `"open"`, ""},
			{"service worker, allowed", fmt.Sprintf(sw, srv.URL+"/"), `"200 <!doctype html>`, ""},
			{"service worker", fmt.Sprintf(sw, "http://localhost:"+vport+"/"), `"error TypeError: Failed to fetch"`, "localhost"},
			{"WebRTC STUN over UDP", fmt.Sprintf(`new Promise(async res => {
				const pc = new RTCPeerConnection({iceServers: [{urls: 'stun:%s'}]});
				const cands = [];
				pc.onicecandidate = e => e.candidate ? cands.push(e.candidate.candidate) : res(cands);
				setTimeout(() => res(cands), 3000); // a network namespace with only loopback never ends the gathering
				pc.createDataChannel('x');
				await pc.setLocalDescription(await pc.createOffer());
			})`, udpVictim.LocalAddr()), `[]`, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				mark := b.proxy.Mark()
				got := sdktest.OK(t, p.Call("evaluate", EvalArgs{Expression: tc.script}))
				if !strings.HasPrefix(got, tc.want) {
					t.Errorf("the script gave %s, want %s", got, tc.want)
				}
				if tc.refused == "" {
					return
				}
				var hosts []string
				for _, r := range b.proxy.Since(mark) {
					if r.Host == tc.refused {
						return
					}
					hosts = append(hosts, r.Host)
				}
				t.Errorf("the proxy refused %q, not %s", hosts, tc.refused)
			})
		}
	})

	// Another session gets a tab of its own.
	t.Run("sessions", func(t *testing.T) {
		other := &sdk.CallRequest{Tool: "current_url", Arguments: []byte("{}"), Context: sdk.CallContext{Session: "s2"}}
		res, err := p.Do(context.Background(), other)
		if err != nil || res.Stdout != "about:blank" {
			t.Fatalf("a new session's tab: %+v, %v", res, err)
		}
	})

	// Last, as it kills the browser: the next call starts it again, with a
	// new proxy and the same policy.
	t.Run("a killed browser restarts", func(t *testing.T) {
		proc := chromedp.FromContext(b.tab).Browser.Process()
		if proc == nil {
			t.Fatal("no browser process")
		}
		_ = syscall.Kill(proc.Pid, syscall.SIGKILL)
		// The calls that still see the dying browser fail; a later one
		// starts a new one.
		for attempt := 1; !p.Call("navigate", NavigateArgs{URL: srv.URL}).OK; attempt++ {
			if attempt == 20 {
				t.Fatal("the browser did not come back")
			}
		}
		if text := sdktest.OK(t, p.Call("get_text", TextArgs{Selector: "#greeting"})); text != "Hello, toolhost!" {
			t.Fatalf("get_text after the restart = %q", text)
		}
		msg := sdktest.Fails(t, p.Call("navigate", NavigateArgs{URL: srv.URL + "/to?u=http://VICTIM/"}), sdk.CodePolicy)
		if !strings.Contains(msg, "127.0.0.1") {
			t.Errorf("redirect to the victim after the restart: %q", msg)
		}
	})
}

// interact drives every other tool on the form at formURL.
func interact(t *testing.T, p *sdktest.Plugin, formURL, shots string) {
	sdktest.OK(t, p.Call("navigate", NavigateArgs{URL: formURL}))
	sdktest.OK(t, p.Call("wait_visible", WaitArgs{Selector: "#late", TimeoutSeconds: 5}))
	sdktest.OK(t, p.Call("type", TypeArgs{Selector: "#name", Text: "ann"}))
	sdktest.OK(t, p.Call("click", SelectorArgs{Selector: "#go"}))
	if out := sdktest.OK(t, p.Call("get_text", TextArgs{Selector: "#out"})); out != "hello ann" {
		t.Errorf("after click: %q", out)
	}
	if html := sdktest.OK(t, p.Call("get_html", HTMLArgs{Selector: "#go"})); !strings.HasPrefix(html, `<button id="go"`) {
		t.Errorf("get_html = %q", html)
	}
	if v := sdktest.OK(t, p.Call("evaluate", EvalArgs{Expression: "Promise.resolve([document.title, window.innerWidth])"})); v != `["Form",800]` {
		t.Errorf("evaluate = %q", v)
	}
	sdktest.Fails(t, p.Call("evaluate", EvalArgs{Expression: "nope("}), sdk.CodeToolExec)
	if u := sdktest.OK(t, p.Call("current_url", struct{}{})); u != formURL {
		t.Errorf("current_url = %q", u)
	}
	sdktest.Fails(t, p.Call("wait_visible", WaitArgs{Selector: "#never", TimeoutSeconds: 1}), sdk.CodeTimeout)
	sdktest.Fails(t, p.Call("get_html", HTMLArgs{Selector: "#missing"}), sdk.CodeToolExec)

	sizes := map[string]int{}
	for name, args := range map[string]ShotArgs{"viewport": {}, "full": {FullPage: true}, "element": {Selector: "#late"}} {
		res := p.Call("screenshot", args)
		sdktest.OK(t, res)
		path, _ := res.Meta["path"].(string)
		data, err := os.ReadFile(path)
		if err != nil || !strings.HasPrefix(path, shots) || !bytes.HasPrefix(data, []byte("\x89PNG")) || len(res.Attachments) != 1 ||
			!bytes.Equal(res.Attachments[0].Data, data) || res.Attachments[0].MimeType != "image/png" {
			t.Fatalf("%s screenshot at %q: %d bytes, %v", name, path, len(data), err)
		}
		sizes[name] = len(data)
	}
	if !(sizes["element"] < sizes["viewport"] && sizes["viewport"] < sizes["full"]) {
		t.Errorf("screenshot sizes %v: want element < viewport < full page", sizes)
	}
}

// TestDefaultPolicy: with no policy keys, loopback is refused by address,
// before Chromium starts.
func TestDefaultPolicy(t *testing.T) {
	p, b := newPlugin(t, nil)
	for _, u := range []string{"http://127.0.0.1:1/", "http://[::1]:1/", "http://localhost:1/", "http://0.0.0.0:1/"} {
		if msg := sdktest.Fails(t, p.Call("navigate", NavigateArgs{URL: u}), sdk.CodePolicy); !strings.Contains(msg, "address: refused") {
			t.Errorf("navigate %s: %q", u, msg)
		}
	}
	if b.tab != nil || b.proxy != nil {
		t.Error("Chromium started for refused URLs")
	}
}

// TestInsideSandbox runs the tests above again with the plugin, Chromium
// and the test servers inside a sandbox like the one config.hcl's chrome
// block gives (no network but its own loopback, where the servers are).
func TestInsideSandbox(t *testing.T) {
	if sandboxtest.Inside() {
		return
	}
	sandboxtest.RerunInside(t, sandbox.Policy{Limits: chromeLimits})
}
