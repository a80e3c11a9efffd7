package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/store"
)

// State is where a configured plugin is in its lifecycle.
type State string

// The plugin states.
const (
	StateStarting   State = "starting"   // first launch in progress
	StateRunning    State = "running"    // registered and serving
	StateRestarting State = "restarting" // exited; waiting out its backoff or relaunching
	StateFailed     State = "failed"     // refused, or out of restarts
	StateStopped    State = "stopped"    // unloaded, closed, or exited and not to be restarted
)

// PluginStatus is a configured plugin as GET /api/plugins shows it.
type PluginStatus struct {
	Name      string        `json:"name"`
	Kind      SourceKind    `json:"kind"`
	Path      string        `json:"path"`
	State     State         `json:"state"`
	Pid       int           `json:"pid,omitempty"`
	Restarts  int           `json:"restarts"`
	Group     string        `json:"group,omitempty"`
	LastError string        `json:"lastError,omitempty"`
	ErrorCode toolhost.Code `json:"errorCode,omitempty"`
	// Protocol is the MCP protocol version a running mcp_server module
	// negotiated with its server: the stateless version (internal/mcp/mcpversion),
	// or the 2025 (or older) version of a session.
	Protocol string `json:"protocol,omitempty"`
}

// supervisor runs one configured plugin: launch, configure, describe,
// register; on exit unregister at once and restart per the block's policy.
type supervisor struct {
	h    *Host
	cfg  config.Plugin
	kind SourceKind

	stop     chan struct{} // closed to unload
	stopOnce sync.Once
	done     chan struct{} // closed when run returns
	ready    chan struct{} // closed after the first launch attempt
	readyOne sync.Once

	mu       sync.Mutex
	state    State
	pid      int
	restarts int
	lastErr  error
	group    *Group
	mod      module // while running

	pinned pin // the executable as the first launch verified it
}

func newSupervisor(h *Host, cfg config.Plugin) *supervisor {
	kind := map[config.Kind]SourceKind{config.KindPlugin: SourcePlugin, config.KindBuiltin: SourceBuiltin, config.KindMCP: SourceMCP}[cfg.Kind]
	return &supervisor{
		h: h, cfg: cfg, kind: kind, state: StateStarting,
		stop: make(chan struct{}), done: make(chan struct{}), ready: make(chan struct{}),
	}
}

func (s *supervisor) status() PluginStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := PluginStatus{Name: s.cfg.Name, Kind: s.kind, Path: cmp.Or(s.cfg.Path, s.cfg.URL), State: s.state, Pid: s.pid, Restarts: s.restarts}
	if s.group != nil {
		st.Group = s.group.Spec.ID
	}
	if p, ok := s.mod.(interface{ Protocol() string }); ok {
		st.Protocol = p.Protocol()
	}
	if s.lastErr != nil {
		st.LastError, st.ErrorCode = s.lastErr.Error(), toolhost.CodeOf(s.lastErr)
	}
	return st
}

func (s *supervisor) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// run is the plugin's lifecycle loop.
func (s *supervisor) run() {
	defer close(s.done)
	defer s.readyOne.Do(func() { close(s.ready) })
	log := s.h.log.With("plugin", s.cfg.Name)
	backoff := s.h.opts.RestartBackoff
	failures := 0
	for {
		started := time.Now()
		proc, err := s.launch()
		if err != nil {
			s.explainExit(err)
			log.Error("plugin refused", "code", toolhost.CodeOf(err), "error", err)
			s.set(func() { s.lastErr, s.pid = err, 0 })
			if permanent(err) || s.cfg.Restart == config.RestartNever {
				s.set(func() { s.state = StateFailed })
				s.h.events.Emit(store.Event{Type: store.EventPluginRefused,
					Payload: map[string]any{"plugin": s.cfg.Name, "code": toolhost.CodeOf(err), "error": err.Error()}})
				return
			}
			s.readyOne.Do(func() { close(s.ready) }) // the first attempt's outcome is recorded
		} else {
			s.readyOne.Do(func() { close(s.ready) })
			select {
			case <-proc.Exited().Done():
			case <-s.stop:
				s.shutdown(proc)
				return
			}
			exitErr := s.exited(proc)
			log.Warn("plugin exited", "error", exitErr)
			if time.Since(started) >= s.h.opts.HealthyAfter {
				failures, backoff = 0, s.h.opts.RestartBackoff
			}
			if !restartAfter(s.cfg.Restart, exitErr) {
				s.set(func() {
					s.state = StateStopped
					if exitErr != nil {
						s.state = StateFailed
					}
				})
				return
			}
		}
		failures++
		if failures > s.cfg.MaxRestarts {
			log.Error("plugin failed: out of restarts", "max_restarts", s.cfg.MaxRestarts)
			s.set(func() { s.state = StateFailed })
			return
		}
		s.set(func() { s.state = StateRestarting; s.restarts++ })
		log.Info("restarting plugin", "backoff", backoff, "attempt", failures)
		select {
		case <-time.After(backoff):
		case <-s.stop:
			s.set(func() { s.state = StateStopped })
			return
		}
		backoff = min(2*backoff, s.h.opts.MaxBackoff)
	}
}

