package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sandbox"
)

// TestGroupsPageStartFailure: a module that exits while starting in its
// sandbox (a script that prints markup and a terminal's escapes to its
// stderr, then reads a file the sandbox does not show) is listed under
// "Plugins not running" with the last lines of its stderr and the hint, as
// text: its markup makes no element, its escapes are shown escaped.
// GET /api/plugins, which carries them, is the admin's alone.
func TestGroupsPageStartFailure(t *testing.T) {
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.json")
	script := filepath.Join(dir, "server.sh")
	for name, text := range map[string]string{settings: "{}", script: "#!/bin/sh\n" +
		`printf '<img id="injected" src="x">\n\033[31mred\033[0m\n' >&2` + "\n" +
		"exec cat " + settings + " >&2\n"} {
		if err := os.WriteFile(name, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{Roles: []config.Role{{Name: "worker"}}, Plugins: []config.Plugin{{Name: "broken", Kind: config.KindMCP, Path: script,
		Restart: config.RestartNever, StartTimeout: time.Minute, Sandbox: &sandbox.Policy{}}}}
	srv, h := serve(t, cfg)

	var plugins []host.PluginStatus
	if code := get(t, srv.URL+"/api/plugins", &plugins); code != 200 || len(plugins) != 1 {
		t.Fatalf("GET /api/plugins = %d %+v", code, plugins)
	}
	last := plugins[0].LastError
	for _, want := range []string{"mcp_server broken: exited while starting", "\n  <img id=\"injected\" src=\"x\">\n  \\x1b[31mred\\x1b[0m\n",
		"cat: " + settings + ": No such file or directory", "read_only = [\"" + settings + "\"]"} {
		if !strings.Contains(last, want) {
			t.Errorf("lastError lacks %q:\n%s", want, last)
		}
	}

	b := newBrowser(t, srv.URL)
	b.open("#/groups", "groups")
	shown := b.text("#plugins-down pre.last-error")
	for _, want := range []string{`<img id="injected" src="x">`, `\x1b[31mred\x1b[0m`, "the sandbox is the likely cause", `read_only = ["` + settings + `"]`} {
		if !strings.Contains(shown, want) {
			t.Errorf("the page shows %q, without %q", shown, want)
		}
	}
	if first := b.text("#plugins-down td.error-text"); !strings.HasPrefix(first, "mcp_server broken: exited while starting") {
		t.Errorf("the error's first line: %q", first)
	}
	if eval[bool](b, `!!document.querySelector('#injected')`) {
		t.Error("the module's stderr made an element of the page")
	}

	worker, _, err := h.Store().CreateToken(context.Background(), "worker-ci", "worker", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	metrics, _, err := h.Tokens().CreateMetrics(context.Background(), "prometheus", time.Time{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []attack{
		{name: "no token", method: "GET", path: "/api/plugins", status: 401, code: toolhost.CodePolicy},
		{name: "a role token", method: "GET", path: "/api/plugins", token: worker, status: 403, code: toolhost.CodePolicy},
		{name: "a metrics token", method: "GET", path: "/api/plugins", token: metrics, status: 403, code: toolhost.CodePolicy},
		{name: "admin", method: "GET", path: "/api/plugins", token: testToken, status: 200},
	} {
		t.Run(a.name, func(t *testing.T) { a.send(t, srv) })
	}
}
