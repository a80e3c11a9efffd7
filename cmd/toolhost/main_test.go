package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/toolhost/toolhost/internal/proctest"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"toolhost": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/script/*.txtar against the toolhost command, with
// the example notes plugin built into $PLUGIN_DIR (also TOOLHOST_PLUGIN_DIR),
// a free port in $PORT, and what scripts need to run go (scriptGoEnv).
func TestScripts(t *testing.T) {
	pluginDir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "notes"), "../../examples/notes").CombinedOutput()
	if err != nil {
		t.Fatalf("build notes: %v\n%s", err, out)
	}
	goEnv := scriptGoEnv(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PLUGIN_DIR", pluginDir)
			env.Setenv("TOOLHOST_PLUGIN_DIR", pluginDir)
			for k, v := range goEnv {
				env.Setenv(k, v)
			}
			port, err := proctest.FreePort()
			env.Setenv("PORT", strconv.Itoa(port))
			return err
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"httpget": httpget, "waitfile": waitfile, "capture": capture},
	})
}

// httpget [-token T] URL FILE [REGEXP] waits for URL to answer
// (and, with REGEXP, for its body to match), then writes the status line and
// body to FILE. With -token it sends Authorization: Bearer T.
func httpget(ts *testscript.TestScript, neg bool, args []string) {
	var token string
	if len(args) > 1 && args[0] == "-token" {
		token, args = args[1], args[2:]
	}
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: httpget [-token T] URL FILE [REGEXP]")
	}
	var want *regexp.Regexp
	if len(args) == 3 {
		want = regexp.MustCompile(args[2])
	}
	var out []byte
	var err error
	for deadline := time.Now().Add(proctest.Patience); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, args[0], nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err != nil {
			continue
		}
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		out, err = fmt.Appendf(nil, "%s\n%s", resp.Status, body), rerr
		if err == nil && (want == nil || want.Match(body)) {
			break
		}
	}
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), out, 0o644))
}

// waitfile FILE N REGEXP waits until FILE (written by a background
// command) has at least N lines matching REGEXP: what the command was to do
// by then, whenever it gets to it.
func waitfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: waitfile FILE N REGEXP")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	re := regexp.MustCompile("(?m)" + args[2])
	matches := func() int { b, _ := os.ReadFile(ts.MkAbs(args[0])); return len(re.FindAll(b, -1)) }
	for deadline := time.Now().Add(proctest.Patience); matches() < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile: %s has %d lines matching %s after %s, want %d", args[0], matches(), args[2], proctest.Patience, n)
		}
	}
}

// capture VAR FILE REGEXP sets VAR to REGEXP's first submatch in FILE (such
// as an id a command printed), for later commands.
func capture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: capture VAR FILE REGEXP")
	}
	m := regexp.MustCompile(args[2]).FindStringSubmatch(ts.ReadFile(args[1]))
	if len(m) < 2 {
		ts.Fatalf("capture: %s does not match %s", args[1], args[2])
	}
	ts.Setenv(args[0], m[1])
}
