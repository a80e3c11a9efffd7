package host

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sandbox"
)

// failedStart starts a host on the block, which must fail to start, and
// returns its status and what the host logged.
func failedStart(t *testing.T, p config.Plugin) (PluginStatus, string) {
	t.Helper()
	return failedStartAt(t, p, hclog.Info)
}

// failedStartAt is failedStart with the host logging at level.
func failedStartAt(t *testing.T, p config.Plugin, level hclog.Level) (PluginStatus, string) {
	t.Helper()
	p.Restart = config.RestartNever
	var buf proctest.Buffer
	opts := testOptions(t)
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: io.MultiWriter(&buf, testLog{t}), Level: level})
	h := runHost(t, &config.Config{Limits: config.Limits{Timeout: proctest.Patience}, Plugins: []config.Plugin{p}}, opts)
	st := plugin(h, p.Name)
	if st.State != StateFailed || st.ErrorCode != toolhost.CodePluginExited {
		t.Fatalf("%s: %+v, want failed with plugin_exited", p.Name, st)
	}
	return st, buf.String()
}

// errorLogged reports whether the log has the line at ERROR level that says
// the module did not start, with each line of each of the texts in its
// entry (the error's lines follow it, indented).
func errorLogged(log string, texts ...string) bool {
	i := strings.Index(log, "plugin refused")
	if i < 0 {
		return false
	}
	start := strings.LastIndexByte(log[:i], '\n') + 1
	entry := log[start:]
	if end := strings.Index(entry, "\n20"); end >= 0 { // the next entry's timestamp
		entry = entry[:end]
	}
	if first, _, _ := strings.Cut(entry, "\n"); !strings.Contains(first, "[ERROR]") {
		return false
	}
	for _, text := range texts {
		for _, l := range strings.Split(text, "\n") {
			if !strings.Contains(entry, strings.TrimSpace(l)) {
				return false
			}
		}
	}
	return true
}

// TestStartFailureSandboxHint: a module that exits while starting in its
// sandbox (a real bubblewrap sandbox, a real process) because the sandbox
// hides what it reads or refuses what it writes reports the last lines of
// its stderr and the sandbox block that fixes it, in its status (what
// GET /api/plugins and the page show) and in the log at error level; with
// that block it starts. Where the sandbox is not the cause (a file the
// host lacks too) no hint is given.
func TestStartFailureSandboxHint(t *testing.T) {
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(settings, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		pol   sandbox.Policy
		line  string // of its stderr
		block string // the hint's, "" for no hint
		fixed sandbox.Policy
	}{
		{name: "reads a file the sandbox hides", env: map[string]string{readFileEnv: settings},
			line:  "cannot load its settings: open " + settings + ": no such file or directory",
			block: "  sandbox {\n    read_only = [\"" + settings + "\"]\n  }",
			fixed: sandbox.Policy{ReadOnly: []string{settings}}},
		{name: "writes where the sandbox is read-only", env: map[string]string{writeFileEnv: filepath.Join(state, "db")},
			pol:   sandbox.Policy{ReadOnly: []string{dir}},
			line:  "cannot keep its state: open " + filepath.Join(state, "db") + ": read-only file system",
			block: "  sandbox {\n    read_write = [\"" + state + "\"]\n  }",
			fixed: sandbox.Policy{ReadOnly: []string{dir}, ReadWrite: []string{state}}},
		{name: "a file the host lacks too", env: map[string]string{readFileEnv: filepath.Join(dir, "missing.json")},
			pol:  sandbox.Policy{ReadOnly: []string{dir}},
			line: "cannot load its settings: open " + filepath.Join(dir, "missing.json") + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := sandboxedPlugin("settled", "needsfiles", &tc.pol, tc.env)
			st, log := failedStart(t, p)
			if !strings.Contains(st.LastError, "exited before the handshake (exit status 1)\nthe last lines of its stderr:\n") ||
				!strings.Contains(st.LastError, "\n  "+tc.line+"\n") && !strings.HasSuffix(st.LastError, "\n  "+tc.line) {
				t.Errorf("the error lacks the stderr line %q:\n%s", tc.line, st.LastError)
			}
			if got := strings.Contains(st.LastError, "the sandbox is the likely cause"); got != (tc.block != "") {
				t.Errorf("hint given: %v, want %v:\n%s", got, tc.block != "", st.LastError)
			}
			if tc.block != "" && !strings.Contains(st.LastError, `in the block plugin "settled", say:`+"\n"+tc.block) {
				t.Errorf("the error lacks the block\n%s\n%s", tc.block, st.LastError)
			}
			if !errorLogged(log, tc.line, tc.block) {
				t.Errorf("no error line in the log with %q and the hint:\n%s", tc.line, log)
			}
			if tc.block == "" {
				return
			}
			p.Sandbox = &tc.fixed
			h := startHost(t, p)
			if st := plugin(h, "settled"); st.State != StateRunning {
				t.Fatalf("with the hint's block: %+v", st)
			}
		})
	}
}

