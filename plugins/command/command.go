package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/sdk"
)

// Limits of a command.
const (
	defaultTimeout    = 30 // seconds a call may run when it names no timeout
	defaultMaxTimeout = 60 // the config's timeout_seconds when it names none
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
	// Roots are the workspace roots a command's workdir must be inside;
	// absent means [workdir].
	Roots []string `json:"roots"`
	// TimeoutSeconds caps each call's timeout.
	TimeoutSeconds int `json:"timeout_seconds"`
	// DenyPatterns are regular expressions; a command line matching one is
	// refused, besides the built-in denylist.
	DenyPatterns []string `json:"deny_patterns"`
	// DefaultDenylist turns the built-in denylist off when false.
	DefaultDenylist *bool `json:"default_denylist"`
	// Env names more variables commands inherit from the plugin.
	Env []string `json:"env"`
}

// RunArgs are the arguments of run_command.
type RunArgs struct {
	Command        string            `json:"command" jsonschema:"the command line, run with bash -c"`
	Workdir        string            `json:"workdir,omitempty" jsonschema:"the directory to run in, inside the workspace roots: absolute, or relative to the configured workdir (default the configured workdir)"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"kill the command and everything it started after this many seconds (default 30, at most the configured timeout_seconds)"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"extra environment variables for this command"`
}

// JSArgs are the arguments of run_javascript.
type JSArgs struct {
	Code           string `json:"code" jsonschema:"JavaScript source, run by node (CommonJS; console.log prints)"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"kill node after this many seconds (default 30, at most the configured timeout_seconds)"`
}

