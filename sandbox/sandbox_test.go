package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/netpolicy"
	"github.com/toolhost/toolhost/sandbox/internal/stage"
)

// run runs a bash command line under p in dir and returns its combined
// output and exit status (-1 for an error before it ran).
func run(t *testing.T, p *Policy, dir, line string) (string, int) {
	t.Helper()
	cmd, err := Command(context.Background(), p, []string{"bash", "-c", line})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C"}
	err = cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%s: %v", line, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// hostFiles is a tree on the host the sandbox must keep out of: a root the
// command may write, with the host's data directory inside it, and a
// secret outside.
type hostFiles struct {
	root, data, secret, outside string
}

func newHostFiles(t *testing.T) hostFiles {
	t.Helper()
	base := t.TempDir()
	h := hostFiles{
		root:    filepath.Join(base, "root"),
		data:    filepath.Join(base, "root", "data"),
		outside: filepath.Join(base, "outside"),
	}
	h.secret = filepath.Join(h.outside, "id_rsa")
	for _, d := range []string{h.data, h.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(h.data, "toolhost.db"), h.secret} {
		if err := os.WriteFile(f, []byte("SECRET"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// TestAttacks runs each attack inside the sandbox and outside it: outside,
// it must succeed (so the row can fail), inside it must fail, and the
// files it aimed at must be unchanged.
func TestAttacks(t *testing.T) {
	h := newHostFiles(t)
	policy := &Policy{ReadWrite: []string{h.root}, Hidden: []string{h.data}}
	for _, tc := range []struct {
		name, line string
	}{
		{"read /etc/shadow", "head -c 64 /etc/shadow | grep -q ."},
		{"list /root", "ls /root >/dev/null"},
		{"read the data dir's database", "grep -q SECRET " + h.data + "/toolhost.db"},
		{"read a secret outside the roots", "grep -q SECRET " + h.secret},
		{"write outside the roots", "echo x > " + h.outside + "/planted"},
		{"write into /usr", "echo x > /usr/planted"},
		{"write into /etc", "echo x > /etc/planted"},
		{"overwrite the data dir's database", "echo x > " + h.data + "/toolhost.db"},
		{"list / (Landlock: mounted, but not in the ruleset)", "ls / >/dev/null"},
		{"make a user namespace", "unshare -U true"},
		{"see the host's processes", fmt.Sprintf("test -d /proc/%d", os.Getpid())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := exec.Command("bash", "-c", tc.line).CombinedOutput(); err != nil {
				t.Fatalf("outside the sandbox the attack fails already (%v: %s): the row proves nothing", err, out)
			}
			// Undo what the attack did outside before trying it inside.
			os.Remove(filepath.Join(h.outside, "planted"))
			os.Remove("/usr/planted")
			os.Remove("/etc/planted")
			os.WriteFile(filepath.Join(h.data, "toolhost.db"), []byte("SECRET"), 0o600)

			out, code := run(t, policy, h.root, tc.line)
			if code == 0 {
				t.Errorf("inside the sandbox it succeeded: %s", out)
			}
			for _, f := range []string{filepath.Join(h.outside, "planted"), "/usr/planted", "/etc/planted"} {
				if _, err := os.Stat(f); err == nil {
					t.Errorf("%s was created", f)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(h.data, "toolhost.db")); string(b) != "SECRET" {
				t.Errorf("the database now holds %q", b)
			}
		})
	}
}

func TestWhatACommandHas(t *testing.T) {
	h := newHostFiles(t)
	out, code := run(t, &Policy{ReadWrite: []string{h.root}, ReadOnly: []string{h.outside}}, h.root, strings.Join([]string{
		"echo made > made && cat made",                            // the root is writable
		"cat " + h.secret + "; echo",                              // a read_only path is readable
		"echo x 2>/dev/null > " + h.secret + " || echo read-only", // but not writable
		`echo "$HOME $TMPDIR $PWD"`,                               // a fresh HOME, /tmp, the working dir
		"touch $HOME/h /tmp/t && echo tmp-ok",                     // both writable
		"ls " + h.data + " | wc -l",                               // not hidden: the data dir shows
		"hostname",
		"id -u",
		"node -e 'console.log(1+1)' 2>/dev/null || echo no-node",
	}, "; "))
	want := "made\nSECRET\nread-only\n/home/sandbox /tmp " + h.root + "\ntmp-ok\n1\nsandbox\n0\n"
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Fatalf("exit %d, output:\n%s\nwant it to start with:\n%s", code, out, want)
	}
	if b, err := os.ReadFile(filepath.Join(h.root, "made")); err != nil || string(b) != "made\n" {
		t.Errorf("the file made in the root: %q, %v", b, err)
	}
}

func TestNetwork(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "reached %s", r.Host)
	}))
	defer srv.Close()
	curl := "curl -sS -m 5 -o /dev/stdout -w ' %{http_code}' "
	if out, err := exec.Command("bash", "-c", curl+srv.URL).CombinedOutput(); err != nil || !strings.Contains(string(out), "reached") {
		t.Fatalf("the test server is not reachable from the host: %v %s", err, out)
	}

	t.Run("none", func(t *testing.T) {
		out, code := run(t, &Policy{}, "", curl+srv.URL)
		if code == 0 || strings.Contains(out, "reached") {
			t.Errorf("the host's loopback was reached: exit %d, %s", code, out)
		}
	})

	// The proxy resolves public.example to a public address, which the
	// policy permits, and dials the test server instead: nothing leaves
	// loopback.
	defer func(old func(*netpolicy.Policy) *netpolicy.Dialer) { proxyDialer = old }(proxyDialer)
	proxyDialer = func(p *netpolicy.Policy) *netpolicy.Dialer {
		return &netpolicy.Dialer{
			Policy: p,
			Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
				if host == "public.example" || host == "other.example" {
					return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
				}
				return nil, fmt.Errorf("no such host %s", host)
			},
			Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
			},
		}
	}
	allowed := &Policy{Network: NetworkAllowed, Config: netpolicy.Config{AllowHosts: []string{"public.example"}}}
	for _, tc := range []struct{ url, want string }{
		{"http://public.example/", "reached public.example 200"},
		{srv.URL, "refused by the network policy"},
		{"http://other.example/", "refused by the network policy"},
	} {
		t.Run("allowed "+tc.url, func(t *testing.T) {
			cmd, err := Command(context.Background(), allowed, []string{"bash", "-c", curl + tc.url})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			_ = cmd.Run()
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("got %q, want %q", out.String(), tc.want)
			}
			if refused := cmd.Refusals(); tc.want != "reached public.example 200" && len(refused) != 1 {
				t.Errorf("refusals %v", refused)
			}
		})
	}
	t.Run("allowed, without the proxy", func(t *testing.T) {
		out, code := run(t, allowed, "", "curl -sS -m 5 --noproxy '*' "+srv.URL)
		if code == 0 || strings.Contains(out, "reached") {
			t.Errorf("reached the host around the proxy: %s", out)
		}
	})
}

