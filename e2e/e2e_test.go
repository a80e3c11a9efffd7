package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/hosttest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// pluginDir holds the first-party modules, built once for the package.
var pluginDir string

func TestMain(m *testing.M) {
	proctest.RunWithModules(m, "..", &pluginDir, "workspace", "command", "network", "chrome")
}

// startHost runs the four modules with the workspace roots given; the
// first is also the command's workdir.
func startHost(t testing.TB, roots ...string) *host.Host {
	t.Helper()
	src := fmt.Sprintf(`
plugin_dir = %q
data_dir   = %q
executor {
  approver = "approve"
}
builtin "workspace" {
  config {
    roots = %s
  }
}
builtin "command" {
  config {
    workdir = %q
  }
}
builtin "network" {
  config {
    allow_hosts = ["127.0.0.1"]
  }
}
plugin "chrome" {
  path = "chrome"
  config {
    allow_hosts    = ["127.0.0.1"]
    screenshot_dir = %q
  }
  sandbox {
    network    = "allowed"  # its proxy applies the config's allow_hosts
    read_write = [%[4]q]
    limits {
      memory_mb = -1
      processes = 2048
    }
  }
}`, pluginDir, t.TempDir(), hclList(roots), roots[0], filepath.Join(roots[0], "shots"))
	return runConfig(t, src)
}

// runConfig starts a host on the config src and closes it when the test
// ends; every module must be running.
func runConfig(t testing.TB, src string) *host.Host {
	t.Helper()
	return hosttest.Run(t, src)
}

// hclList writes strings as an HCL list.
func hclList(items []string) string {
	b, _ := json.Marshal(items)
	return string(b)
}

// TestEveryTool calls every tool of every first-party module through the host.
func TestEveryTool(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("alpha\nbeta\ngamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>E2E</title><body><input id="q"><button id="b" onclick="document.getElementById('o').innerText=document.getElementById('q').value">b</button><p id="o"></p></body>`)
	}))
	t.Cleanup(srv.Close)
	h := startHost(t, ws)

	calls := []struct {
		tool, args, want string
	}{
		{"get_workspace_info", `{}`, ws},
		{"list_files", `{"path": "."}`, "notes.txt"},
		{"read_file", `{"path": "notes.txt", "offset": 2, "limit": 1}`, "beta"},
		{"write_file", `{"path": "out/new.txt", "content": "one two two"}`, ""},
		{"edit_file", `{"path": "out/new.txt", "find": "two", "replace": "2", "all": true}`, "replaced 2"},
		{"find_files", `{"name_pattern": "*.txt"}`, "out/new.txt"},
		{"search_files", `{"pattern": "gam+a"}`, "notes.txt:3:gamma"},
		{"run_command", `{"command": "cat out/new.txt"}`, "one 2 2"},
		{"run_javascript", `{"code": "console.log([1,2,3].map(x => x * 2).join(','))"}`, "2,4,6"},
		{"http_request", fmt.Sprintf(`{"url": %q}`, srv.URL), `"status": 200`},
		{"navigate", fmt.Sprintf(`{"url": %q}`, srv.URL), `"title": "E2E"`},
		{"type", `{"selector": "#q", "text": "typed"}`, ""},
		{"click", `{"selector": "#b"}`, ""},
		{"wait_visible", `{"selector": "#o"}`, ""},
		{"get_text", `{"selector": "#o"}`, "typed"},
		{"get_html", `{"selector": "#b"}`, `<button id="b"`},
		{"evaluate", `{"expression": "document.title"}`, `"E2E"`},
		{"current_url", `{}`, srv.URL},
		{"screenshot", `{}`, filepath.Join(ws, "shots")},
	}
	ctx := context.Background()
	for _, c := range calls {
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: c.tool, Arguments: json.RawMessage(c.args)})
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.tool, err)
		case !res.OK:
			t.Errorf("%s: %+v", c.tool, res.Error)
		case !strings.Contains(res.Stdout, c.want):
			t.Errorf("%s: stdout %q lacks %q", c.tool, res.Stdout, c.want)
		}
	}
	var called []string
	for _, g := range h.Modules().Groups() {
		called = append(called, g.Tools...)
	}
	if len(called) != len(calls) {
		t.Errorf("the modules have %d tools, the test calls %d: %v", len(called), len(calls), called)
	}
}

// TestSafetyThroughTheHost: the modules' refusals reach the caller with their codes.
func TestSafetyThroughTheHost(t *testing.T) {
	ws := t.TempDir()
	h := startHost(t, ws)
	ctx := context.Background()
	for _, c := range []struct{ tool, args string }{
		{"read_file", `{"path": "../../etc/passwd"}`},
		{"write_file", `{"path": "/etc/evil", "content": "x"}`},
		{"run_command", `{"command": "rm -rf /"}`},
		{"run_command", `{"command": "pwd", "workdir": "/"}`},
		{"http_request", `{"url": "http://169.254.169.254/latest/meta-data/"}`},
	} {
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: c.tool, Arguments: json.RawMessage(c.args)})
		if err != nil || res.OK || res.Error.Code != toolhost.CodePolicy {
			t.Errorf("%s %s: %+v, %v; want policy", c.tool, c.args, res, err)
		}
	}
	start := time.Now()
	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "run_command", Arguments: json.RawMessage(`{"command": "echo partial; sleep 30", "timeout_seconds": 1}`)})
	if err != nil || res.Error == nil || res.Error.Code != toolhost.CodeTimeout || !strings.Contains(res.Stdout, "partial") {
		t.Fatalf("timeout: %+v, %v after %s", res, err, time.Since(start))
	}
}

// BenchmarkCommonCalls measures the cost of the calls agents make all day,
// through the whole host pipeline: read_file of a 1 MiB file, search_files
// over this repository, run_command true, and navigate + get_text of a local
// page.
func BenchmarkCommonCalls(b *testing.B) {
	repo, err := filepath.Abs("..")
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	line := strings.Repeat("x", 99) + "\n"
	if err := os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat(line, 1<<20/len(line))), 0o644); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Bench</title><body><p id="p">benchmark page</p></body>`)
	}))
	b.Cleanup(srv.Close)
	h := startHost(b, ws, repo)
	ctx := context.Background()
	call := func(tool, args string) {
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: json.RawMessage(args)})
		if err != nil || !res.OK {
			b.Fatalf("%s: %+v %v", tool, res, err)
		}
	}
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"read_file_1MiB", func() { call("read_file", `{"path": "big.txt", "limit": 100000}`) }},
		{"search_files_repo", func() { call("search_files", fmt.Sprintf(`{"path": %q, "pattern": "func New"}`, repo)) }},
		{"run_command_true", func() { call("run_command", `{"command": "true"}`) }},
		{"navigate_get_text", func() {
			call("navigate", fmt.Sprintf(`{"url": %q}`, srv.URL))
			call("get_text", `{"selector": "#p"}`)
		}},
	} {
		bc.run() // warm up: Chromium starts on the first call
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				bc.run()
			}
		})
	}
}
