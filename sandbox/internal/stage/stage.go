// Package stage is the part of a sandbox that runs inside bubblewrap, as
// the PID 1 of its namespace: it joins the process limit's cgroup, opens the
// bridge to the proxy and applies Landlock, then runs the command as its
// child (a second stage that sets the limits and becomes the command), reaps
// orphans, and ends the sandbox, by exiting, when the command exits or when
// the process that started the sandbox, or bubblewrap, is gone. Package
// sandbox binds the binary that uses it into the sandbox and starts it as
// [InitPath]; the init function here takes over then. The package has few
// imports, so that it is initialized, and takes over, early in the binary's
// start.
package stage

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// Paths inside every sandbox.
const (
	// RunDir holds the stage's binary and the proxy's socket, read-only.
	RunDir    = "/run/sandbox"
	InitPath  = RunDir + "/init"
	ProxyPath = RunDir + "/proxy.sock"
	// BridgePort is the port on the sandbox's own 127.0.0.1 that leads to
	// the proxy, with network "allowed".
	BridgePort = 3128
)

// Rlimit is one resource limit the stage sets, soft and hard alike.
type Rlimit struct {
	Resource int    `json:"resource"` // unix.RLIMIT_*
	Value    uint64 `json:"value"`
	Name     string `json:"name"` // the setting it comes from, for an error
}

// Spec is what the stage does before it runs the command: join the cgroup,
// open the bridge to the proxy, apply Landlock, set the limits; and what
// ends the sandbox besides the command's exit. It travels as JSON in the
// stage's argument.
type Spec struct {
	ReadOnly  []string `json:"ro"`
	ReadWrite []string `json:"rw"`
	Rlimits   []Rlimit `json:"rlimits"`
	CgroupFD  int      `json:"cgroup_fd,omitempty"` // the cgroup's cgroup.procs, or 0
	Cgroup    string   `json:"cgroup,omitempty"`    // the cgroup's name, to see whether this process is in it
	Bridge    bool     `json:"bridge,omitempty"`    // forward 127.0.0.1:BridgePort to the proxy
	// Watch are read ends of pipes whose writers hold them as long as
	// they live (the process that started the sandbox, bubblewrap outside
	// it): once one of them reads as the end, the stage ends the sandbox.
	Watch []int `json:"watch,omitempty"`
	// Close are inherited descriptors that are not the stage's to keep: it
	// closes them at once.
	Close    []int    `json:"close,omitempty"`
	Confined bool     `json:"confined,omitempty"` // all but the limits done by the stage that started this one
	Argv     []string `json:"argv"`
}

// The stage takes over a binary started as InitPath, before main.
func init() {
	if len(os.Args) == 2 && os.Args[0] == InitPath {
		if err := runStage(os.Args[1]); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
			os.Exit(126)
		}
	}
}

// runStage confines this process and runs the command as its child
// (supervise); as the second stage, started by the first with Confined, it
// sets the limits and becomes the command. It returns only on error.
func runStage(spec string) error {
	var st Spec
	if err := json.Unmarshal([]byte(spec), &st); err != nil || len(st.Argv) == 0 {
		return fmt.Errorf("bad stage specification: %v", err)
	}
	if st.Confined {
		path, err := lookPath(st.Argv[0])
		if err != nil {
			return err
		}
		return execLimited(path, st.Argv, st.Rlimits)
	}
	for _, fd := range st.Close {
		unix.Close(fd)
	}
	for _, fd := range st.Watch {
		unix.CloseOnExec(fd) // the stage's, not the command's
	}
	go watch(st.Watch)
	if err := joinCgroup(st); err != nil {
		return err
	}
	if st.Bridge {
		listener, err := listen()
		if err != nil {
			return fmt.Errorf("proxy bridge: %w", err)
		}
		go bridge(listener)
	}
	if err := restrict(st); err != nil {
		return err
	}
	// Bubblewrap is this process's parent: from here on the sandbox also
	// dies with it by a signal, which a caller that keeps bubblewrap's end
	// of the watched pipe until the process exits (one that hands the
	// exec.Cmd to go-plugin) relies on.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent death signal: %w", err)
	}
	next, err := json.Marshal(Spec{Rlimits: st.Rlimits, Confined: true, Argv: st.Argv})
	if err != nil {
		return err
	}
	return supervise(InitPath, []string{InitPath, string(next)})
}