func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits Limits
		line   string
		check  func(out string, code int) error
	}{
		{"a fork bomb stops at the process limit", Limits{Processes: 40},
			`perl -e '$n=0; while($n<500){ $p=fork(); last unless defined $p; if(!$p){sleep 3; exit 0} $n++ } print $n'`,
			func(out string, code int) error {
				n, err := strconv.Atoi(strings.TrimSpace(out))
				if err != nil || n >= 40 || n < 20 {
					return fmt.Errorf("forked %q times, want fewer than 40", out)
				}
				return nil
			}},
		{"memory past the limit", Limits{MemoryMB: 256},
			`perl -e '$x = "a" x (1024*1024*1024); print "allocated\n"'`,
			func(out string, code int) error {
				if code == 0 || strings.Contains(out, "allocated") {
					return fmt.Errorf("exit %d: %s", code, out)
				}
				return nil
			}},
		{"CPU time", Limits{CPUSeconds: 1}, "while :; do :; done",
			func(out string, code int) error {
				if code != 128+9 {
					return fmt.Errorf("exit %d, want %d (SIGKILL)", code, 128+9)
				}
				return nil
			}},
		{"file size", Limits{FileSizeMB: 1}, "head -c 2000000 /dev/zero > /tmp/big; stat -c %s /tmp/big",
			func(out string, code int) error {
				if !strings.Contains(out, "1048576") {
					return fmt.Errorf("the file grew past 1 MiB: %s", out)
				}
				return nil
			}},
		{"open files", Limits{OpenFiles: 32},
			`perl -e 'for $i (1..100) { open($f[$i], "<", "/dev/null") or last; $n++ } print $n'`,
			func(out string, code int) error {
				if n, _ := strconv.Atoi(strings.TrimSpace(out)); n == 0 || n >= 32 {
					return fmt.Errorf("opened %q files, want fewer than 32", out)
				}
				return nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(t, &Policy{Limits: tc.limits}, "", tc.line)
			if err := tc.check(out, code); err != nil {
				t.Error(err)
			}
			// This process (the plugin, or the host) still starts processes.
			if err := exec.Command("true").Run(); err != nil {
				t.Errorf("after the sandbox: %v", err)
			}
		})
	}
}

// TestLimitsWithBridge: with network = "allowed" the stage that runs the
// bridge stays, and the limits still reach the command.
func TestLimitsWithBridge(t *testing.T) {
	out, code := run(t, &Policy{Network: NetworkAllowed, Limits: Limits{OpenFiles: 32, MemoryMB: 300, CPUSeconds: 7}}, "", "ulimit -n; ulimit -v; ulimit -t")
	if want := "32\n307200\n7\n"; code != 0 || out != want {
		t.Errorf("exit %d, limits %q, want %q", code, out, want)
	}
}

