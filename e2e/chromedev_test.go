package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
)

// TestChromeLocalDevServer: chrome's README lets the browser load a local
// development server with one line, config { allow_hosts = ["127.0.0.1"] },
// and under config.hcl's sandbox for chrome (network = "allowed", whose
// proxy applies that same line) real Chromium loads it. Before, the
// sandbox's proxy refused it until the sandbox block repeated allow_hosts.
// What agents write cannot widen the line: a tool argument naming another
// address or a name, a redirect of the page and a script the agent runs in
// it all fail, and the other server sees no request.
func TestChromeLocalDevServer(t *testing.T) {
	v := newVictim(t, "127.0.0.2")
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Dev</title><body><h1 id="h">dev server</h1></body>`)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, v.url+"/", http.StatusFound) })
	dev := httptest.NewServer(mux) // on 127.0.0.1
	t.Cleanup(dev.Close)
	victim, _ := url.Parse(v.url)

	h := runConfig(t, fmt.Sprintf(`
plugin_dir = %q
data_dir   = %q
plugin "chrome" {
  path    = "chrome"
  restart = "on-failure"
  config {
    allow_hosts = ["127.0.0.1"]
  }
  sandbox {
    network = "allowed"
    limits {
      memory_mb = -1
      processes = 2048
    }
  }
}`, pluginDir, t.TempDir()))
	call := func(tool string, args map[string]any) *toolhost.Result {
		t.Helper()
		raw, _ := json.Marshal(args)
		res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: raw})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return res
	}

	if res := call("navigate", map[string]any{"url": dev.URL + "/"}); !res.OK || !strings.Contains(res.Stdout, `"title": "Dev"`) {
		t.Fatalf("navigate to the dev server: %+v %v", res, res.Error)
	}
	if res := call("get_text", map[string]any{"selector": "#h"}); res.Stdout != "dev server" {
		t.Fatalf("get_text: %+v", res)
	}
	attacks := map[string]struct {
		tool string
		args map[string]any
	}{
		"navigate to another loopback address": {"navigate", map[string]any{"url": v.url + "/"}},
		"navigate to a name for it":            {"navigate", map[string]any{"url": "http://localhost:" + victim.Port() + "/"}},
		"a redirect of the allowed page":       {"navigate", map[string]any{"url": dev.URL + "/away"}},
		"a script the agent runs in the page": {"evaluate", map[string]any{"expression": fmt.Sprintf(
			`fetch(%q, {mode: "no-cors"}).then(() => "reached", e => "refused: " + e)`, v.url+"/")}},
	}
	for name, a := range attacks {
		res := call(a.tool, a.args) // a policy error, or the page's failed fetch
		if refused := !res.OK && res.Error.Code == toolhost.CodePolicy || res.OK && strings.HasPrefix(res.Stdout, `"refused`); !refused {
			t.Errorf("%s: not refused: %q %v", name, res.Stdout, res.Error)
			continue
		}
		t.Logf("%s: %s %v", name, res.Stdout, res.Error)
	}
	if n := v.hits.Load(); n != 0 {
		t.Errorf("%d requests reached the server the config does not allow", n)
	}
}
