package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cgroup is a pids cgroup of one sandbox: the kernel does not hold root to
// RLIMIT_NPROC, so for a sandbox started by root the process limit is the
// cgroup's pids.max.
type cgroup struct {
	dir         string
	procs       *os.File // its cgroup.procs, opened for this sandbox
	info, infoW *os.File // a pipe for bubblewrap's --info-fd, which names its child
}

// freeCgroups are empty cgroups of finished sandboxes, kept for the next
// ones: making and removing a cgroup costs milliseconds, reusing one does not.
var freeCgroups struct {
	sync.Mutex
	dirs []string
}

// maxFreeCgroups bounds freeCgroups; more are removed.
const maxFreeCgroups = 16

// newCgroup returns an empty pids cgroup below this process's own, limited
// to max processes and threads: a free one, or a new one.
func newCgroup(max int) (*cgroup, error) {
	g, err := takeCgroup()
	if err == nil {
		if err = os.WriteFile(filepath.Join(g.dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err == nil {
			if g.procs, err = os.OpenFile(filepath.Join(g.dir, "cgroup.procs"), os.O_WRONLY, 0); err == nil {
				if g.info, g.infoW, err = os.Pipe(); err == nil {
					return g, nil
				}
				g.procs.Close()
			}
		}
		removing.Go(func() { removeCgroup(g.dir) })
	}
	return nil, fmt.Errorf("sandbox: the process limit needs a pids cgroup when toolhost runs as root "+
		"(the kernel does not hold root to RLIMIT_NPROC), and none could be made: %v; "+
		"run toolhost as another user, or set processes = -1 in the sandbox's limits", err)
}

// takeCgroup pops a free cgroup or makes one.
func takeCgroup() (*cgroup, error) {
	freeCgroups.Lock()
	if n := len(freeCgroups.dirs); n > 0 {
		dir := freeCgroups.dirs[n-1]
		freeCgroups.dirs = freeCgroups.dirs[:n-1]
		freeCgroups.Unlock()
		return &cgroup{dir: dir}, nil
	}
	freeCgroups.Unlock()
	base, err := pidsBase()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, cgroupPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	return &cgroup{dir: dir}, nil
}

// adopt moves bubblewrap's child into the cgroup once bwrap names it,
// while it sets up the sandbox, so that the stage it starts is born there.
// Moving a process costs the kernel a few milliseconds, which this way pass
// alongside bubblewrap's own. Call it once bwrap has started.
func (g *cgroup) adopt() {
	g.infoW.Close()
	go func() {
		var info struct {
			Child int `json:"child-pid"`
		}
		if json.NewDecoder(g.info).Decode(&info) == nil && info.Child > 0 {
			_, _ = g.procs.WriteString(strconv.Itoa(info.Child))
		}
	}()
}

// release gives the cgroup back for reuse once it is empty, or removes it.
func (g *cgroup) release() {
	for _, f := range []*os.File{g.procs, g.info, g.infoW} {
		f.Close()
	}
	if cur, err := os.ReadFile(filepath.Join(g.dir, "pids.current")); err == nil && strings.TrimSpace(string(cur)) == "0" {
		freeCgroups.Lock()
		if len(freeCgroups.dirs) < maxFreeCgroups {
			freeCgroups.dirs = append(freeCgroups.dirs, g.dir)
			freeCgroups.Unlock()
			return
		}
		freeCgroups.Unlock()
	}
	// The kernel takes a while; no caller waits for it, but RemoveCgroups
	// does.
	removing.Go(func() { removeCgroup(g.dir) })
}

// removing counts the cgroups being removed.
var removing sync.WaitGroup

// cgroupPrefix starts the name of a sandbox's cgroup, followed by the pid
// of the process that made it.
const cgroupPrefix = "toolhost-sandbox-"

// removeCgroup deletes the cgroup dir once the sandbox's processes have
// left it (the last ones may still be on their way out, and a sandbox whose
// maker died ends when its stage sees it), waiting at most removePatience.
func removeCgroup(dir string) {
	for deadline := time.Now().Add(removePatience); ; time.Sleep(5 * time.Millisecond) {
		if err := os.Remove(dir); err == nil || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return
		}
	}
}

// removePatience bounds the wait for a cgroup's processes to leave it.
const removePatience = 10 * time.Second

// RemoveCgroups removes the pids cgroups that process pid made for its
// sandboxes when it ran as root (the process limit of [Limits]), each once
// its processes have left it. Given this process's own pid, it removes the
// empty ones kept for its next sandboxes and waits for those being removed,
// leaving its running sandboxes' alone: call it when the process stops
// making sandboxes. Given another pid, that of a module that has exited, it
// removes every one that module made: none is left behind by a module
// killed before it could remove its own. It does nothing for a process
// that never runs as root, which makes none.
func RemoveCgroups(pid int) {
	if os.Geteuid() != 0 {
		return
	}
	if pid == os.Getpid() {
		freeCgroups.Lock()
		dirs := freeCgroups.dirs
		freeCgroups.dirs = nil
		freeCgroups.Unlock()
		for _, dir := range dirs {
			removing.Go(func() { removeCgroup(dir) })
		}
		removing.Wait()
		return
	}
	base, err := pidsBase()
	if err != nil {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(base, cgroupPrefix+strconv.Itoa(pid)+"-*"))
	var wg sync.WaitGroup
	for _, dir := range dirs {
		wg.Go(func() { removeCgroup(dir) })
	}
	wg.Wait()
}

// pidsBase is the directory of this process's own cgroup in the hierarchy
// that has the pids controller: a cgroup v1 hierarchy of its own, or the
// unified (v2) one, where pids is then enabled for child cgroups.
var pidsBase = sync.OnceValues(func() (string, error) {
	base, err := findPidsBase()
	if err == nil {
		removeStale(base)
	}
	return base, err
})

// removeStale removes the cgroups below base that processes no longer
// running left behind.
func removeStale(base string) {
	old, _ := filepath.Glob(filepath.Join(base, cgroupPrefix+"*"))
	for _, dir := range old {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), cgroupPrefix), "-")
		if n, err := strconv.Atoi(pid); err == nil && errors.Is(syscall.Kill(n, 0), syscall.ESRCH) {
			_ = os.Remove(dir)
		}
	}
}