// runner runs commands; configure sets it up before the first call.
type runner struct {
	workdir    string
	roots      []string // resolved (symlinks followed)
	maxTimeout int      // seconds
	deny       denylist
	passed     []string        // variables passed from the plugin's environment
	sandbox    *sandbox.Policy // what confines each command; nil: sandbox = "off"
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func newGroup() *sdk.Group {
	r := &runner{}
	return &sdk.Group{
		ID:          "command",
		Description: "Run shell commands (bash -c) with a timeout, capturing stdout and stderr.",
		Version:     "0.1.0",
		OnConfigure: r.configure,
		Tools: []sdk.Tool{
			sdk.NewTool("run_command", "Run a command with bash -c and return its stdout, stderr and exit status. On timeout, it and every process it started are killed.", r.run, sdk.Title("Run command"), sdk.KeepTail(), sdk.Destructive()),
			sdk.NewTool("run_javascript", "Run JavaScript with node and return what it prints and its exit status.", r.runJS, sdk.Title("Run JavaScript"), sdk.KeepTail(), sdk.Destructive()),
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
	if s.Roots == nil {
		s.Roots = []string{s.Workdir}
	}
	r.roots = nil
	for _, root := range s.Roots {
		resolved, err := filepath.EvalSymlinks(root)
		if err != nil || !filepath.IsAbs(root) {
			return sdk.Errorf(sdk.CodeValidation, "command: config: root %q must be an absolute path to a directory", root)
		}
		r.roots = append(r.roots, resolved)
	}
	r.deny = denylist{defaults: s.DefaultDenylist == nil || *s.DefaultDenylist}
	for _, p := range s.DenyPatterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return sdk.Errorf(sdk.CodeValidation, "command: config: deny_patterns: %v", err)
		}
		r.deny.extra = append(r.deny.extra, re)
	}
	for _, k := range s.Env {
		if !envName.MatchString(k) {
			return sdk.Errorf(sdk.CodeValidation, "command: config: env: %q is not a variable name", k)
		}
	}
	r.workdir, r.maxTimeout, r.passed = filepath.Clean(s.Workdir), s.TimeoutSeconds, append(slices.Clone(passedEnv), s.Env...)
	if !r.inRoots(r.workdir) {
		return sdk.Errorf(sdk.CodeValidation, "command: config: workdir %q is outside the roots", s.Workdir)
	}
	return r.configureSandbox(req)
}

// configureSandbox sets the policy every command runs under: the block's
// sandbox (the confined default without one) with the roots read-write and
// the host's own paths hidden inside them.
func (r *runner) configureSandbox(req *sdk.ConfigureRequest) error {
	var p sandbox.Policy
	if req.Sandbox != nil {
		p = *req.Sandbox
	}
	if p.Off {
		r.sandbox = nil
		sdk.Logger().Warn("commands run unconfined (sandbox = \"off\")")
		return nil
	}
	p.ReadWrite = append(slices.Clone(r.roots), p.ReadWrite...)
	p.Hidden = append(slices.Clone(p.Hidden), req.HostPaths...)
	if err := p.Validate(); err != nil {
		return sdk.Errorf(sdk.CodeValidation, "command: %v", err)
	}
	r.sandbox = &p
	return nil
}

// inRoots reports whether dir, symlinks followed, is inside a root.
func (r *runner) inRoots(dir string) bool {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	for _, root := range r.roots {
		if rel, err := filepath.Rel(root, resolved); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return true
		}
	}
	return false
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

// dir is the directory a call asking for workdir runs in: inside the roots
// (policy), and existing (tool_exec).
func (r *runner) dir(workdir string) (string, error) {
	dir := workdir
	switch {
	case workdir == "":
		dir = r.workdir
	case !filepath.IsAbs(workdir):
		dir = filepath.Join(r.workdir, workdir)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return "", sdk.Errorf(sdk.CodeToolExec, "workdir %q is not a directory", workdir)
	}
	if !r.inRoots(dir) {
		return "", sdk.Errorf(sdk.CodePolicy, "workdir %q is outside the workspace roots", workdir)
	}
	return dir, nil
}

func (r *runner) run(ctx context.Context, req *sdk.Request[RunArgs]) (*sdk.Result, error) {
	if why := r.deny.check(req.Args.Command); why != "" {
		return nil, sdk.Errorf(sdk.CodePolicy, "command refused: %s", why)
	}
	for k := range req.Args.Env {
		if !envName.MatchString(k) {
			return nil, sdk.Errorf(sdk.CodeValidation, "env: %q is not a variable name", k)
		}
	}
	dir, err := r.dir(req.Args.Workdir)
	if err != nil {
		return nil, err
	}
	return r.exec(ctx, execSpec{prog: "bash", args: []string{"-c", req.Args.Command}, dir: dir, env: req.Args.Env, timeout: req.Args.TimeoutSeconds,
		stdout: req.Stdout(), stderr: req.Stderr(), progress: req.Progress})
}

func (r *runner) runJS(ctx context.Context, req *sdk.Request[JSArgs]) (*sdk.Result, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return nil, sdk.Errorf(sdk.CodeToolExec, "node is not installed: apt-get install nodejs")
	}
	return r.exec(ctx, execSpec{prog: "node", args: []string{"-"}, stdin: req.Args.Code, dir: r.workdir, timeout: req.Args.TimeoutSeconds,
		stdout: req.Stdout(), stderr: req.Stderr(), progress: req.Progress})
}

// execSpec is one process to run.
type execSpec struct {
	prog    string
	args    []string
	stdin   string
	dir     string
	env     map[string]string
	timeout int // seconds; 0: the default
	// stdout and stderr take the output as it comes (sdk.Request.Stdout and
	// Stderr): the host keeps what its limits need, not the whole.
	stdout, stderr io.Writer
	// progress receives the output's lines as they come (sdk.Request.Progress).
	progress func(done, total float64, message string)
}