// module is a running module: a plugin process (plugin.go) or an MCP
// server (mcp.go), each started by its source's start function.
type module interface {
	// Provider serves the group.
	Provider() toolhost.Provider
	// Pid is the process's pid (0 for none).
	Pid() int
	// Exited is cancelled once the module has ended.
	Exited() context.Context
	// ExitError describes how it ended: nil for a clean exit.
	ExitError() error
	// Stop ends it and whatever it started, and releases its resources;
	// also for a module that has ended by itself.
	Stop()
	// Refused lists the tools it could not offer, and why.
	Refused() []string
}

// starters start a block's module, by the block's kind.
var starters = map[SourceKind]func(*supervisor) (module, error){
	SourcePlugin:  (*supervisor).startPlugin,
	SourceBuiltin: (*supervisor).startPlugin,
	SourceMCP:     (*supervisor).startMCP,
}

// launch starts the module, configures it, describes its group and
// registers it. On error the module is stopped.
func (s *supervisor) launch() (module, error) {
	if err := s.verify(); err != nil {
		return nil, err
	}
	s.warnUnconfined()
	m, err := starters[s.kind](s)
	if err != nil {
		return nil, err
	}
	g, err := s.describe(m)
	if err != nil {
		m.Stop()
		return nil, err
	}
	var restarts int
	s.set(func() {
		s.group, s.mod, s.pid, s.state, s.lastErr, restarts = g, m, m.Pid(), StateRunning, nil, s.restarts
	})
	if restarts > 0 {
		s.h.events.Emit(store.Event{Type: store.EventPluginRestarted, Group: g.Spec.ID,
			Payload: map[string]any{"plugin": s.cfg.Name, "pid": m.Pid(), "restarts": restarts}})
	}
	return m, nil
}

// describe configures the module (its config, the host's paths and, for a
// module that confines what it starts, its sandbox) and registers the group
// it reports.
func (s *supervisor) describe(m module) (*Group, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.h.opts.DescribeTimeout)
	defer cancel()
	req := &toolhost.ConfigureRequest{Config: s.cfg.Config, HostPaths: s.h.hostPaths(), Sandbox: moduleSandbox(&s.cfg)}
	if err := m.Provider().Configure(ctx, req); err != nil {
		return nil, s.stepError("configure", err)
	}
	g, err := s.describeGroup(ctx, m)
	if err != nil {
		return nil, err
	}
	if err := s.h.register(g); err != nil {
		return nil, err
	}
	return g, nil
}

// describeGroup describes the module's group.
func (s *supervisor) describeGroup(ctx context.Context, m module) (*Group, error) {
	spec, err := m.Provider().Describe(ctx, &toolhost.DescribeRequest{})
	if err != nil {
		return nil, s.stepError("describe", err)
	}
	if s.kind == SourceBuiltin && spec.ID != s.cfg.Name {
		return nil, toolhost.Errorf(toolhost.CodeInvalidGroupDef, "builtin %q reported group id %q", s.cfg.Name, spec.ID)
	}
	withSettings(spec, &s.cfg)
	return &Group{Spec: *spec, Kind: s.kind, SourceName: s.cfg.Name, Provider: &procProvider{Provider: m.Provider(), exited: m.Exited()},
		conf: &s.cfg, refused: m.Refused()}, nil
}

