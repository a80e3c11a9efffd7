package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolhost/toolhost/sdk"
)

// Defaults of the tools' optional arguments.
const (
	defaultListLimit = 1000 // entries returned by list_files
	defaultReadLimit = 2000 // lines returned by read_file
)

// settings is the builtin block's config {}.
type settings struct {
	// Roots are the directories the tools may use; relative paths resolve
	// against the first. Absent means the process's working directory.
	Roots []string `json:"roots"`
}

// ListArgs are the arguments of list_files.
type ListArgs struct {
	Path      string `json:"path" jsonschema:"the directory to list: relative to the first root, or absolute inside a root"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"list the whole tree below path, not only its entries"`
	Limit     int    `json:"limit,omitempty" jsonschema:"at most this many entries (default 1000)"`
}

// ReadArgs are the arguments of read_file.
type ReadArgs struct {
	Path   string `json:"path" jsonschema:"the file to read: relative to the first root, or absolute inside a root"`
	Offset int    `json:"offset,omitempty" jsonschema:"the first line to return, counting from 1 (default 1)"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many lines (default 2000)"`
}

// WriteArgs are the arguments of write_file.
type WriteArgs struct {
	Path    string `json:"path" jsonschema:"the file to write: relative to the first root, or absolute inside a root; missing parent directories are created"`
	Content string `json:"content" jsonschema:"the text to write"`
	Mode    string `json:"mode,omitempty" jsonschema:"overwrite (default) replaces the file atomically; append adds content to its end"`
}

// root is one workspace root, opened: every file access goes through fs, so
// no name, .. or symlink can lead out of it, and is placed by hidden.Check
// when the root holds host paths (hostpaths.go).
type root struct {
	dir    string // absolute and clean, as configured
	fs     *os.Root
	hidden sdk.HostPaths // the host paths inside the root
}

// workspace holds the roots; configure sets them before the first call.
type workspace struct {
	roots  []root
	rg, fd string // the programs search_files and find_files run; empty when missing
}

// errEscapes is the error an *os.Root gives for a name that leads out of it,
// asked of a root of the temporary directory: inside a sandbox, whose
// Landlock ruleset does not cover "/", opening "/" would fail instead.
var errEscapes = func() error {
	r, err := os.OpenRoot(os.TempDir())
	if err == nil {
		defer r.Close()
		_, err = r.Stat("..")
	}
	return cause(err)
}()

func newGroup() *sdk.Group {
	w := &workspace{}
	return &sdk.Group{
		ID:          "workspace",
		Description: "Files inside the workspace roots: list, find, search, read, write and edit them.",
		Version:     "0.1.0",
		OnConfigure: w.configure,
		Tools: []sdk.Tool{
			sdk.NewStructuredTool("get_workspace_info", "Show the workspace roots as JSON; relative paths resolve against the first.", w.info, sdk.Title("Get workspace info"), sdk.ReadOnly()),
			sdk.NewTool("list_files", "List a directory, one entry a line, sorted; directories end with /.", w.list, sdk.Title("List files"), sdk.ReadOnly()),
			sdk.NewTool("read_file", "Read lines of a text file, a page at a time (offset, limit).", w.read, sdk.Title("Read file"), sdk.ReadOnly()),
			sdk.NewTool("write_file", "Write a text file: replace it atomically or append to it. Creates parent directories.", w.write, sdk.Title("Write file"), sdk.Destructive()),
			sdk.NewTool("edit_file", "Replace an exact piece of text in a file (not a regex): find must occur once, or set all to replace every occurrence. The file is rewritten atomically.", w.edit, sdk.Title("Edit file"), sdk.Destructive()),
			sdk.NewTool("find_files", "Find files and directories by name (a glob such as *.go) below a directory, with fd; one path a line, relative to the directory. Skips hidden and git-ignored entries.", w.find, sdk.Title("Find files"), sdk.ReadOnly()),
			sdk.NewTool("search_files", "Search file contents for a regular expression (or plain text with literal), with ripgrep; prints PATH:LINE:TEXT per matching line, paths relative to the searched directory. Skips hidden, binary and .gitignored files.", w.search, sdk.Title("Search file contents"), sdk.ReadOnly()),
		},
	}
}

func (w *workspace) configure(_ context.Context, req *sdk.ConfigureRequest) error {
	var s settings
	if err := sdk.DecodeConfig(req, &s); err != nil {
		return err
	}
	if s.Roots == nil { // absent or null; an explicit [] is refused by openRoots
		wd, err := os.Getwd()
		if err != nil {
			return sdk.Errorf(sdk.CodeValidation, "workspace: config: no roots and no working directory: %v", err)
		}
		s.Roots = []string{wd}
	}
	roots, err := openRoots(s.Roots)
	if err != nil {
		return err
	}
	if err := guardRoots(roots, req.HostPaths); err != nil {
		closeRoots(roots)
		return err
	}
	closeRoots(w.roots)
	w.roots = roots
	w.rg, w.fd = findPrograms()
	return nil
}

