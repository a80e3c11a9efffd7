package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/toolhost/toolhost/sdk"
)

// The host's own files (ConfigureRequest.HostPaths, such as its data
// directory) may lie inside a root, as they do by default: the config file's
// directory holds data/. Each file or directory a tool opens in such a root
// is then placed by the kernel (sdk.HostPaths.Check: the /proc/self/fd link
// of its descriptor) before anything is read, listed or written, so no path
// string, .. or symlink leads around the check. A root holding no host path
// is not checked at all.

// guardRoots records in each root the host paths inside it. A root at or
// below a host path is refused, and so is a root holding one where
// /proc/self/fd is missing and files could not be placed.
func guardRoots(roots []root, hostPaths []string) error {
	hp, err := sdk.ResolveHostPaths(hostPaths)
	if err != nil || len(hp) == 0 {
		return err
	}
	for i := range roots {
		r := &roots[i]
		dir, err := filepath.EvalSymlinks(r.dir)
		if err != nil {
			return sdk.Errorf(sdk.CodeValidation, "workspace: config: root %q: %v", r.dir, cause(err))
		}
		if hp.Contains(dir) {
			return sdk.Errorf(sdk.CodeValidation, "workspace: config: root %q is in the host's data directory", r.dir)
		}
		r.hidden = slices.DeleteFunc(slices.Clone(hp), func(h string) bool { return !(sdk.HostPaths{dir}).Contains(h) })
		if len(r.hidden) > 0 && !procFDs {
			return sdk.Errorf(sdk.CodeValidation, "workspace: config: root %q holds the host's data directory, which cannot be kept out without /proc/self/fd: choose roots that do not contain it", r.dir)
		}
	}
	return nil
}

// fdPath is the /proc/self/fd link of an open file.
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// open opens the regular file rel of r with flag, which must not create or
// truncate, and checks where it leads. Anything but a regular file with a
// single link is refused (regular, files.go), before any byte moves.
func (r root) open(rel string, flag int) (*os.File, error) {
	f, _, err := r.openAny(rel, flag)
	if err != nil {
		return nil, err
	}
	if err := regularFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openAny opens rel of r with flag, which must not create or truncate,
// whatever kind of file it is, and checks where it leads: it returns the file
// and where it really is ("" when r holds no host path). The open never
// waits, as it would for a named pipe without a writer (O_NONBLOCK): a pipe
// opened for writing without a reader is refused as the pipe it is.
func (r root) openAny(rel string, flag int) (*os.File, string, error) {
	f, err := r.fs.OpenFile(rel, flag|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) {
		if info, serr := r.fs.Stat(rel); serr == nil {
			if kind := regular(info); kind != nil {
				err = kind
			}
		}
	}
	if err != nil {
		return nil, "", err
	}
	real, err := r.hidden.Check(f)
	if err != nil {
		f.Close()
		return nil, "", err
	}
	return f, real, nil
}

// subdir is a directory of a root opened as a root of its own by subroot, so
// names in it are resolved from the very directory checked.
type subdir struct {
	*os.Root
	real string // where it really is; "" when its root holds no host path
}

// name checks the entry name of d before it is created or replaced: it must
// not be a host path itself.
func (d subdir) name(r root, name string) error {
	if d.real != "" && r.hidden.Contains(filepath.Join(d.real, name)) {
		return sdk.ErrHostPath
	}
	return nil
}

// subroot opens the directory rel of r, checked. With create, a missing
// directory is made first, and its missing parents, each inside a directory
// already checked (as MkdirAll, but never in a host path).
func (r root) subroot(rel string, create bool) (subdir, error) {
	d, err := r.fs.OpenRoot(rel)
	if errors.Is(err, fs.ErrNotExist) && create && rel != "." {
		var parent subdir
		if parent, err = r.subroot(filepath.Dir(rel), true); err != nil {
			return subdir{}, err
		}
		defer parent.Close()
		base := filepath.Base(rel)
		if err = parent.name(r, base); err == nil {
			if err = parent.Mkdir(base, 0o777); err == nil || errors.Is(err, fs.ErrExist) {
				d, err = parent.OpenRoot(base)
			}
		}
	}
	if err != nil {
		return subdir{}, err
	}
	out := subdir{Root: d}
	if len(r.hidden) > 0 {
		var f *os.File
		if f, err = d.Open("."); err == nil {
			out.real, err = r.hidden.Check(f)
			f.Close()
		}
		if err != nil {
			d.Close()
			return subdir{}, err
		}
	}
	return out, nil
}

// below lists the host paths below the directory whose real path is dir
// (itself not one, as checked), relative to it, as anchored globs for fd's
// --exclude and rg's --glob.
func (r root) below(dir string) []string {
	var globs []string
	for _, h := range r.hidden {
		if (sdk.HostPaths{dir}).Contains(h) {
			rel, _ := filepath.Rel(dir, h)
			globs = append(globs, "/"+escapeGlob(filepath.ToSlash(rel)))
		}
	}
	return globs
}

// escapeGlob makes a path a glob matching only itself: every character but
// letters, digits and / . _ - is escaped with a backslash.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune("/._-", c)) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// walkFS is an os.Root's file system for fs.WalkDir whose ReadDir places each
// directory it opens and leaves out the host's paths: a directory in them is
// an error (sdk.ErrHostPath), an entry naming one is skipped.
type walkFS struct {
	fs.FS
	d      *os.Root
	hidden sdk.HostPaths
}

// ReadDir reads the directory name, sorted by name, without the host's paths.
func (w walkFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	f, err := w.d.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY, 0) // never waits on a pipe swapped in
	if err != nil {
		return nil, err
	}
	defer f.Close()
	real, err := w.hidden.Check(f)
	if err != nil {
		return nil, err
	}
	entries, err := f.ReadDir(-1)
	if real != "" {
		entries = slices.DeleteFunc(entries, func(e fs.DirEntry) bool { return w.hidden.Contains(filepath.Join(real, e.Name())) })
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, err
}
