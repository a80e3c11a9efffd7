package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

// Limits of a command.
const (
	defaultTimeout    = 30      // seconds a call may run when it names no timeout
	defaultMaxTimeout = 60      // the config's timeout_seconds when it names none
	maxOutputBytes    = 8 << 20 // bytes kept of the end of stdout and of stderr each; the host cuts further to its limits
	// waitDelay bounds the wait for the output pipes once the command has
	// exited or been killed, in case a descendant outside its process group
	// still holds them.
	waitDelay = 2 * time.Second
)

// passedEnv names the variables a command inherits from the plugin; no other
// variable reaches it.
var passedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// settings is the builtin block's config {}.
type settings struct {
	// Workdir is where commands run by default; absent means the plugin's
	// working directory.
	Workdir string `json:"workdir"`
	// TimeoutSeconds caps each call's timeout.
	TimeoutSeconds int `json:"timeout_seconds"`
}

// RunArgs are the arguments of run_command.
type RunArgs struct {
	Command        string `json:"command" jsonschema:"the command line, run with bash -c"`
	Workdir        string `json:"workdir,omitempty" jsonschema:"the directory to run in: absolute, or relative to the configured workdir (default the configured workdir)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"kill the command and everything it started after this many seconds (default 30, at most the configured timeout_seconds)"`
}

// runner runs commands; configure sets it up before the first call.
type runner struct {
	workdir    string
	maxTimeout int // seconds
}

func newGroup() *sdk.Group {
	r := &runner{}
	return &sdk.Group{
		ID:          "command",
		Description: "Run shell commands (bash -c) with a timeout, capturing stdout and stderr.",
		Version:     "0.1.0",
		OnConfigure: r.configure,
		Tools: []sdk.Tool{
			sdk.NewTool("run_command", "Run a command with bash -c and return its stdout, stderr and exit status. On timeout, it and every process it started are killed.", r.run, sdk.KeepTail()),
		},
	}
}

func (r *runner) configure(_ context.Context, req *sdk.ConfigureRequest) error {
	var s settings
	if err := sdk.DecodeConfig(req, &s); err != nil {
		return err
	}
	if s.Workdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return sdk.Errorf(sdk.CodeValidation, "command: config: no workdir and no working directory: %v", err)
		}
		s.Workdir = wd
	}
	if !filepath.IsAbs(s.Workdir) {
		return sdk.Errorf(sdk.CodeValidation, "command: config: workdir %q is not an absolute path", s.Workdir)
	}
	if info, err := os.Stat(s.Workdir); err != nil || !info.IsDir() {
		return sdk.Errorf(sdk.CodeValidation, "command: config: workdir %q is not a directory", s.Workdir)
	}
	switch {
	case s.TimeoutSeconds < 0:
		return sdk.Errorf(sdk.CodeValidation, "command: config: timeout_seconds must be positive, not %d", s.TimeoutSeconds)
	case s.TimeoutSeconds == 0:
		s.TimeoutSeconds = defaultMaxTimeout
	}
	r.workdir, r.maxTimeout = filepath.Clean(s.Workdir), s.TimeoutSeconds
	return nil
}

// timeout is how long a call asking for seconds (0: the default) may run.
func (r *runner) timeout(seconds int) (time.Duration, error) {
	switch {
	case seconds < 0:
		return 0, sdk.Errorf(sdk.CodeValidation, "timeout_seconds must be positive, not %d", seconds)
	case seconds == 0:
		seconds = defaultTimeout
	}
	return time.Duration(min(seconds, r.maxTimeout)) * time.Second, nil
}

// dir is the directory a call asking for workdir runs in.
func (r *runner) dir(workdir string) string {
	switch {
	case workdir == "":
		return r.workdir
	case filepath.IsAbs(workdir):
		return workdir
	}
	return filepath.Join(r.workdir, workdir)
}

func (r *runner) run(ctx context.Context, req *sdk.Request[RunArgs]) (*sdk.Result, error) {
	timeout, err := r.timeout(req.Args.TimeoutSeconds)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", req.Args.Command)
	cmd.Dir = r.dir(req.Args.Workdir)
	cmd.Env = commandEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var killed atomic.Bool
	cmd.Cancel = func() error { // on timeout or cancellation: the whole group, grandchildren too
		killed.Store(true)
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = waitDelay
	stdout, stderr := &capped{}, &capped{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return nil, sdk.Errorf(sdk.CodeToolExec, "run_command: %v", err)
	}
	_ = cmd.Wait() // the outcome is read from cmd.ProcessState and killed
	res := &sdk.Result{
		OK:       true,
		ExitCode: exitCode(cmd.ProcessState),
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	res.TruncatedBytes = stdout.dropped || stderr.dropped
	switch {
	case killed.Load() && errors.Is(ctx.Err(), context.DeadlineExceeded):
		sdk.Fail(res, sdk.CodeTimeout, "the command ran past its timeout of %s and was killed", timeout)
	case killed.Load():
		sdk.Fail(res, sdk.CodeCancelled, "the call was cancelled and the command killed")
	case res.ExitCode != 0:
		sdk.Fail(res, sdk.CodeToolExec, "exit status %d", res.ExitCode)
	}
	return res, nil
}

// commandEnv is the environment of a command: the passedEnv variables that
// the plugin has. It is never nil, which would pass the whole environment.
func commandEnv() []string {
	env := make([]string, 0, len(passedEnv))
	for _, k := range passedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// exitCode is the command's exit status, or 128 plus the signal that
// killed it, as a shell reports it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// capped keeps the last maxOutputBytes written to it, never failing a
// write, so the command does not see a broken pipe. (Not an embedded
// bytes.Buffer: io.Copy would use its ReadFrom, past Write.)
type capped struct {
	buf     []byte
	dropped bool
}

// Write keeps p, dropping the oldest bytes once twice the cap is held, and
// reports all of p written.
func (c *capped) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	if len(c.buf) > 2*maxOutputBytes {
		c.buf = append(c.buf[:0], c.buf[len(c.buf)-maxOutputBytes:]...)
		c.dropped = true
	}
	return len(p), nil
}

// String returns the last maxOutputBytes kept.
func (c *capped) String() string {
	if len(c.buf) > maxOutputBytes {
		c.dropped = true
		return string(c.buf[len(c.buf)-maxOutputBytes:])
	}
	return string(c.buf)
}
