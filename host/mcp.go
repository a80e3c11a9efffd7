package host

import (
	"context"
	"sync/atomic"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/mcp/mcpsource"
)

// startMCP starts an mcp_server block's server: its stdio process
// (sandboxed when the block says so) or a session with its HTTP endpoint.
// The server's notifications/tools/list_changed updates the group.
func (s *supervisor) startMCP() (module, error) {
	var started atomic.Pointer[mcpsource.Server] // the announcement may come before Start returns
	changed := func() {
		srv := started.Load()
		if srv == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.h.opts.DescribeTimeout)
		defer cancel()
		if err := srv.Relist(ctx); err != nil {
			s.h.log.Error("tools/list after list_changed", "plugin", s.cfg.Name, "error", err)
			return
		}
		s.refresh()
	}
	srv, err := mcpsource.Start(context.Background(), mcpsource.Options{
		ID: s.cfg.Name, Command: s.cfg.Path, Args: s.cfg.Args, Env: s.cfg.Env, Dir: s.h.workDir(), Sandbox: s.h.sandboxOf(&s.cfg),
		URL: s.cfg.URL, Headers: s.cfg.Headers, Description: s.cfg.Description, ToolPrefix: s.cfg.ToolPrefix,
		StartTimeout: s.cfg.StartTimeout, Logger: s.h.log.Named(s.cfg.Name), ToolsChanged: coalesce(changed),
		Asks: mcpAsks(&s.cfg),
	})
	if err != nil {
		return nil, err
	}
	started.Store(srv)
	return mcpModule{srv}, nil
}

// mcpAsks are the MCP methods an mcp_server block lets its server use of
// the client that made a call (its client_requests).
func mcpAsks(p *config.Plugin) []string {
	methods := map[string]string{config.ClientRequestLogging: toolhost.MethodLog,
		config.ClientRequestElicitation: toolhost.MethodElicitation, config.ClientRequestSampling: toolhost.MethodSampling,
		config.ClientRequestRoots: toolhost.MethodRoots}
	var out []string
	for _, r := range p.MCPClientRequests() {
		out = append(out, methods[r])
	}
	return out
}

// coalesce returns a trigger of f that never waits: f runs on a goroutine of
// its own, one run at a time, and the triggers that come while it runs make
// one more run, not one each. A server announcing list_changed a million
// times costs a re-listing or two, not a million goroutines each waiting on
// a tools/list.
func coalesce(f func()) func() {
	var state atomic.Int32 // 0: idle; 1: running; 2: running, and to run again
	run := func() {
		for {
			f()
			if state.CompareAndSwap(1, 0) {
				return
			}
			state.Store(1)
		}
	}
	return func() {
		for {
			switch state.Load() {
			case 0:
				if state.CompareAndSwap(0, 1) {
					go run()
					return
				}
			case 1:
				if state.CompareAndSwap(1, 2) {
					return
				}
			default:
				return
			}
		}
	}
}

// mcpModule is an MCP server as a module.
type mcpModule struct{ *mcpsource.Server }

func (m mcpModule) Provider() toolhost.Provider { return m.Server }