// watch ends the sandbox once one of fds reads as the end (see
// Spec.Watch); what is written to them is read and dropped.
func watch(fds []int) {
	polled := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		polled[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	buf := make([]byte, 512)
	for end := len(fds) == 0; !end; {
		if _, err := unix.Poll(polled, -1); err != nil && err != unix.EINTR {
			break
		}
		for _, p := range polled {
			if p.Revents == 0 {
				continue
			}
			switch n, err := unix.Read(int(p.Fd), buf); {
			case err == unix.EINTR || err == unix.EAGAIN:
			case err != nil || n == 0:
				end = true
			}
		}
	}
	exit(128 + int(unix.SIGKILL)) // as if killed
}

// joinCgroup makes sure this process is in the sandbox's cgroup (the host
// usually moved it there already) and closes the cgroup's descriptor.
func joinCgroup(st Spec) error {
	if st.CgroupFD == 0 {
		return nil
	}
	f := os.NewFile(uintptr(st.CgroupFD), "cgroup.procs")
	defer f.Close()
	own, err := os.ReadFile("/proc/self/cgroup")
	if err == nil && strings.Contains(string(own), "/"+st.Cgroup+"\n") {
		return nil
	}
	if _, err := f.WriteString("0\n"); err != nil { // 0: the writer itself
		return fmt.Errorf("joining the process limit's cgroup: %w", err)
	}
	return nil
}

// execLimited sets the limits and executes path. The limits come last, as
// this process (a Go program whose address space may already be past
// memory_mb) must not allocate under them: everything execve needs is made
// first.
func execLimited(path string, argv []string, limits []Rlimit) error {
	pathp, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return err
	}
	if err := setLimits(limits); err != nil {
		return err
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(pathp)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	return fmt.Errorf("exec %s: %w", path, errno)
}

// setLimits applies the limits to this process, inherited by what it
// executes.
func setLimits(limits []Rlimit) error {
	for _, l := range limits {
		if err := unix.Setrlimit(l.Resource, &unix.Rlimit{Cur: l.Value, Max: l.Value}); err != nil {
			return fmt.Errorf("limit %s: %w", l.Name, err)
		}
	}
	return nil
}

// LandlockABI is the newest Landlock ABI the ruleset uses; on a kernel with
// an older one (or none), the ruleset is what that kernel can enforce.
const LandlockABI = 7

// landlockConfig is the ruleset's configuration at LandlockABI.
var landlockConfig = landlock.V7

// restrict applies the Landlock ruleset: read and execute under ReadOnly,
// everything under ReadWrite, nothing elsewhere; and no abstract unix
// socket or signal beyond the sandbox.
func restrict(st Spec) error {
	var rules []landlock.Rule
	for _, set := range []struct {
		paths       []string
		dirs, files func(...string) landlock.FSRule
	}{
		{st.ReadOnly, landlock.RODirs, landlock.ROFiles},
		{st.ReadWrite, landlock.RWDirs, landlock.RWFiles},
	} {
		for _, p := range set.paths {
			switch fi, err := os.Stat(p); {
			case err != nil:
			case fi.IsDir():
				rules = append(rules, set.dirs(p))
			default:
				rules = append(rules, set.files(p))
			}
		}
	}
	if err := landlockConfig.BestEffort().RestrictPaths(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := landlockConfig.BestEffort().RestrictScoped(); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// supervise runs argv as a child with this process's standard descriptors,
// reaps every process the sandbox orphans meanwhile (this is its PID 1),
// and exits as the child exits: the kernel then kills whatever else is left
// in the sandbox's PID namespace.
func supervise(path string, argv []string) error {
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		return err
	}
	for {
		var ws unix.WaitStatus
		switch pid, err := unix.Wait4(-1, &ws, 0, nil); {
		case err == unix.EINTR:
		case err != nil:
			return fmt.Errorf("wait: %w", err)
		case pid == proc.Pid && ws.Signaled():
			exit(128 + int(ws.Signal()))
		case pid == proc.Pid:
			exit(ws.ExitStatus())
		}
	}
}

// exit ends the stage, and with it the sandbox, at once: it has nothing to
// flush, and a race detector's wait at exit would hold the sandbox a second.
func exit(code int) { unix.Exit(code) }

// lookPath finds an executable as a shell would: a name with a slash as it
// is, any other in PATH. (Not os/exec's, which would make this package
// initialize late in a large binary's start.)
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range strings.Split(os.Getenv("PATH"), ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH", name)
}

// listen opens the bridge's socket on 127.0.0.1:BridgePort, with raw
// system calls: package net would make this package initialize late.
func listen() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err = unix.Bind(fd, &unix.SockaddrInet4{Port: BridgePort, Addr: [4]byte{127, 0, 0, 1}}); err == nil {
		err = unix.Listen(fd, 128)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// bridge forwards each connection to 127.0.0.1:BridgePort inside the
// sandbox to the proxy's socket, the only way out of its network.
func bridge(listener int) {
	for {
		conn, _, err := unix.Accept4(listener, unix.SOCK_CLOEXEC)
		if err != nil {
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			return
		}
		go func() {
			defer unix.Close(conn)
			up, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return
			}
			defer unix.Close(up)
			if unix.Connect(up, &unix.SockaddrUnix{Name: ProxyPath}) != nil {
				return
			}
			done := make(chan struct{})
			go func() {
				pipe(conn, up)
				close(done)
			}()
			pipe(up, conn)
			<-done
		}()
	}
}

// pipe copies from one socket to the other until the end of the input,
// then ends the output.
func pipe(from, to int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Read(from, buf)
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			break
		}
		for b := buf[:n]; len(b) > 0; {
			m, err := unix.Write(to, b)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				unix.Shutdown(from, unix.SHUT_RD)
				return
			}
			b = b[m:]
		}
	}
	unix.Shutdown(to, unix.SHUT_WR)
}
