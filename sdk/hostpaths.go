package sdk

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrHostPath is wrapped by [HostPaths.Check]'s error for a file at or below a
// host path.
var ErrHostPath = errors.New("in the host's data directory")

// HostPaths are the paths a host keeps to itself
// ([toolhost.ConfigureRequest.HostPaths]), resolved: absolute, clean, symlinks
// evaluated. A module that touches files keeps its tools out of them with
// [HostPaths.Check].
type HostPaths []string

// ResolveHostPaths resolves the paths a host sent: each must be absolute;
// its symlinks are evaluated when it exists.
func ResolveHostPaths(paths []string) (HostPaths, error) {
	out := make(HostPaths, 0, len(paths))
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return nil, Errorf(CodeValidation, "host path %q is not absolute", p)
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		out = append(out, filepath.Clean(p))
	}
	return out, nil
}

// HostPathRefused is a tool's error for a path (as the caller gave it) that
// leads into a host path: code policy.
func HostPathRefused(path string) error {
	return Errorf(CodePolicy, "path %q is in the host's data directory: refused", path)
}

// Contains reports whether the clean absolute path p is one of h or lies
// below one.
func (h HostPaths) Contains(p string) bool {
	return slices.ContainsFunc(h, func(dir string) bool {
		rest, ok := strings.CutPrefix(p, dir)
		return ok && (rest == "" || rest[0] == '/' || strings.HasSuffix(dir, "/"))
	})
}

// Check returns where the open file f really is, or an error wrapping
// [ErrHostPath] when that is at or below one of h. It asks the kernel (f's link
// in /proc/self/fd), not a path string, so no .., symlink or rename leads
// around it; where /proc/self/fd is missing it fails. With h empty it
// returns "" at once.
func (h HostPaths) Check(f *os.File) (string, error) {
	if len(h) == 0 {
		return "", nil
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return "", err
	}
	if h.Contains(real) {
		return "", ErrHostPath
	}
	return real, nil
}