// TestKillEndsEverything cancels a command whose processes hide in the
// background: none of them survives, and the sandbox leaves nothing behind.
func TestKillEndsEverything(t *testing.T) {
	marker := proctest.Marker()
	sleepers := func(marker string) int { return proctest.Running("sleep", marker) }
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := Command(ctx, &Policy{Network: NetworkAllowed}, []string{"bash", "-c", "setsid sleep " + marker + " & (sleep " + marker + " &) ; echo started; wait"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	proctest.Eventually(t, "2 sleepers run", func() bool { return sleepers(marker) == 2 })
	cancel()
	_ = cmd.Wait()
	proctest.Eventually(t, "no sleeper outlives the sandbox", func() bool { return sleepers(marker) == 0 })
	if _, err := os.Stat(cmd.tmp); err == nil {
		t.Errorf("the proxy's directory %s is still there", cmd.tmp)
	}
}

func TestRefusals(t *testing.T) {
	for name, p := range map[string]*Policy{
		"off":                   {Off: true},
		"unknown network":       {Network: "lan"},
		"relative path":         {ReadWrite: []string{"work"}},
		"rules without allowed": {Config: netpolicy.Config{AllowHosts: []string{"example.com"}}},
		"bad host entry":        {Network: NetworkAllowed, Config: netpolicy.Config{AllowHosts: []string{"exa mple"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Command(context.Background(), p, []string{"true"}); err == nil {
				t.Error("Command accepted it")
			}
		})
	}
	t.Run("working dir outside the paths", func(t *testing.T) {
		cmd, err := Command(context.Background(), &Policy{}, []string{"true"})
		if err != nil {
			t.Fatal(err)
		}
		cmd.Dir = t.TempDir()
		if err := cmd.Run(); err == nil || !strings.Contains(err.Error(), "working directory") {
			t.Errorf("Run = %v", err)
		}
	})
}

// TestWithoutBubblewrap: no bwrap on PATH, no command, and a message that
// says what to install and how to opt out.
func TestWithoutBubblewrap(t *testing.T) {
	available.Lock()
	saved := available.path
	available.path = ""
	available.Unlock()
	defer func() {
		available.Lock()
		available.path = saved
		available.Unlock()
	}()
	t.Setenv("PATH", t.TempDir())
	_, err := Command(context.Background(), &Policy{}, []string{"true"})
	if err == nil || !strings.Contains(err.Error(), "apt-get install bubblewrap") || !strings.Contains(err.Error(), `sandbox = "off"`) {
		t.Fatalf("Command = %v", err)
	}
}

// TestArgsProperty: whatever the policy, bubblewrap's command line makes
// every namespace but the network's (and that one unless the network is the
// host's), runs the stage as the sandbox's PID 1 and leaves bubblewrap alive
// when its parent dies (see lifeline.go), binds read-write only the
// policy's ReadWrite paths, binds nothing else of the host but the system
// directories, the policy's ReadOnly paths and the sandbox's own files, and
// covers every hidden path inside a bound one after the binds.
func TestArgsProperty(t *testing.T) {
	base := t.TempDir()
	pool := []string{"/a", "/a/b", "/a/b/c", "/d", "/d/file", "/e"}
	for _, p := range pool {
		if strings.HasSuffix(p, "file") {
			os.WriteFile(base+p, nil, 0o600)
		} else {
			os.MkdirAll(base+p, 0o755)
		}
	}
	subset := func(rt *rapid.T, label string) []string {
		var out []string
		for _, p := range rapid.SliceOfDistinct(rapid.SampledFrom(pool), rapid.ID).Draw(rt, label) {
			out = append(out, base+p)
		}
		return out
	}
	rapid.Check(t, func(rt *rapid.T) {
		p := &Policy{
			ReadWrite: subset(rt, "rw"),
			ReadOnly:  subset(rt, "ro"),
			Hidden:    subset(rt, "hidden"),
			Network:   rapid.SampledFrom([]Network{"", NetworkNone, NetworkAllowed, NetworkHost}).Draw(rt, "network"),
			Limits:    Limits{Processes: -1},
		}
		cmd, err := Command(context.Background(), p, []string{"true"})
		if err != nil {
			rt.Fatal(err)
		}
		if err := cmd.Prepare(); err != nil {
			rt.Fatal(err)
		}
		defer cmd.Close()
		args := cmd.Args[1:slices.Index(cmd.Args, "--")]
		for _, flag := range []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--disable-userns", "--as-pid-1", "--new-session"} {
			if !slices.Contains(args, flag) {
				rt.Fatalf("no %s in %q", flag, args)
			}
		}
		if slices.Contains(args, "--die-with-parent") { // bubblewrap must outlive its parent while it sets up
			rt.Fatalf("--die-with-parent in %q", args)
		}
		if slices.Contains(args, "--unshare-net") == (p.Network == NetworkHost) {
			rt.Fatalf("network %q, --unshare-net %v", p.Network, slices.Contains(args, "--unshare-net"))
		}
		if i := slices.Index(args, "--cap-drop"); i < 0 || args[i+1] != "ALL" {
			rt.Fatalf("capabilities kept: %q", args)
		}
		lastBind := map[string]int{} // target → position of its last bind
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "--bind":
				if src, dst := args[i+1], args[i+2]; src != dst || !slices.Contains(p.ReadWrite, dst) {
					rt.Fatalf("--bind %s %s: not a read_write path", src, dst)
				}
				lastBind[args[i+2]] = i
				i += 2
			case "--ro-bind":
				src, dst := args[i+1], args[i+2]
				switch {
				case src == dst && (slices.Contains(p.ReadOnly, dst) || slices.Contains(systemDirs, dst)):
				case dst == "/etc" || dst == stage.InitPath || dst == stage.ProxyPath:
				case src == "/dev/null" && slices.Contains(p.Hidden, dst):
				default:
					rt.Fatalf("--ro-bind %s %s: not the policy's", src, dst)
				}
				lastBind[dst] = i
				i += 2
			}
		}
		// The most specific path decides: nothing binds over a listed path
		// after the path's own bind.
		for _, x := range slices.Concat(p.ReadWrite, p.ReadOnly) {
			for target, at := range lastBind {
				if rel, err := filepath.Rel(target, x); err == nil && filepath.IsLocal(rel) && at > lastBind[x] {
					rt.Fatalf("%s is bound by %s after its own bind: %q", x, target, args)
				}
			}
		}
		for _, h := range p.Hidden {
			if !p.Visible(h) {
				continue
			}
			covered := -1
			for i := range args {
				if args[i] == h && i > 0 && (args[i-1] == "--tmpfs" || args[i-2] == "--ro-bind" && args[i-1] == "/dev/null") {
					covered = i
				}
			}
			for target, at := range lastBind {
				if rel, err := filepath.Rel(target, h); err == nil && filepath.IsLocal(rel) && at > covered {
					rt.Fatalf("hidden %s is bound again by %s after it is covered: %q", h, target, args)
				}
			}
			if covered < 0 {
				rt.Fatalf("hidden %s is visible: %q", h, args)
			}
		}
	})
}

