package host

import (
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/internal/protocol"
)

// startPlugin starts a plugin or builtin block's process (go-plugin over
// gRPC), sandboxed when the block says so.
func (s *supervisor) startPlugin() (module, error) {
	proc, err := protocol.Launch(protocol.Options{
		Path: s.cfg.Path, Args: s.cfg.Args, Env: s.cfg.Env, SHA256: s.cfg.SHA256, Dir: s.h.workDir(),
		StartTimeout: s.cfg.StartTimeout, Logger: s.h.log.Named(s.cfg.Name), Sandbox: s.h.sandboxOf(&s.cfg),
	})
	if err != nil {
		return nil, err
	}
	return pluginModule{proc}, nil
}

// pluginModule is a plugin process as a module.
type pluginModule struct{ *protocol.Process }

func (p pluginModule) Provider() toolhost.Provider { return p.Process.Provider }
func (p pluginModule) Pid() int                    { return p.Process.Pid }
func (p pluginModule) Refused() []string           { return nil } // a plugin's spec is valid whole, or refused