// refresh describes a running module's group again and registers it in
// place of the old one when it changed: an MCP server's tools changed.
func (s *supervisor) refresh() {
	s.mu.Lock()
	m, old := s.mod, s.group
	s.mu.Unlock()
	if m == nil || old == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.h.opts.DescribeTimeout)
	defer cancel()
	g, err := s.describeGroup(ctx, m)
	if err == nil && reflect.DeepEqual(g.Spec, old.Spec) {
		return // nothing changed: no event, no list_changed to the sessions
	}
	if err == nil {
		s.mu.Lock()
		current := s.group == old
		if current {
			s.group = g
		}
		s.mu.Unlock()
		if !current {
			return
		}
		err = s.h.update(old, g)
	}
	if err != nil {
		s.h.log.Error("group not updated", "plugin", s.cfg.Name, "error", err)
	}
}

// hostPaths are the paths every module is told to keep out of
// (ConfigureRequest.HostPaths), absolute: the data directory, and the
// artifact directory when it lies elsewhere.
func (h *Host) hostPaths() []string {
	dir, err := filepath.Abs(h.store.Dir())
	if err != nil { // no working directory: the path as it is
		dir = h.store.Dir()
	}
	if a := h.cfg.Store.ArtifactDir; a != "" { // an artifact directory outside the data directory
		return []string{dir, a}
	}
	return []string{dir}
}

// release forgets the running module and returns its group.
func (s *supervisor) release() *Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.group
	s.group, s.mod, s.pid = nil, nil, 0
	return g
}

// stepError names the step of loading that failed.
func (s *supervisor) stepError(step string, err error) error {
	if errors.Is(err, toolhost.ErrTimeout) {
		return toolhost.Errorf(toolhost.CodeTimeout, "%s: no answer within %s", step, s.h.opts.DescribeTimeout)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// exited unregisters the group of a module that has ended and reaps what
// is left of its process group.
func (s *supervisor) exited(m module) error {
	g := s.release()
	if g != nil {
		s.h.unregister(g)
	}
	m.Stop() // the process is gone: this releases its connection and socket
	s.sweep(m)
	err := m.ExitError()
	payload := map[string]any{"plugin": s.cfg.Name, "pid": m.Pid(), "status": "exit status 0"}
	if err != nil {
		s.set(func() { s.lastErr = toolhost.Errorf(toolhost.CodePluginExited, "plugin exited: %v", err) })
		payload["status"] = err.Error()
	}
	e := store.Event{Type: store.EventPluginExited, Payload: payload}
	if g != nil {
		e.Group = g.Spec.ID
	}
	s.h.events.Emit(e)
	return err
}

// shutdown unregisters the group and stops the module gracefully.
func (s *supervisor) shutdown(m module) {
	if g := s.release(); g != nil {
		s.h.unregister(g)
	}
	m.Stop()
	s.sweep(m)
	s.set(func() { s.state = StateStopped })
}

// sweep removes, in the background, the cgroups of sandboxes that m's
// process made and left (a command module killed mid-command, or stopped
// while keeping some for reuse); Close waits for it.
func (s *supervisor) sweep(m module) {
	if pid := m.Pid(); pid > 0 {
		s.h.sweeping.Go(func() { sandbox.RemoveCgroups(pid) })
	}
}

// unload stops the plugin and waits until it is gone.
func (s *supervisor) unload() {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
}

// permanent reports whether a launch error would repeat on every attempt.
func permanent(err error) bool {
	switch toolhost.CodeOf(err) {
	case toolhost.CodeReservedGroupID, toolhost.CodeInvalidGroupDef, toolhost.CodePolicy, toolhost.CodeValidation:
		return true
	}
	return false
}

// restartAfter applies a restart policy to how a process ended.
func restartAfter(p config.RestartPolicy, exitErr error) bool {
	switch p {
	case config.RestartAlways:
		return true
	case config.RestartNever:
		return false
	}
	return exitErr != nil
}

// procProvider serves a group from a plugin process; calls in flight when
// the process exits fail at once with plugin_exited.
type procProvider struct {
	toolhost.Provider
	exited context.Context
}

var errExited = toolhost.Errorf(toolhost.CodePluginExited, "plugin exited during the call")

func (p *procProvider) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	if p.exited.Err() != nil {
		return nil, errExited
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(p.exited, func() { cancel(errExited) })
	defer stop()
	res, err := p.Provider.Call(ctx, req)
	if err != nil && (errors.Is(context.Cause(ctx), errExited) || p.exited.Err() != nil) {
		return nil, errExited
	}
	return res, err
}