// TestAccessTo: what AccessTo says of a host path is what a process in the
// sandbox finds there: the most specific path decides, a path in both
// lists is read-only, a hidden path holds nothing; and the sandbox shows
// nothing of the host elsewhere.
func TestAccessTo(t *testing.T) {
	dir := t.TempDir()
	path := func(rel string) string { return filepath.Join(dir, rel) }
	for _, d := range []string{"rw/ro", "rw/secret", "ro/rw", "both", "other"} {
		if err := os.MkdirAll(path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &Policy{ReadWrite: []string{path("rw"), path("ro/rw"), path("both")}, ReadOnly: []string{path("rw/ro"), path("ro"), path("both")},
		Hidden: []string{path("rw/secret")}}
	for _, tc := range []struct {
		rel  string
		want Access
	}{
		{"rw", AccessReadWrite}, {"rw/ro", AccessReadOnly}, {"rw/secret", AccessHidden}, {"ro", AccessReadOnly},
		{"ro/rw", AccessReadWrite}, {"both", AccessReadOnly}, {"other", AccessNone}, {".", AccessNone},
	} {
		t.Run(tc.rel, func(t *testing.T) {
			if got := p.AccessTo(path(tc.rel)); got != tc.want {
				t.Fatalf("AccessTo(%s) = %d, want %d", tc.rel, got, tc.want)
			}
			f := path(tc.rel + "/f")
			if err := os.WriteFile(f, []byte("host\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(f)
			out, _ := run(t, p, "", fmt.Sprintf("cat %[1]q 2>/dev/null || echo none; echo x 2>/dev/null >> %[1]q && echo wrote", f))
			want := map[Access]string{AccessHidden: "none\n", AccessReadOnly: "host\n", AccessReadWrite: "host\nwrote\n"}[tc.want]
			if tc.want == AccessNone { // nothing of the host's, or the sandbox's own /tmp
				if strings.Contains(out, "host") {
					t.Errorf("inside the sandbox: %q, the host's file", out)
				}
				return
			}
			if out != want {
				t.Errorf("inside the sandbox: %q, want %q", out, want)
			}
		})
	}
	if got := p.AccessTo("/usr/bin/env"); got != AccessReadOnly {
		t.Errorf("a system directory: %d", got)
	}
}