func findPidsBase() (string, error) {
	mounts, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer mounts.Close()
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for sc := bufio.NewScanner(mounts); sc.Scan(); {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		root, point := f[3], f[4]
		switch {
		case g[0] == "cgroup" && slices.Contains(strings.Split(g[2], ","), "pids"):
			if path, ok := ownCgroup(string(own), func(ctrl string) bool { return slices.Contains(strings.Split(ctrl, ","), "pids") }); ok {
				return filepath.Join(point, strings.TrimPrefix(path, root)), nil
			}
		case g[0] == "cgroup2":
			ctrl, _ := os.ReadFile(filepath.Join(point, "cgroup.controllers"))
			if !slices.Contains(strings.Fields(string(ctrl)), "pids") {
				continue
			}
			if path, ok := ownCgroup(string(own), func(ctrl string) bool { return ctrl == "" }); ok {
				base := filepath.Join(point, strings.TrimPrefix(path, root))
				if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
					return "", fmt.Errorf("enabling pids below %s: %w", base, err)
				}
				return base, nil
			}
		}
	}
	return "", errors.New("no cgroup hierarchy with the pids controller is mounted")
}

// ownCgroup is the path in /proc/self/cgroup's line whose controllers match.
func ownCgroup(lines string, match func(controllers string) bool) (string, bool) {
	for _, line := range strings.Split(lines, "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && match(parts[1]) {
			return parts[2], true
		}
	}
	return "", false
}
