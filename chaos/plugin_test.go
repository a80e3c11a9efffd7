package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost/sdk"
)

// The environment of a re-executed test binary: pluginEnv makes it a plugin
// with the named behaviour (see servePlugin), hostEnv a host (see runHost).
const (
	pluginEnv    = "TOOLHOST_CHAOS_PLUGIN"
	groupEnv     = "TOOLHOST_CHAOS_GROUP"     // the group's id, also its tools' name prefix
	cancelDirEnv = "TOOLHOST_CHAOS_CANCELDIR" // sleep and hang write DIR/<call id> when their ctx ends
	startsEnv    = "TOOLHOST_CHAOS_STARTS"    // each start of the plugin appends its time (unix ns) here
	hostEnv      = "TOOLHOST_CHAOS_HOST"      // the file receiving the host's plugin pids
)

// The plugin behaviours.
const (
	behaveGood       = "good"       // serves chaosGroup
	behaveExit       = "exit"       // exits with status 1 before the handshake
	behaveCrashAfter = "crashafter" // serves, and exits with status 1 just after its first Describe
)

type sleepArgs struct {
	Ms int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
}

// running counts the sleep and hang calls in progress in this plugin.
var running atomic.Int64

// chaosGroup is the plugin's group. Its id comes from groupEnv and prefixes
// its tools' names, so that several such plugins can run in one host without
// their tools conflicting: ID_noop, ID_sleep, ID_hang and ID_running.
func chaosGroup() *sdk.Group {
	id := os.Getenv(groupEnv)
	if id == "" {
		id = "chaos"
	}
	return &sdk.Group{
		ID: id, Description: "tools for the chaos tests",
		Tools: []sdk.Tool{
			sdk.NewTool(id+"_noop", "Do nothing.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
				return &sdk.Result{OK: true}, nil
			}),
			sdk.NewTool(id+"_sleep", "Sleep, or until cancelled.", func(ctx context.Context, r *sdk.Request[sleepArgs]) (*sdk.Result, error) {
				running.Add(1)
				defer running.Add(-1)
				t := time.NewTimer(time.Duration(r.Args.Ms) * time.Millisecond)
				defer t.Stop()
				select {
				case <-t.C:
					return sdk.Text("slept"), nil
				case <-ctx.Done():
					markCancelled(r.Call.CallID, ctx.Err())
					return nil, ctx.Err()
				}
			}),
			sdk.NewTool(id+"_hang", "Block until the call's context ends.", func(ctx context.Context, r *sdk.Request[struct{}]) (*sdk.Result, error) {
				running.Add(1)
				defer running.Add(-1)
				<-ctx.Done()
				markCancelled(r.Call.CallID, ctx.Err())
				return nil, ctx.Err()
			}),
			sdk.NewTool(id+"_running", "Count the sleep and hang calls in progress.", func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) {
				return sdk.Text(strconv.FormatInt(running.Load(), 10)), nil
			}),
		},
	}
}

// markCancelled records, when cancelDirEnv is set, that the call's context
// ended and why.
func markCancelled(callID string, err error) {
	if dir := os.Getenv(cancelDirEnv); dir != "" && callID != "" {
		_ = os.WriteFile(filepath.Join(dir, callID), []byte(err.Error()), 0o644)
	}
}

// servePlugin runs as the plugin with the named behaviour.
func servePlugin(behaviour string) {
	if f := os.Getenv(startsEnv); f != "" {
		if out, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			_, _ = out.WriteString(strconv.FormatInt(time.Now().UnixNano(), 10) + "\n")
			_ = out.Close()
		}
	}
	switch behaviour {
	case behaveGood:
		sdk.Serve(chaosGroup(), nil)
	case behaveExit:
		os.Exit(1)
	case behaveCrashAfter:
		g := chaosGroup()
		tools := g.Tools
		var once sync.Once
		g.Tools, g.ToolsFor = nil, func(context.Context, sdk.CallContext) ([]sdk.Tool, error) {
			// The first Describe is the host's, after the handshake: let its
			// answer go out, then crash.
			once.Do(func() { time.AfterFunc(100*time.Millisecond, func() { os.Exit(1) }) })
			return tools, nil
		}
		sdk.Serve(g, nil)
	default:
		os.Stderr.WriteString("unknown chaos plugin behaviour " + strconv.Quote(behaviour) + "\n")
		os.Exit(2)
	}
}
