// Package sandbox confines a process to what its role may touch: bubblewrap
// gives it new user, PID, IPC, UTS and network namespaces and a file system
// of read-only system directories plus the paths its [Policy] names; a
// Landlock ruleset, applied inside, is a second layer over the same paths;
// resource limits bound its processes, memory, CPU time, file sizes and open
// files; and its network is none, the host's, or only a filtering proxy
// that applies the shared network policy (package netpolicy).
//
// Commands, plugins and MCP servers all ask it the same way:
//
//	cmd, err := sandbox.Command(ctx, policy, []string{"bash", "-c", line})
//	cmd.Dir, cmd.Stdout = dir, &out
//	err = cmd.Run()
//
// A binary that uses the package runs a part of itself inside the sandbox
// (the stage that applies Landlock and the limits, runs the command, and
// ends the sandbox when the command ends, or the process that started it,
// SIGKILLed or not): the package's init function takes over when the binary
// is started as that stage, so nothing is needed in main.
//
// When bubblewrap cannot run, [Command] fails and says what to install or
// enable; it never runs the command unconfined.
package sandbox

import (
	"fmt"
	"path/filepath"

	"github.com/toolhost/toolhost/netpolicy"
	"github.com/toolhost/toolhost/sandbox/internal/stage"
	"golang.org/x/sys/unix"
)

// Network is what a sandboxed process may reach.
type Network string

// The networks of a sandbox.
const (
	// NetworkNone leaves only a loopback interface of its own: nothing
	// outside the sandbox can be reached, the host's loopback included.
	NetworkNone Network = "none"
	// NetworkAllowed leaves only an HTTP proxy on 127.0.0.1 inside (in
	// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY) that connects out only where
	// the policy's network rules permit.
	NetworkAllowed Network = "allowed"
	// NetworkHost shares the host's network: an explicit choice a caller
	// should log.
	NetworkHost Network = "host"
)

// Limits bound a sandbox. A zero field means its default (512 processes,
// 4096 MiB of memory, 600 CPU seconds, files of 1024 MiB, 1024 open files),
// a negative one no limit.
type Limits struct {
	// Processes is how many processes and threads the sandbox may hold at
	// once; a fork bomb stops there.
	Processes int `json:"processes,omitempty"`
	// MemoryMB is each process's address space, in MiB: an allocation past
	// it fails.
	MemoryMB int `json:"memory_mb,omitempty"`
	// CPUSeconds is each process's CPU time; past it the process is killed.
	CPUSeconds int `json:"cpu_seconds,omitempty"`
	// FileSizeMB is the largest file a process may write, in MiB; it is
	// also the size of the sandbox's /tmp and HOME.
	FileSizeMB int `json:"file_size_mb,omitempty"`
	// OpenFiles is how many files each process may hold open.
	OpenFiles int `json:"open_files,omitempty"`
}

// defaultLimits are the limits of a Policy that names none.
var defaultLimits = Limits{Processes: 512, MemoryMB: 4096, CPUSeconds: 600, FileSizeMB: 1024, OpenFiles: 1024}

// withDefaults fills the zero fields of l from defaultLimits.
func (l Limits) withDefaults() Limits {
	pick := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	d := defaultLimits
	return Limits{
		Processes:  pick(l.Processes, d.Processes),
		MemoryMB:   pick(l.MemoryMB, d.MemoryMB),
		CPUSeconds: pick(l.CPUSeconds, d.CPUSeconds),
		FileSizeMB: pick(l.FileSizeMB, d.FileSizeMB),
		OpenFiles:  pick(l.OpenFiles, d.OpenFiles),
	}
}