// TestStartFailureNPMPackageOutside: npm's memory server in the default
// sandbox, which shows its command but not the packages beside it, exits
// while starting with node's ERR_MODULE_NOT_FOUND; the error says so and
// gives the node_modules to add read-only, and with that block it starts.
func TestStartFailureNPMPackageOutside(t *testing.T) {
	modules := filepath.Join(mcptest.NPMDir(), "node_modules")
	p := config.Plugin{Name: "memory", Kind: config.KindMCP, Path: mcptest.NPMServer(t, "mcp-server-memory"),
		StartTimeout: proctest.Patience} // no sandbox block: the default sandbox
	st, log := failedStart(t, p)
	block := "in the block mcp_server \"memory\", say:\n  sandbox {\n    read_only = [\"" + modules + "\"]\n  }"
	for _, want := range []string{"mcp_server memory: exited while starting (exit status 1)", "the last lines of its stderr:\n  ",
		"ERR_MODULE_NOT_FOUND", "the sandbox is the likely cause: it does not show " + modules, block} {
		if !strings.Contains(st.LastError, want) {
			t.Errorf("the error lacks %q:\n%s", want, st.LastError)
		}
	}
	if !errorLogged(log, "ERR_MODULE_NOT_FOUND", block) {
		t.Errorf("no error line in the log with the stderr and the hint:\n%s", log)
	}
	p.Sandbox = &sandbox.Policy{ReadOnly: []string{modules}}
	h := startHost(t, p)
	if st := plugin(h, "memory"); st.State != StateRunning {
		t.Fatalf("with the hint's block: %+v", st)
	}
}

// hostileStderr is what the hostilestderr test plugin writes to its stderr
// before it exits: megabytes, then lines that would clear a terminal, forge
// log lines, reverse text and break UTF-8.
func hostileStderr(w io.Writer) {
	line := strings.Repeat("x", 1<<20)
	for range 4 {
		fmt.Fprint(w, line)
	}
	fmt.Fprint(w, "\n"+strings.Repeat("y", 100<<10)+"\n")
	fmt.Fprint(w, "\x1b[2J\x1b[31mred\x1b[0m alert\n")
	fmt.Fprint(w, "2026-01-01T00:00:00.000Z [ERROR] host: forged: plugin=admin\n")
	fmt.Fprint(w, "half\r2026-01-01T00:00:00.000Z [INFO]  overwritten\n")
	fmt.Fprint(w, "bidi \u202eexe.txt and \xff\xfe broken\n")
}