// openRoots checks and opens the configured roots: absolute, existing
// directories, duplicates dropped.
func openRoots(dirs []string) ([]root, error) {
	if len(dirs) == 0 {
		return nil, sdk.Errorf(sdk.CodeValidation, "workspace: config: roots must name at least one directory")
	}
	var roots []root
	for _, dir := range dirs {
		dir = filepath.Clean(dir)
		if slices.ContainsFunc(roots, func(r root) bool { return r.dir == dir }) {
			continue
		}
		fsys, err := openRoot(dir)
		if err != nil {
			closeRoots(roots)
			return nil, err
		}
		roots = append(roots, root{dir: dir, fs: fsys})
	}
	return roots, nil
}

// closeRoots releases roots.
func closeRoots(roots []root) {
	for _, r := range roots {
		r.fs.Close()
	}
}

// openRoot opens one configured root, which must be an absolute path to an
// existing directory.
func openRoot(dir string) (*os.Root, error) {
	if !filepath.IsAbs(dir) {
		return nil, sdk.Errorf(sdk.CodeValidation, "workspace: config: root %q is not an absolute path", dir)
	}
	fsys, err := os.OpenRoot(dir) // fails unless dir is an existing directory
	if err != nil {
		return nil, sdk.Errorf(sdk.CodeValidation, "workspace: config: root %q: %v", dir, cause(err))
	}
	return fsys, nil
}

// resolve finds the root a path belongs to and the name relative to it. A
// relative path belongs to the first root; an absolute one to the first root
// containing it. The root refuses any .. or symlink leading out later.
func (w *workspace) resolve(path string) (root, string, error) {
	if path == "" {
		path = "."
	}
	if !filepath.IsAbs(path) {
		return w.roots[0], path, nil
	}
	for _, r := range w.roots {
		if rel, err := filepath.Rel(r.dir, path); err == nil && filepath.IsLocal(rel) {
			return r, rel, nil
		}
	}
	return root{}, "", outside(path)
}

// outside is the error for a path leading out of the roots.
func outside(path string) error {
	return sdk.Errorf(sdk.CodePolicy, "path %q is outside the workspace roots", path)
}

