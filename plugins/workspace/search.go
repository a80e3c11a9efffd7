package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

// Defaults and bounds of find_files and search_files.
const (
	defaultFindLimit   = 1000    // paths returned by find_files
	defaultSearchLimit = 200     // matching lines returned by search_files
	maxToolOutput      = 4 << 20 // bytes read from fd or rg; the host cuts further
	maxToolStderr      = 64 << 10
)

// The errors of a tool whose program is missing.
const (
	rgMissing = "ripgrep (rg) is not installed: apt-get install ripgrep"
	fdMissing = "fd is not installed: apt-get install fd-find"
)

// lookPath finds a program on PATH; tests replace it.
var lookPath = exec.LookPath

// FindArgs are the arguments of find_files.
type FindArgs struct {
	Path        string `json:"path,omitempty" jsonschema:"the directory to search: relative to the first root, or absolute inside a root (default: the first root)"`
	NamePattern string `json:"name_pattern,omitempty" jsonschema:"a glob matched against each entry's name, such as *.go (default: every entry)"`
	MaxDepth    int    `json:"max_depth,omitempty" jsonschema:"descend at most this many levels; 1 lists only the entries of path (default: no limit)"`
	Limit       int    `json:"limit,omitempty" jsonschema:"at most this many paths (default 1000)"`
}

// SearchArgs are the arguments of search_files.
type SearchArgs struct {
	Pattern    string `json:"pattern" jsonschema:"a regular expression (Rust regex syntax) to look for, or plain text when literal is set"`
	Path       string `json:"path,omitempty" jsonschema:"the directory or file to search: relative to the first root, or absolute inside a root (default: the first root)"`
	Glob       string `json:"glob,omitempty" jsonschema:"search only files whose path matches this glob, such as *.go; a leading ! excludes the matching files instead"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match without regard to case"`
	Literal    bool   `json:"literal,omitempty" jsonschema:"take pattern as plain text, not a regular expression"`
	Context    int    `json:"context,omitempty" jsonschema:"show this many lines before and after each match"`
	Limit      int    `json:"limit,omitempty" jsonschema:"at most this many matching lines (default 200)"`
}

// findPrograms looks up rg and fd (Debian names it fdfind); a missing one is
// left empty, and only the tool needing it fails.
func findPrograms() (rg, fd string) {
	rg, _ = lookPath("rg")
	for _, name := range []string{"fd", "fdfind"} {
		if p, err := lookPath(name); err == nil {
			fd = p
			break
		}
	}
	if rg == "" {
		sdk.Logger().Warn("search_files is unavailable: " + rgMissing)
	}
	if fd == "" {
		sdk.Logger().Warn("find_files is unavailable: " + fdMissing)
	}
	return rg, fd
}

// procFDs is whether /proc/self/fd exists, so a program can be started in a
// directory opened through a root rather than named by its path.
var procFDs = func() bool {
	_, err := os.Stat("/proc/self/fd")
	return err == nil
}()

// searchDir is what fd or rg runs on, opened through its root and checked:
// a directory to run in or, for rg, a single file.
type searchDir struct {
	f       *os.File
	path    string   // for exec.Cmd.Dir; "" for a file
	file    bool     // f is a file, handed to rg as fileArg
	exclude []string // anchored globs of the host paths below the directory
}

// fileArg names, in rg's process, the file a searchDir hands it.
const fileArg = "/dev/fd/3"

// openDir opens rel of r for a program to run on: a directory, or a file when
// file is set, which must be a regular file with a single link (regular). The
// program starts in the very directory opened (through /proc/self/fd), or
// reads the very file opened (as fileArg), so no symlink swapped in after the
// check can move it out of the root or into the host's files; the host paths
// below the directory are excluded.
func openDir(r root, rel, path string, file bool) (*searchDir, error) {
	f, real, err := r.openAny(rel, os.O_RDONLY)
	if err != nil {
		return nil, fsError(path, err)
	}
	info, err := f.Stat()
	if err == nil && !info.IsDir() {
		if !file {
			f.Close()
			return nil, sdk.Errorf(sdk.CodeToolExec, "%s: not a directory", path)
		}
		if err = regular(info); err == nil {
			return &searchDir{f: f, file: true}, nil
		}
	}
	if err != nil {
		f.Close()
		return nil, fsError(path, err)
	}
	d := &searchDir{f: f, path: filepath.Join(r.dir, rel), exclude: r.below(real)}
	if procFDs {
		d.path = fdPath(f)
	}
	return d, nil
}

func (d *searchDir) Close() error { return d.f.Close() }

// runResult is how a program run by run ended.
type runResult struct {
	exitCode  int
	stderr    string
	stopped   bool // the line callback stopped it early
	truncated bool // stdout passed maxToolOutput and the rest was dropped
}

// run runs bin with args (no shell) on d and passes each line of its stdout,
// without the newline, to line, which returns false to stop the program. The
// process is killed when ctx ends.
func run(ctx context.Context, bin string, d *searchDir, args []string, line func(string) bool) (runResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = d.path
	if d.file {
		cmd.ExtraFiles = []*os.File{d.f} // fd 3: fileArg
	}
	cmd.WaitDelay = time.Second
	stderr := &capped{max: maxToolStderr}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return runResult{}, err
	}
	if err := cmd.Start(); err != nil {
		return runResult{}, err
	}
	var res runResult
	br := bufio.NewReader(io.LimitReader(stdout, maxToolOutput))
	read := 0
	for {
		s, err := br.ReadString('\n')
		read += len(s)
		if s != "" && strings.HasSuffix(s, "\n") || err == io.EOF && s != "" && read < maxToolOutput {
			if !line(strings.TrimSuffix(s, "\n")) {
				res.stopped = true
				break
			}
		}
		if err != nil {
			res.truncated = read >= maxToolOutput
			break
		}
	}
	if res.stopped || res.truncated {
		cancel()
	}
	werr := cmd.Wait()
	res.stderr = strings.TrimSpace(stderr.String())
	res.exitCode = cmd.ProcessState.ExitCode()
	switch {
	case res.stopped || res.truncated:
		return res, nil
	case ctx.Err() != nil:
		return res, ctx.Err()
	}
	if _, ok := errors.AsType[*exec.ExitError](werr); werr != nil && !ok {
		return res, werr
	}
	return res, nil
}

