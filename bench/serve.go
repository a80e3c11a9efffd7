package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/server"
	"github.com/toolhost/toolhost/store"
)

// serveProc is a running `toolhost serve`.
type serveProc struct {
	*process
	base   string        // http://127.0.0.1:PORT
	client *http.Client  // sends the admin token
	ready  time.Duration // from just before the process started to the first 200 from /readyz
	stderr bytes.Buffer
}

// process is a started child process, whose exit is watched.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited
}

// startProcess starts cmd and watches for its exit.
func startProcess(cmd *exec.Cmd) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// pollOK GETs url with client every interval until it answers 200, or
// fails once the process has exited or after timeout.
func (p *process) pollOK(client *http.Client, url string, every, timeout time.Duration) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	expired := time.After(timeout)
	for {
		if resp, err := client.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("it exited (%v) before GET %s answered 200", p.cmd.ProcessState, url)
		case <-expired:
			return fmt.Errorf("GET %s did not answer 200 within %s", url, timeout)
		case <-tick.C:
		}
	}
}

// freePort returns a loopback address nothing listens on right now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startServe runs bin/toolhost serve with the config, a fresh data directory
// under tmp and a free port, and waits (polling /readyz every 500µs) until
// it answers 200.
func startServe(root, tmp, cfgFile string) (*serveProc, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	data, err := os.MkdirTemp(tmp, "data-")
	if err != nil {
		return nil, err
	}
	token := store.NewSecret()
	s := &serveProc{base: "http://" + addr, client: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}}
	cmd := exec.Command(filepath.Join(root, "bin/toolhost"), "serve", "-config", cfgFile, "-log-level", "warn")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TOOLHOST_DATA_DIR="+data, "TOOLHOST_LISTEN="+addr, "TOOLHOST_TOKEN="+token)
	cmd.Stderr = &s.stderr
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	if s.process, err = startProcess(cmd); err != nil {
		return nil, err
	}
	if err := s.pollOK(client, s.base+"/readyz", 500*time.Microsecond, 30*time.Second); err != nil {
		s.stop()
		return nil, fmt.Errorf("toolhost serve: %w: %s", err, s.stderr.String())
	}
	s.ready = time.Since(start)
	return s, nil
}

// stop sends SIGTERM, then SIGKILL after 10s, and waits for the exit.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// getJSON decodes GET base+path into v.
func (s *serveProc) getJSON(path string, v any) error {
	resp, err := s.client.Get(s.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// roleToken makes a token of the role through the server's API (POST
// /api/auth/tokens) and returns its secret.
func (s *serveProc) roleToken(ctx context.Context, role string) (string, error) {
	body, _ := json.Marshal(server.TokenBody{Role: role, Name: "bench"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/api/auth/tokens", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tok server.NewToken
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.Secret == "" {
		return "", fmt.Errorf("POST /api/auth/tokens: %s, %v", resp.Status, err)
	}
	return tok.Secret, nil
}

// call makes POST /api/call as an operator (no role) and returns the envelope.
func (s *serveProc) call(ctx context.Context, tool string, args any) (map[string]any, error) {
	body, _ := json.Marshal(map[string]any{"tool": tool, "arguments": args})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/api/call", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || out["ok"] != true {
		return out, fmt.Errorf("%s: %s", tool, resp.Status)
	}
	return out, nil
}

// coldStart is the cold start of one configuration.
type coldStart struct {
	Name    string          // what the config holds
	Plugins int             // plugin processes started
	Runs    []time.Duration // ready times, one per repetition
	Target  time.Duration   // the bound on the median; 0 when none
}

// noopConfig writes a config of n copies of the no-op plugin and returns its path.
func noopConfig(tmp, noop string, n int) (string, error) {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "plugin \"noop_%d\" {\n  path = %q\n  args = [\"noop_%d\"]\n}\n", i, noop, i)
	}
	file := filepath.Join(tmp, fmt.Sprintf("noop%d.hcl", n))
	return file, os.WriteFile(file, []byte(b.String()), 0o644)
}

// runColdStarts starts serve reps times with each config, alternating the
// configs, after one untimed warm-up run each (page cache).
func runColdStarts(root, tmp, noop string, reps int) ([]coldStart, error) {
	cs := []coldStart{
		{Name: "default config.hcl (workspace, command, network, chrome)", Plugins: 4, Target: 150 * time.Millisecond},
		{Name: "10 × no-op plugin", Plugins: 10},
		{Name: "50 × no-op plugin", Plugins: 50, Target: time.Second},
	}
	files := []string{filepath.Join(root, "config.hcl"), "", ""}
	for i, n := range []int{0, 10, 50} {
		if n > 0 {
			f, err := noopConfig(tmp, noop, n)
			if err != nil {
				return nil, err
			}
			files[i] = f
		}
	}
	for rep := -1; rep < reps; rep++ {
		for i := range cs {
			s, err := startServe(root, tmp, files[i])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", cs[i].Name, err)
			}
			s.stop()
			if rep >= 0 {
				cs[i].Runs = append(cs[i].Runs, s.ready)
			}
		}
	}
	for _, c := range cs {
		logf("  %-58s median %s", c.Name, fmtDur(median(c.Runs)))
	}
	return cs, nil
}