// TestStartFailureHostileStderr: what a module writes to its stderr is its
// own text: in the error and the log, however much it wrote, it stays a few
// lines of a few hundred bytes, with its control characters escaped, so it
// neither starts a line of the log of its own nor carries a terminal's
// escape sequences; the page shows it as text (TestGroupsPageStartFailure
// in server).
func TestStartFailureHostileStderr(t *testing.T) {
	p, _ := sandboxedPlugin("hostile", "hostilestderr", &sandbox.Policy{}, nil)
	st, log := failedStart(t, p)
	if len(st.LastError) > 4<<10 {
		t.Errorf("the error is %d bytes", len(st.LastError))
	}
	for _, raw := range []string{"\x1b", "\r", "\u202e", "\xff"} {
		if strings.Contains(st.LastError, raw) || strings.Contains(log, raw) {
			t.Errorf("%q reached the error or the log", raw)
		}
	}
	for _, want := range []string{`\x1b[2J\x1b[31mred\x1b[0m alert`, `half\r2026-01-01T00:00:00.000Z [INFO]  overwritten`,
		`bidi \u202eexe.txt and \xff\xfe broken`, "\n  2026-01-01T00:00:00.000Z [ERROR] host: forged", "\n  …yyy"} {
		if !strings.Contains(st.LastError, want) {
			t.Errorf("the error lacks %q:\n%s", want, st.LastError)
		}
	}
	if strings.Contains(st.LastError, "xxx") {
		t.Error("the error holds the first megabytes")
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "2026-01-01") {
			t.Errorf("a log line of the module's: %q", l)
		}
	}
	if len(log) > 64<<10 {
		t.Errorf("the log grew to %d bytes", len(log))
	}
	if !errorLogged(log, `\x1b[2J`) {
		t.Errorf("no error line in the log with the stderr:\n%s", log)
	}
}

// hostileLog is what the hostilelog test plugin writes to its stderr
// before it exits: hclog JSON whose message, module and argument (its key
// too) would forge a line of the host's log, with a terminal's escapes and
// a carriage return, and a line that is not JSON with a terminal's escapes.
func hostileLog(w io.Writer) {
	forged := "\n2026-12-03T00:00:00.000Z [ERROR] toolhost: FORGED LINE \x1b[31mred\x1b[0m\r"
	line, _ := json.Marshal(map[string]any{"@level": "error", "@message": "forged" + forged, "@module": "toolhost" + forged,
		"arg" + forged: "value" + forged, "list": []string{"item" + forged}})
	fmt.Fprintf(w, "%s\n", line)
	fmt.Fprint(w, "\x1b[2J\x1b[31mnot json\x1b[0m\r\n")
}

// TestPluginLogIsEscaped: a plugin's hclog messages, their module and
// arguments, and its other stderr lines reach the host's log (at trace, so
// that all of them do) escaped: none starts a line of the log of its own or
// carries ESC or a carriage return.
func TestPluginLogIsEscaped(t *testing.T) {
	_, log := failedStartAt(t, testPlugin("hostilelog", "hostilelog", nil), hclog.Trace)
	for _, raw := range []string{"\x1b", "\r"} {
		if strings.Contains(log, raw) {
			t.Errorf("%q reached the log:\n%q", raw, log)
		}
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " |"), "2026-12-03T00:00:00.000Z") {
			t.Errorf("a log line of the plugin's: %q", l)
		}
	}
	for _, want := range []string{`forged\n2026-12-03T00:00:00.000Z [ERROR] toolhost: FORGED LINE \x1b[31mred\x1b[0m\r`, `\x1b[2J\x1b[31mnot json\x1b[0m`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}