// fsError turns an error of an *os.Root into the call's error: policy for a
// path leading out of the root or into the host's files, or for a file with
// other hard links; the call's cancellation or deadline unchanged; tool_exec
// naming the caller's path otherwise.
func fsError(path string, err error) error {
	switch {
	case errors.Is(err, errEscapes):
		return outside(path)
	case errors.Is(err, sdk.ErrHostPath):
		return sdk.HostPathRefused(path)
	case errors.As(err, new(linked)):
		return sdk.Errorf(sdk.CodePolicy, "%s: %v", path, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return sdk.Errorf(sdk.CodeToolExec, "%s: no such file or directory", path)
	}
	return sdk.Errorf(sdk.CodeToolExec, "%s: %v", path, cause(err))
}

// cause strips a *fs.PathError, whose operation and path mean nothing to the
// caller, down to what went wrong.
func cause(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}

// positive returns v, or def when v is 0 (not given); a negative v is invalid.
func positive(name string, v, def int) (int, error) {
	switch {
	case v < 0:
		return 0, sdk.Errorf(sdk.CodeValidation, "%s must be positive, not %d", name, v)
	case v == 0:
		return def, nil
	}
	return v, nil
}

// Info is what get_workspace_info returns.
type Info struct {
	Roots []string `json:"roots" jsonschema:"the workspace roots, absolute; relative paths resolve against the first"`
}

func (w *workspace) info(context.Context, *sdk.Request[struct{}]) (Info, error) {
	info := Info{Roots: []string{}}
	for _, r := range w.roots {
		info.Roots = append(info.Roots, r.dir)
	}
	return info, nil
}

func (w *workspace) list(_ context.Context, req *sdk.Request[ListArgs]) (*sdk.Result, error) {
	limit, err := positive("limit", req.Args.Limit, defaultListLimit)
	if err != nil {
		return nil, err
	}
	r, rel, err := w.resolve(req.Args.Path)
	if err != nil {
		return nil, err
	}
	dir, err := r.fs.OpenRoot(rel)
	if err != nil {
		return nil, fsError(req.Args.Path, err)
	}
	defer dir.Close()
	var entries []string
	err = fs.WalkDir(walkFS{FS: dir.FS(), d: dir, hidden: r.hidden}, ".", func(name string, d fs.DirEntry, err error) error {
		switch {
		case name == ".":
			return err
		case err != nil:
			return nil // an unreadable subdirectory, or one now in the host's files: listed, its entries skipped
		case d.IsDir():
			entries = append(entries, name+"/")
			if !req.Args.Recursive {
				return fs.SkipDir
			}
		default:
			entries = append(entries, name)
		}
		return nil
	})
	if err != nil {
		return nil, fsError(req.Args.Path, err)
	}
	slices.Sort(entries)
	res := sdk.Text(strings.Join(entries[:min(limit, len(entries))], "\n"))
	res.TruncatedLines = len(entries) > limit
	res.Meta = map[string]any{"total": len(entries)}
	return res, nil
}

func (w *workspace) read(ctx context.Context, req *sdk.Request[ReadArgs]) (*sdk.Result, error) {
	offset, err := positive("offset", req.Args.Offset, 1)
	if err != nil {
		return nil, err
	}
	limit, err := positive("limit", req.Args.Limit, defaultReadLimit)
	if err != nil {
		return nil, err
	}
	r, rel, err := w.resolve(req.Args.Path)
	if err != nil {
		return nil, err
	}
	f, err := r.open(rel, os.O_RDONLY)
	if err != nil {
		return nil, fsError(req.Args.Path, err)
	}
	defer f.Close()
	p, err := readPage(ctx, f, offset, limit)
	if err != nil {
		return nil, fsError(req.Args.Path, err)
	}
	if offset > 1 && p.lines < offset {
		return nil, sdk.Errorf(sdk.CodeValidation, "offset %d is past the end of %s (%d lines)", offset, req.Args.Path, p.lines)
	}
	res := sdk.Text(p.text)
	if p.next > 0 { // a line follows the page
		res.TruncatedLines = true
		res.NextPageCursor = strconv.Itoa(p.next)
		res.Stdout += fmt.Sprintf("[continue with offset=%d]", p.next)
	}
	if p.cut > 0 {
		res.TruncatedBytes = true
		res.Meta = map[string]any{"cut_bytes": p.cut}
	}
	return res, nil
}

func (w *workspace) write(_ context.Context, req *sdk.Request[WriteArgs]) (*sdk.Result, error) {
	a := req.Args
	if a.Mode != "" && a.Mode != "overwrite" && a.Mode != "append" {
		return nil, sdk.Errorf(sdk.CodeValidation, "mode must be overwrite or append, not %q", a.Mode)
	}
	r, rel, err := w.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	d, err := r.subroot(filepath.Dir(rel), true)
	if err != nil {
		return nil, fsError(a.Path, err)
	}
	defer d.Close()
	if a.Mode == "append" {
		err = appendFile(r, d, rel, a.Content)
	} else {
		err = overwrite(r, d, rel, a.Content)
	}
	if err != nil {
		return nil, fsError(a.Path, err)
	}
	res := sdk.Text(fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.Path))
	res.Meta = map[string]any{"bytes": len(a.Content)}
	return res, nil
}

// overwrite replaces the file rel of r, in d (its directory, opened by
// subroot), with content atomically: it writes a temporary file in d and
// renames it over the name. The new file gets the old one's permission bits.
// A name that is a symlink is written through, in place, so the link
// survives; where it leads is checked before the file is emptied. Only a
// regular file with a single link is replaced or written (regular).
func overwrite(r root, d subdir, rel, content string) error {
	name := filepath.Base(rel)
	if err := d.name(r, name); err != nil {
		return err
	}
	perm := fs.FileMode(0o666)
	info, err := d.Lstat(name)
	switch {
	case err == nil && info.Mode()&fs.ModeSymlink != 0:
		f, err := r.open(rel, os.O_WRONLY)
		if err != nil {
			return err
		}
		return writeTo(f, true, content)
	case err == nil:
		if err := regular(info); err != nil {
			return err
		}
		perm = info.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	tmp := "." + name + "." + rand.Text() + ".tmp"
	f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if info != nil { // keep the mode exactly, whatever the umask
		err = f.Chmod(perm)
	}
	if err == nil {
		_, err = f.WriteString(content)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.Rename(tmp, name)
	}
	if err != nil {
		d.Remove(tmp)
	}
	return err
}

// appendFile appends content to the file rel of r, in d (its directory,
// opened by subroot): an existing file is written through any symlink inside
// the root, once checked; a missing one is created in d.
func appendFile(r root, d subdir, rel, content string) error {
	f, err := r.open(rel, os.O_WRONLY|os.O_APPEND)
	if errors.Is(err, fs.ErrNotExist) {
		if err = d.name(r, filepath.Base(rel)); err == nil {
			f, err = d.OpenFile(filepath.Base(rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o666)
		}
	}
	if err != nil {
		return err
	}
	return writeTo(f, false, content)
}

// writeTo writes content to f, emptied first when truncate is set, and
// closes it.
func writeTo(f *os.File, truncate bool, content string) error {
	var err error
	if truncate {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteString(content)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