// exec runs a process confined by the sandbox (or, with sandbox = "off",
// in its own process group), bounded by its timeout and ctx: on either, the
// whole sandbox or group is ended (grandchildren too) and the output so far
// returned with timeout or cancelled.
func (r *runner) exec(ctx context.Context, spec execSpec) (*sdk.Result, error) {
	timeout, err := r.timeout(spec.timeout)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	proc, cmd, err := r.command(ctx, append([]string{spec.prog}, spec.args...))
	if err != nil {
		return nil, err
	}
	cmd.Dir = spec.dir
	cmd.Env = r.commandEnv(spec.env)
	if spec.stdin != "" {
		cmd.Stdin = strings.NewReader(spec.stdin)
	}
	var killed atomic.Bool
	end := func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // the whole group, grandchildren too
	if _, boxed := proc.(*sandbox.Cmd); boxed {
		end = cmd.Cancel // the sandbox's: it ends the sandbox even while bubblewrap sets it up
	}
	cmd.Cancel = func() error { // on timeout or cancellation
		killed.Store(true)
		return end()
	}
	cmd.WaitDelay = waitDelay
	lines := &lineProgress{report: spec.progress}
	cmd.Stdout, cmd.Stderr = lines.tee(spec.stdout), lines.tee(spec.stderr)
	if err := proc.Start(); err != nil {
		return nil, sdk.Errorf(sdk.CodeToolExec, "%s: %v", spec.prog, err)
	}
	_ = proc.Wait() // the outcome is read from cmd.ProcessState and killed
	res := &sdk.Result{
		OK:       true,
		ExitCode: exitCode(cmd.ProcessState),
	}
	switch {
	case killed.Load() && errors.Is(ctx.Err(), context.DeadlineExceeded):
		sdk.Fail(res, sdk.CodeTimeout, "the command ran past its timeout of %s and was killed", timeout)
	case killed.Load():
		sdk.Fail(res, sdk.CodeCancelled, "the call was cancelled and the command killed")
	case res.ExitCode != 0:
		sdk.Fail(res, sdk.CodeToolExec, "exit status %d%s", res.ExitCode, refused(proc))
	}
	return res, nil
}

// process is a command to start and wait for: an *exec.Cmd, or a
// *sandbox.Cmd, whose Start and Wait also set up and release its sandbox.
type process interface {
	Start() error
	Wait() error
}

// command returns argv as a process confined by the runner's sandbox, with
// the exec.Cmd to set up; a sandbox that cannot run refuses the command.
func (r *runner) command(ctx context.Context, argv []string) (process, *exec.Cmd, error) {
	if r.sandbox == nil {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd, cmd, nil
	}
	sb, err := sandbox.Command(ctx, r.sandbox, argv)
	if err != nil {
		return nil, nil, sdk.Errorf(sdk.CodePolicy, "command refused: %v", err)
	}
	return sb, sb.Cmd, nil
}

// refused says which connections the sandbox's network policy refused,
// for the message of a command that failed, perhaps because of them.
func refused(proc process) string {
	sb, ok := proc.(*sandbox.Cmd)
	if !ok {
		return ""
	}
	var hosts []string
	for _, r := range sb.Refusals() {
		hosts = append(hosts, r.Error())
	}
	if len(hosts) == 0 {
		return ""
	}
	return "; the network policy refused: " + strings.Join(hosts, "; ")
}

// commandEnv is the environment of a command: the passed variables that the
// plugin has, then the call's own. It is never nil, which would pass the
// whole environment.
func (r *runner) commandEnv(extra map[string]string) []string {
	env := make([]string, 0, len(r.passed)+len(extra))
	for _, k := range r.passed {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
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

// maxProgressLine bounds the part of a line a progress report carries.
const maxProgressLine = 512

// lineProgress reports a command's output lines, stdout's and stderr's, as
// they are written: the count so far, and the line as the message.
type lineProgress struct {
	report func(done, total float64, message string)
	mu     sync.Mutex
	lines  int
}

// tee returns a writer passing its bytes to w and its lines to the report.
func (l *lineProgress) tee(w io.Writer) io.Writer { return &lineWriter{w: w, l: l} }

// lineWriter is one stream's tee: partial holds a line not ended yet (its
// first maxProgressLine bytes).
type lineWriter struct {
	w       io.Writer
	l       *lineProgress
	partial []byte
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	n, err := lw.w.Write(p)
	for rest := p[:n]; len(rest) > 0; {
		line, after, ended := bytes.Cut(rest, []byte{'\n'})
		if room := maxProgressLine - len(lw.partial); room > 0 {
			lw.partial = append(lw.partial, line[:min(len(line), room)]...)
		}
		if !ended {
			break
		}
		lw.l.mu.Lock()
		lw.l.lines++
		lw.l.report(float64(lw.l.lines), 0, string(lw.partial))
		lw.l.mu.Unlock()
		lw.partial, rest = lw.partial[:0], after
	}
	return n, err
}