// TestSandboxHint: what sandboxHint makes of a module's last stderr lines,
// by the paths they name and the sandbox the module ran in. The stderr is
// the module's to write: a path in the host's data or its config file, a
// system file, a dot directory or one that holds the module's command is
// never hinted, whatever the line says.
func TestSandboxHint(t *testing.T) {
	dir := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	outside, shown, data := mk("outside"), mk("shown"), mk("shown/data")
	modules := mk("app/node_modules")
	pkg := mk("app/node_modules/srv/dist")
	odd := mk("odd${x}")
	hostData, bin, ssh := mk("hostdata"), mk("app/bin"), mk("home/.ssh")
	npmCache := mk("home/.cache/npm/node_modules/srv")
	conf, token, key := filepath.Join(dir, "config.hcl"), filepath.Join(hostData, "admin.token"), filepath.Join(ssh, "id_ed25519")
	server := filepath.Join(bin, "server")
	for _, f := range []string{conf, token, key, server} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	scope := hintScope{roots: []string{dir}, secret: []string{hostData, conf}}
	block := func(lists ...string) string {
		return "in the block mcp_server \"m\", say:\n  sandbox {\n    " + strings.Join(lists, "\n    ") + "\n  }"
	}
	for _, tc := range []struct {
		name  string
		own   *sandbox.Policy // the block's
		lines []string
		want  []string // in the hint; none: no hint
	}{
		{name: "no path", lines: []string{"Error: something failed", "exit"}},
		{name: "a path the sandbox does not show", lines: []string{"open " + outside + "/conf: no such file or directory", "Error: cannot read '" + outside + "'."},
			want: []string{"it does not show " + outside + ", which", block(`read_only = ["` + outside + `"]`)}},
		{name: "the block's own list kept", own: &sandbox.Policy{ReadOnly: []string{shown}}, lines: []string{"ENOENT: " + outside},
			want: []string{block(`read_only = ["` + shown + `", "` + outside + `"]`)}},
		{name: "a file the host lacks too", lines: []string{"open " + outside + "/missing/x: no such file"}},
		{name: "a package's node_modules", lines: []string{"Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'x' imported from " + modules + "/.bin/srv"},
			want: []string{block(`read_only = ["` + modules + `"]`)}},
		{name: "a file: URL", lines: []string{"    at file://" + modules + "/srv/dist/index.js:12:5"},
			want: []string{block(`read_only = ["` + modules + `"]`)}},
		{name: "a write refused", own: &sandbox.Policy{ReadOnly: []string{shown}}, lines: []string{"EROFS: read-only file system, open '" + data + "/db.json'"},
			want: []string{"it shows " + data + " read-only, where the module writes", block(`read_write = ["` + data + `"]`)}},
		{name: "a write refused in its package", own: &sandbox.Policy{ReadOnly: []string{modules}}, lines: []string{"Error: EROFS: read-only file system, open '" + pkg + "/memory.jsonl'"},
			want: []string{"writes inside its own package (" + pkg + "/memory.jsonl), which stays read-only", "MEMORY_FILE_PATH"}},
		{name: "a write refused in a system directory", lines: []string{"open /usr/lib/x: read-only file system"}},
		{name: "the host's data, hidden", own: &sandbox.Policy{ReadOnly: []string{shown}, Hidden: []string{data}}, lines: []string{"open " + data + "/store.db: permission denied"}},
		{name: "the kernel's", lines: []string{"open /proc/sys/kernel/x: permission denied", "/dev/kvm: no such file"}},
		{name: "a path that is no HCL template", lines: []string{"cannot open " + odd},
			want: []string{`read_only = ["` + strings.ReplaceAll(odd, "${", "$${") + `"]`}},
		{name: "paths looked at are bounded", lines: []string{strings.Repeat("/nonexistent/x ", maxHintPaths) + outside}},
		{name: "the admin token, its data directory not shown", own: &sandbox.Policy{Hidden: []string{hostData}},
			lines: []string{"open " + token + ": no such file or directory", "ENOENT " + hostData + "/toolhost.db"}},
		{name: "the config file", lines: []string{"cannot read " + conf}},
		{name: "a directory holding the config file", lines: []string{"ENOENT: " + dir}},
		{name: "a system file", lines: []string{"open /etc/shadow: no such file or directory", "open /etc/passwd: no such file", "open /root: permission denied"}},
		{name: "a system directory to write", lines: []string{"bwrap: Can't create file at /etc/shadow: Read-only file system"}},
		{name: "a dot directory", lines: []string{"open " + key + ": no such file", "open " + ssh + ": no such file"}},
		{name: "a write beside the module's command", own: &sandbox.Policy{ReadOnly: []string{bin}}, lines: []string{"EROFS: read-only file system, open '" + bin + "/state.json'"}},
		{name: "a node_modules in an npm cache", lines: []string{"Cannot find module " + npmCache + "/index.js"},
			want: []string{block(`read_only = ["` + filepath.Dir(npmCache) + `"]`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &config.Plugin{Name: "m", Kind: config.KindMCP, Sandbox: tc.own}
			pol := tc.own
			if pol == nil {
				pol = &sandbox.Policy{}
			}
			sc := scope
			sc.exes = []string{server}
			hint := sandboxHint(p, pol, sc, tc.lines)
			if len(tc.want) == 0 && hint != "" {
				t.Fatalf("a hint:\n%s", hint)
			}
			for _, want := range tc.want {
				if !strings.Contains(hint, want) {
					t.Errorf("the hint lacks %q:\n%s", want, hint)
				}
			}
		})
	}
}
