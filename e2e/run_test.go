package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestScriptsRun runs scripts/run as a new user does (in the repository, on
// config.hcl; only the address and the data and workspace directories are
// moved aside through config.hcl's overrides): it says each step (the
// build, binary by binary, then serve's start) and, once serve is ready,
// the page's address with the admin token, which opens the page and the
// API.
func TestScriptsRun(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t, "127.0.0.1")
	cmd := exec.Command(filepath.Join("..", "scripts", "run"))
	cmd.Env = append(os.Environ(), "TOOLHOST_LISTEN=127.0.0.1:"+port, "TOOLHOST_DATA_DIR="+filepath.Join(dir, "data"),
		"TOOLHOST_WORKSPACE="+filepath.Join(dir, "workspace"), "TOOLHOST_PLUGIN_DIR=", "TOOLHOST_LOG_LEVEL=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its poller and serve end with it
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	var log strings.Builder
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		for line := range lines { // serve's shutdown lines, until it closes stderr
			log.WriteString(line + "\n")
		}
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("scripts/run said:\n%s", log.String())
		}
	})

	// The build of a fresh clone takes minutes on a loaded machine: the
	// deadline is a bound on a hang, not on speed.
	ready := regexp.MustCompile(`^run: ready: open (http://127\.0\.0\.1:` + port + `/#token=(\S+))$`)
	var url, token string
	deadline := time.After(15 * time.Minute)
	for url == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("scripts/run ended before it was ready: %v", cmd.Wait())
			}
			log.WriteString(line + "\n")
			if m := ready.FindStringSubmatch(line); m != nil {
				url, token = m[1], m[2]
			}
		case <-deadline:
			t.Fatal("scripts/run was not ready after 15 minutes")
		}
	}
	said := log.String()
	for _, step := range []string{"run: building bin/toolhost", "build: [1/6] bin/toolhost from ./cmd/toolhost …",
		"build: [6/6] bin/plugins/notes: ", "run: starting bin/toolhost serve -config config.hcl", "serving: url=http://127.0.0.1:" + port} {
		if !strings.Contains(said, step) {
			t.Errorf("scripts/run did not say %q before it was ready", step)
		}
	}
	if serving := strings.Index(said, "serving: url="); serving < 0 || !strings.Contains(said[serving:], "run: ready: open") {
		t.Error("the ready line came before serve was serving")
	}

	get := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/", ""); code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("the page at %s: %d %.200s", url, code, body)
	}
	if code, body := get("/api/groups", token); code != 200 || !strings.Contains(body, `"workspace"`) {
		t.Errorf("GET /api/groups with the link's token: %d %.200s", code, body)
	}
	if code, _ := get("/api/groups", token+"x"); code != 401 {
		t.Errorf("GET /api/groups with another token: %d, want 401", code)
	}
}
