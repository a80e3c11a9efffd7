package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// TestSandboxAttacks: what an agent holding run_command tries. Each row
// succeeds with sandbox = "off" (so it can fail) and is refused by the
// default sandbox, leaving the host's files as they were.
func TestSandboxAttacks(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	data := filepath.Join(root, "data") // the host's data dir, inside the workspace as in config.hcl
	for _, d := range []string{data, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(data, "toolhost.db")
	if err := os.WriteFile(db, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "REACHED") }))
	defer srv.Close()

	cfg := map[string]any{"workdir": root}
	open := newPluginWith(t, cfg, []string{data}, &sandbox.Policy{Off: true})
	confined := newPluginWith(t, cfg, []string{data}, nil)
	for _, tc := range []struct{ name, command string }{
		{"read /etc/shadow", "head -c 32 /etc/shadow"},
		{"list /root", "ls -d /root/."},
		{"read the data dir's database", "cat " + db},
		{"read it through a relative path", "cat data/toolhost.db"},
		{"write outside the roots", "echo planted > " + outside + "/planted && echo done"},
		{"reach a loopback server", "curl -sS -m 5 " + srv.URL},
		{"see the plugin's process", "test -d /proc/" + strconv.Itoa(os.Getpid()) + " && echo seen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res := open.Call("run_command", RunArgs{Command: tc.command}); !res.OK || res.Stdout == "" {
				t.Fatalf("without the sandbox the attack fails already (%+v): the row proves nothing", res)
			}
			os.Remove(filepath.Join(outside, "planted"))
			res := confined.Call("run_command", RunArgs{Command: tc.command})
			if res.OK || strings.Contains(res.Stdout, "SECRET") || strings.Contains(res.Stdout, "REACHED") {
				t.Errorf("in the sandbox: ok %v, stdout %q, stderr %q", res.OK, res.Stdout, res.Stderr)
			}
			if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
				t.Error("a file was planted outside the roots")
			}
		})
	}
	if b, _ := os.ReadFile(db); string(b) != "SECRET" {
		t.Errorf("the database holds %q", b)
	}
	// The roots themselves stay usable.
	if out := sdktest.OK(t, confined.Call("run_command", RunArgs{Command: "echo kept > notes.txt && cat notes.txt && ls"})); out != "kept\ndata\nnotes.txt\n" {
		t.Errorf("in the root: %q", out)
	}
}

// TestSandboxNetworkAllowed: with network = "allowed", loopback is refused
// by the shared policy and the message says so.
func TestSandboxNetworkAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "REACHED") }))
	defer srv.Close()
	p := newPluginWith(t, nil, nil, &sandbox.Policy{Network: sandbox.NetworkAllowed})
	res := p.Call("run_command", RunArgs{Command: "curl -sS -f -m 5 " + srv.URL})
	msg := sdktest.Fails(t, res, sdk.CodeToolExec)
	if !strings.Contains(msg, "the network policy refused: 127.0.0.1") || !strings.Contains(msg, "loopback") || strings.Contains(res.Stdout, "REACHED") {
		t.Errorf("message %q, stdout %q", msg, res.Stdout)
	}
}

// TestSandboxLimits: a fork bomb and a runaway allocation end at their
// limits; the plugin, a real subprocess, keeps serving.
func TestSandboxLimits(t *testing.T) {
	p := sdktest.Exec(t, sdktest.Build(t, "."), &sdktest.Options{
		Sandbox: &sandbox.Policy{Limits: sandbox.Limits{Processes: 64, MemoryMB: 512}},
	})
	res := p.Call("run_command", RunArgs{Command: `perl -e '$n=0; while($n<1000){ $p=fork(); last unless defined $p; if(!$p){sleep 2; exit 0} $n++ } print $n'`})
	if n, err := strconv.Atoi(strings.TrimSpace(res.Stdout)); err != nil || n >= 64 {
		t.Errorf("the fork bomb forked %q times (stderr %q), want fewer than 64", res.Stdout, res.Stderr)
	}
	res = p.Call("run_command", RunArgs{Command: `perl -e '$x = "a" x (1024*1024*1024); print "allocated\n"'`})
	if res.OK || strings.Contains(res.Stdout, "allocated") {
		t.Errorf("1 GiB under a 512 MiB limit: %+v", res)
	}
	if out := sdktest.OK(t, p.Call("run_command", RunArgs{Command: "echo still serving"})); out != "still serving\n" {
		t.Errorf("after the limits: %q", out)
	}
}

// TestWithoutBubblewrap: without bwrap every command is refused, saying
// what to install and how to opt out, but the denylist still answers
// first with its own message.
func TestWithoutBubblewrap(t *testing.T) {
	p := sdktest.Exec(t, sdktest.Build(t, "."), &sdktest.Options{Env: map[string]string{"PATH": t.TempDir()}})
	msg := sdktest.Fails(t, p.Call("run_command", RunArgs{Command: "echo hi"}), sdk.CodePolicy)
	if !strings.Contains(msg, "apt-get install bubblewrap") || !strings.Contains(msg, `sandbox = "off"`) {
		t.Errorf("message %q", msg)
	}
	msg = sdktest.Fails(t, p.Call("run_command", RunArgs{Command: "rm -rf /"}), sdk.CodePolicy)
	if !strings.HasPrefix(msg, "command refused: ") || strings.Contains(msg, "bubblewrap") {
		t.Errorf("the denylist's message %q", msg)
	}
}

// newPluginWith is newPlugin with the host's paths and the block's sandbox.
func newPluginWith(t *testing.T, cfg map[string]any, hostPaths []string, sb *sandbox.Policy) *sdktest.Plugin {
	t.Helper()
	return sdktest.New(t, newGroup(), &sdktest.Options{Config: cfg, HostPaths: hostPaths, Sandbox: sb})
}