// capped is a buffer keeping the first max bytes written to it.
type capped struct {
	strings.Builder
	max int
}

func (c *capped) Write(b []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Builder.Write(b[:min(room, len(b))])
	}
	return len(b), nil
}

func (w *workspace) find(ctx context.Context, req *sdk.Request[FindArgs]) (*sdk.Result, error) {
	a := req.Args
	if w.fd == "" {
		return nil, sdk.Errorf(sdk.CodeToolExec, fdMissing)
	}
	limit, err := positive("limit", a.Limit, defaultFindLimit)
	if err != nil {
		return nil, err
	}
	if a.MaxDepth < 0 {
		return nil, sdk.Errorf(sdk.CodeValidation, "max_depth must be positive, not %d", a.MaxDepth)
	}
	r, rel, err := w.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	dir, err := openDir(r, rel, a.Path, false)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	args := []string{"--color", "never"}
	for _, g := range dir.exclude {
		args = append(args, "--exclude", g)
	}
	if a.NamePattern != "" {
		args = append(args, "--glob")
	}
	if a.MaxDepth > 0 {
		args = append(args, "--max-depth", strconv.Itoa(a.MaxDepth))
	}
	args = append(args, "--max-results", strconv.Itoa(limit+1), "--")
	if a.NamePattern != "" {
		args = append(args, a.NamePattern)
	}
	var paths []string
	out, err := run(ctx, w.fd, dir, args, func(s string) bool {
		paths = append(paths, s)
		return true
	})
	if err != nil {
		return nil, err
	}
	if out.exitCode != 0 && !out.truncated {
		return nil, sdk.Errorf(sdk.CodeToolExec, "fd failed (exit status %d): %s", out.exitCode, out.stderr)
	}
	slices.Sort(paths)
	res := sdk.Text(strings.Join(paths[:min(limit, len(paths))], "\n"))
	res.TruncatedLines = len(paths) > limit
	res.TruncatedBytes = out.truncated
	res.Meta = map[string]any{"count": min(limit, len(paths))}
	return res, nil
}

func (w *workspace) search(ctx context.Context, req *sdk.Request[SearchArgs]) (*sdk.Result, error) {
	a := req.Args
	if w.rg == "" {
		return nil, sdk.Errorf(sdk.CodeToolExec, rgMissing)
	}
	limit, err := positive("limit", a.Limit, defaultSearchLimit)
	if err != nil {
		return nil, err
	}
	if a.Context < 0 {
		return nil, sdk.Errorf(sdk.CodeValidation, "context must be positive, not %d", a.Context)
	}
	if a.Pattern == "" {
		return nil, sdk.Errorf(sdk.CodeValidation, "pattern must not be empty")
	}
	r, rel, err := w.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	dir, err := openDir(r, rel, a.Path, true)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	args := []string{
		"--no-config", "--line-number", "--no-heading", "--color", "never",
		"--max-columns", "500", "--max-columns-preview", "--no-require-git",
		"--null", "--sort", "path", "--max-count", strconv.Itoa(limit + 1),
	}
	if a.IgnoreCase {
		args = append(args, "-i")
	}
	if a.Literal {
		args = append(args, "-F")
	}
	if a.Context > 0 {
		args = append(args, "-C", strconv.Itoa(a.Context))
	}
	if a.Glob != "" {
		args = append(args, "--glob", a.Glob)
	}
	for _, g := range dir.exclude { // after the caller's glob, so they win
		args = append(args, "--glob", "!"+g)
	}
	if dir.file {
		args = append(args, "--with-filename")
	}
	args = append(args, "--", a.Pattern)
	if dir.file {
		args = append(args, fileArg)
	}
	var lines []string
	matches, truncated := 0, false
	out, err := run(ctx, w.rg, dir, args, func(s string) bool {
		// With --null a line is PATH NUL N:TEXT for a match, PATH NUL N-TEXT
		// for context, and -- between groups of context. A single file is
		// named as the caller named it.
		name, rest, ok := strings.Cut(s, "\x00")
		if !ok {
			lines = append(lines, s)
			return true
		}
		if dir.file {
			name = filepath.Base(rel)
		}
		digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
		sep := "-"
		if digits < len(rest) && rest[digits] == ':' {
			sep = ":"
			if matches == limit {
				truncated = true
				return false
			}
			matches++
		}
		lines = append(lines, name+sep+rest)
		return true
	})
	if err != nil {
		return nil, err
	}
	if truncated {
		for len(lines) > 0 && lines[len(lines)-1] == "--" {
			lines = lines[:len(lines)-1]
		}
	}
	res := sdk.Text(strings.Join(lines, "\n"))
	res.TruncatedLines = truncated
	res.TruncatedBytes = out.truncated
	res.Meta = map[string]any{"matches": matches}
	switch {
	case out.stopped || out.truncated || out.exitCode == 0:
	case out.exitCode == 1 && matches == 0: // no match
	case out.exitCode == 2 && matches > 0: // matches, and some files could not be read
		res.Stderr = out.stderr
	default:
		return nil, sdk.Errorf(sdk.CodeToolExec, "rg failed (exit status %d): %s", out.exitCode, out.stderr)
	}
	return res, nil
}
