package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// etcEntries are what a command needs of /etc: the dynamic linker's cache,
// names of users and hosts, the resolver's settings, time zone,
// certificates, fonts, the alternatives symlinks that name many tools, and
// the settings Debian's chromium script reads.
// Nothing else of /etc (shadow, ssh keys, credentials) is there.
var etcEntries = []string{
	"passwd", "group", "hosts", "hostname", "nsswitch.conf", "host.conf", "resolv.conf", "ld.so.cache", "ld.so.conf",
	"ld.so.conf.d", "localtime", "timezone", "ssl/certs", "ca-certificates.conf", "alternatives", "fonts",
	"os-release", "debian_version", "mime.types", "protocols", "services", "chromium.d", "chromium",
}

// etcPrefix names the directories etcDir makes, followed by the pid of the
// process that made one, a dash and a random part.
const etcPrefix = "toolhost-sandbox-etc-"

// etcDir is the sandbox's /etc, made once per process: copies of the
// etcEntries the host has (a symlink stays a symlink), bound with one mount
// rather than one per file. It lives in /dev/shm, a tmpfs, where the copy
// takes milliseconds rather than the tenths of a second a disk may take
// (os.TempDir when there is no /dev/shm). Making it removes those that
// processes no longer running left behind.
var etcDir = sync.OnceValues(func() (string, error) {
	parent := "/dev/shm"
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		parent = os.TempDir()
	}
	old, _ := filepath.Glob(filepath.Join(parent, etcPrefix+"*"))
	for _, dir := range old {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), etcPrefix), "-")
		if n, err := strconv.Atoi(pid); err == nil && errors.Is(syscall.Kill(n, 0), syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
	dir, err := os.MkdirTemp(parent, etcPrefix+strconv.Itoa(os.Getpid())+"-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		return "", fmt.Errorf("sandbox: /etc: %w", err)
	}
	for _, e := range etcEntries {
		if err := copyTree(filepath.Join("/etc", e), filepath.Join(dir, e)); err != nil {
			return "", fmt.Errorf("sandbox: /etc: %w", err)
		}
	}
	return dir, nil
})

// copyTree copies src to dst: directories, regular files and symlinks (as
// symlinks); a src that does not exist is skipped, and so is anything else.
func copyTree(src, dst string) error {
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch t := d.Type(); {
		case t.IsDir():
			return os.Mkdir(to, 0o755)
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case t.IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, data, 0o644)
		}
		return nil
	})
}
