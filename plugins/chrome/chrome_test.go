package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

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
			return map[string]any{"chromium_path": "/nonexistent/chromium"}
		},
		"nothing on PATH": func(t *testing.T) map[string]any {
			t.Setenv("PATH", t.TempDir())
			return nil
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
				{"navigate", NavigateArgs{URL: "http://127.0.0.1:1/"}},
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
	for _, cfg := range []string{`{"headless": "yes"}`, `{"path": "/usr/bin/chromium"}`} {
		err := newGroup(newBrowser()).Configure(context.Background(), &sdk.ConfigureRequest{Config: []byte(cfg)})
		if err == nil || !strings.Contains(err.Error(), "config: ") {
			t.Errorf("Configure(%s) = %v, want a config error", cfg, err)
		}
	}
}

// TestChromium drives the real browser against a local server. It fails,
// never skips, without Chromium: scripts/test installs it.
func TestChromium(t *testing.T) {
	if _, err := findChromium(""); err != nil {
		t.Fatalf("%s (%v)", notFound, err)
	}
	release := make(chan struct{}) // ends the slow page's response
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><title>Greeting</title><body><h1>Hi</h1><p id="greeting">Hello, <b>toolhost</b>!</p></body>`))
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux) // on 127.0.0.1
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	p, b := newPlugin(t, nil)
	var got page
	if err := json.Unmarshal([]byte(sdktest.OK(t, p.Call("navigate", NavigateArgs{URL: srv.URL + "/moved"}))), &got); err != nil {
		t.Fatal(err)
	}
	if want := (page{URL: srv.URL + "/", Title: "Greeting"}); got != want {
		t.Errorf("navigate = %+v, want %+v", got, want)
	}
	if text := sdktest.OK(t, p.Call("get_text", TextArgs{Selector: "#greeting"})); text != "Hello, toolhost!" {
		t.Errorf("get_text #greeting = %q", text)
	}
	if text := sdktest.OK(t, p.Call("get_text", TextArgs{})); !strings.HasPrefix(text, "Hi\n") || !strings.Contains(text, "Hello, toolhost!") {
		t.Errorf("get_text of the body = %q", text)
	}
	sdktest.Fails(t, p.Call("get_text", TextArgs{Selector: "#missing"}), sdk.CodeToolExec)
	sdktest.Fails(t, p.Call("get_text", TextArgs{Selector: "[["}), sdk.CodeToolExec)
	for _, u := range []string{"file:///etc/passwd", "javascript:alert(1)", "/relative", "chrome://settings"} {
		sdktest.Fails(t, p.Call("navigate", NavigateArgs{URL: u}), sdk.CodeValidation)
	}

	t.Run("a call's deadline ends it, and the tab stays usable", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := b.navigate(ctx, &sdk.Request[NavigateArgs]{Args: NavigateArgs{URL: srv.URL + "/slow"}})
		if err == nil || ctx.Err() == nil || time.Since(start) > 5*time.Second {
			t.Fatalf("navigate to a page that never loads returned %v after %s", err, time.Since(start))
		}
		sdktest.OK(t, p.Call("navigate", NavigateArgs{URL: srv.URL + "/"}))
		if text := sdktest.OK(t, p.Call("get_text", TextArgs{Selector: "h1"})); text != "Hi" {
			t.Errorf("get_text h1 = %q", text)
		}
	})
}

// formPage has a form whose button copies the field into #out, and an
// element that appears after a moment.
const formPage = `<!doctype html><title>Form</title><body style="margin:0">
<input id="name"><button id="go" onclick="document.getElementById('out').innerText = 'hello ' + document.getElementById('name').value">go</button>
<p id="out"></p><div id="late" style="display:none;width:50px;height:20px;background:red">late</div>
<script>setTimeout(() => { document.getElementById('late').style.display = 'block' }, 200)</script>
<div style="height:3000px"></div></body>`

// TestChromiumInteraction drives every other tool on a local form, and
// keeps one tab per session.
func TestChromiumInteraction(t *testing.T) {
	if _, err := findChromium(""); err != nil {
		t.Fatalf("%s (%v)", notFound, err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(formPage))
	}))
	t.Cleanup(srv.Close)
	shots := t.TempDir()
	p, _ := newPlugin(t, map[string]any{"screenshot_dir": shots, "viewport": map[string]int{"width": 800, "height": 600}})
	sdktest.OK(t, p.Call("navigate", NavigateArgs{URL: srv.URL + "/form"}))
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
	if u := sdktest.OK(t, p.Call("current_url", struct{}{})); u != srv.URL+"/form" {
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

	// Another session gets a tab of its own.
	other := &sdk.CallRequest{Tool: "current_url", Arguments: []byte("{}"), Context: sdk.CallContext{Session: "s2"}}
	res, err := p.Do(context.Background(), other)
	if err != nil || res.Stdout != "about:blank" {
		t.Fatalf("a new session's tab: %+v, %v", res, err)
	}
}

// TestCrashedBrowserRestarts: a browser killed under the plugin is started
// again by the next call.
func TestCrashedBrowserRestarts(t *testing.T) {
	if _, err := findChromium(""); err != nil {
		t.Fatalf("%s (%v)", notFound, err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<!doctype html><title>Again</title><p id="p">alive</p>`))
	}))
	t.Cleanup(srv.Close)
	p, _ := newPlugin(t, nil)
	sdktest.OK(t, p.Call("navigate", NavigateArgs{URL: srv.URL}))
	children := childPids(t)
	if len(children) == 0 {
		t.Fatal("no browser process found")
	}
	for _, pid := range children {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := p.Call("navigate", NavigateArgs{URL: srv.URL})
		if res.OK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the browser did not come back: %+v", res.Error)
		}
	}
	if text := sdktest.OK(t, p.Call("get_text", TextArgs{Selector: "#p"})); text != "alive" {
		t.Fatalf("get_text after the restart = %q", text)
	}
}

// childPids lists this process's children, from /proc.
func childPids(t *testing.T) []int {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) {
			pid, _ := strconv.Atoi(strings.Split(f, "/")[2])
			out = append(out, pid)
		}
	}
	return out
}