// rlimits are the resource limits that carry l's positive fields, in their
// units. (RLIMIT_NPROC does not hold root; for root a cgroup does.)
func (l Limits) rlimits() []stage.Rlimit {
	const mib = 1 << 20
	var out []stage.Rlimit
	for _, r := range []struct {
		res  int
		v    int
		unit uint64
		name string
	}{
		{unix.RLIMIT_NPROC, l.Processes, 1, "processes"},
		{unix.RLIMIT_AS, l.MemoryMB, mib, "memory_mb"},
		{unix.RLIMIT_CPU, l.CPUSeconds, 1, "cpu_seconds"},
		{unix.RLIMIT_FSIZE, l.FileSizeMB, mib, "file_size_mb"},
		{unix.RLIMIT_NOFILE, l.OpenFiles, 1, "open_files"},
	} {
		if r.v > 0 {
			out = append(out, stage.Rlimit{Resource: r.res, Value: uint64(r.v) * r.unit, Name: fmt.Sprintf("%s = %d", r.name, r.v)})
		}
	}
	return out
}

// Policy says what a sandboxed process may touch. The zero Policy is the
// tightest: the system read-only, no network, the default limits.
type Policy struct {
	// Off runs the process unconfined: a block's explicit sandbox = "off".
	// [Command] refuses a Policy that is Off; a caller checks it first.
	Off bool `json:"off,omitempty"`
	// ReadWrite are host paths the process may read and write, at the same
	// paths inside.
	ReadWrite []string `json:"read_write,omitempty"`
	// ReadOnly are more host paths the process may read (and execute), at
	// the same paths inside; the system directories are always there.
	ReadOnly []string `json:"read_only,omitempty"`
	// Hidden are host paths that stay invisible even inside ReadWrite or
	// ReadOnly (a host's data directory under a workspace root): an empty
	// directory, or an empty file, takes their place.
	Hidden []string `json:"hidden,omitempty"`
	// Network is what the process may reach; "" means [NetworkNone].
	Network Network `json:"network,omitempty"`
	// Rules are the network policy applied with [NetworkAllowed] (the same
	// keys allow_hosts, deny_hosts and allow_private as the network and
	// chrome modules').
	netpolicy.Config
	// Limits bound the process and everything it starts.
	Limits Limits `json:"limits,omitzero"`
}

// Validate reports the first problem of p: an unknown network, a relative
// path, or network rules without [NetworkAllowed].
func (p *Policy) Validate() error {
	switch p.Network {
	case "", NetworkNone, NetworkHost, NetworkAllowed:
	default:
		return fmt.Errorf("sandbox: network %q is none of \"none\", \"allowed\" and \"host\"", p.Network)
	}
	for _, list := range [][]string{p.ReadWrite, p.ReadOnly, p.Hidden} {
		for _, path := range list {
			if !filepath.IsAbs(path) {
				return fmt.Errorf("sandbox: %q is not an absolute path", path)
			}
		}
	}
	if p.Network != NetworkAllowed && (len(p.AllowHosts) > 0 || len(p.DenyHosts) > 0 || p.AllowPrivate) {
		return fmt.Errorf("sandbox: allow_hosts, deny_hosts and allow_private apply only with network = \"allowed\"")
	}
	if p.Network == NetworkAllowed {
		if _, err := netpolicy.Compile(p.Config); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	return nil
}

// network is p.Network with its default.
func (p *Policy) network() Network {
	if p.Network == "" {
		return NetworkNone
	}
	return p.Network
}

// Loosened says in words how p lets its process out of the confinement
// the zero Policy gives, for a warning at start: unconfined, the host's
// network. It is empty for a policy that only adds paths, allows hosts or
// lifts limits (see [Policy.Unlimited]).
func (p *Policy) Loosened() []string {
	if p.Off {
		return []string{"runs unconfined (sandbox = \"off\")"}
	}
	if p.network() == NetworkHost {
		return []string{"shares the host's network"}
	}
	return nil
}

// Unlimited names the limits p lifts (a negative value): a choice of the
// config's, said at start without a warning.
func (p *Policy) Unlimited() []string {
	var out []string
	l := p.Limits
	for _, f := range []struct {
		name string
		v    int
	}{{"processes", l.Processes}, {"memory_mb", l.MemoryMB}, {"cpu_seconds", l.CPUSeconds}, {"file_size_mb", l.FileSizeMB}, {"open_files", l.OpenFiles}} {
		if f.v < 0 {
			out = append(out, f.name)
		}
	}
	return out
}
