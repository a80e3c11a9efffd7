package sdk

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol"
)

// ServeOptions tune [Serve]; nil means defaults.
type ServeOptions struct {
	// Logger replaces the default logger: JSON on stderr, at the level named
	// by TOOLHOST_LOG_LEVEL (default info).
	Logger hclog.Logger
}

// Serve runs g as a plugin until the host closes it, then returns. It checks
// the group first and exits with status 1, saying why on stderr, if the group
// breaks the protocol's limits. Started by anything but a toolhost host, it
// says so and exits.
func Serve(g *Group, opts *ServeOptions) {
	if opts == nil {
		opts = &ServeOptions{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{
			Name:       g.ID,
			Level:      hclog.LevelFromString(os.Getenv("TOOLHOST_LOG_LEVEL")),
			Output:     os.Stderr,
			JSONFormat: true,
		})
	}
	hclog.SetDefault(logger)
	if g.ToolsFor == nil {
		if err := checkGroup(g); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	go exitWithParent(hostPid(), 250*time.Millisecond)
	protocol.Serve(g, logger)
}

// checkGroup describes g in an empty context and validates the spec.
func checkGroup(g *Group) error {
	spec, err := g.Describe(context.Background(), &toolhost.DescribeRequest{})
	if err == nil {
		err = protocol.ValidateGroup(spec)
	}
	if err != nil {
		return fmt.Errorf("sdk: group %q: %w", g.ID, err)
	}
	return nil
}

// hostPid is the pid of the host that started this plugin: the host passes
// it (protocol.HostPidEnv), as the parent may already be gone by the time a
// plugin asks for it.
func hostPid() int {
	if pid, err := strconv.Atoi(os.Getenv(protocol.HostPidEnv)); err == nil && pid > 0 {
		return pid
	}
	return os.Getppid()
}

// exitWithParent ends the process once its parent is gone (it is then
// re-parented), so a plugin never outlives a host that died without a word.
// The host also sets a parent-death signal; this covers hosts that cannot.
func exitWithParent(ppid int, every time.Duration) {
	for range time.Tick(every) {
		if os.Getppid() != ppid {
			hclog.Default().Warn("host process is gone; exiting", "host_pid", ppid)
			os.Exit(3)
		}
	}
}
