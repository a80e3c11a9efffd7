package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
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
			if p.Spec.ID != "chrome" || len(p.Spec.Tools) != 2 {
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
