package sandbox

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"

	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/toolhost/toolhost/sandbox/internal/stage"
)

// offHint ends every message about a sandbox that cannot run.
const offHint = `; sandbox = "off" in the module's block is the explicit way to run it unconfined`

var available struct {
	sync.Mutex
	path string
}

// bwrapPath returns the path of a bubblewrap that can make the sandbox's
// namespaces here, or an error that says what to install or enable. A
// success is remembered; a failure is tried again on the next call.
func bwrapPath() (string, error) {
	available.Lock()
	defer available.Unlock()
	if available.path != "" {
		return available.path, nil
	}
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("sandbox: bubblewrap is not installed (apt-get install bubblewrap)%s", offHint)
	}
	out, err := exec.Command(path, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
		"--disable-userns", "--ro-bind", "/", "/", "--", "true").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("sandbox: bubblewrap cannot make its namespaces here (%s): enable unprivileged user namespaces "+
			"(sysctl kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000; on Ubuntu also "+
			"kernel.apparmor_restrict_unprivileged_userns=0), or run toolhost where they are allowed%s",
			strings.TrimSpace(string(out))+" "+err.Error(), offHint)
	}
	available.path = path
	return path, nil
}

// Status describes the sandbox this machine gives, for a log line at start:
// bubblewrap's version and the Landlock ABI the kernel enforces (0: none,
// bubblewrap alone then), or why there is no sandbox.
func Status() string {
	path, err := bwrapPath()
	if err != nil {
		return err.Error()
	}
	version, _ := exec.Command(path, "--version").Output()
	abi, err := llsyscall.LandlockGetABIVersion()
	if err != nil {
		abi = 0
	}
	return fmt.Sprintf("%s, Landlock ABI %d", strings.TrimSpace(string(version)), min(abi, stage.LandlockABI))
}
