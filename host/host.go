package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/store"
)

// Options tune a Host; nil means defaults.
type Options struct {
	// Logger receives the host's log and, through it, each plugin's log lines
	// at their levels. Nil means no logging.
	Logger hclog.Logger
	// RestartBackoff is the first wait before restarting an exited plugin; it
	// doubles on each consecutive restart. Default 250ms.
	RestartBackoff time.Duration
	// MaxBackoff caps the wait. Default 30s.
	MaxBackoff time.Duration
	// HealthyAfter is how long a plugin must run for its backoff and restart
	// count to start afresh. Default 30s.
	HealthyAfter time.Duration
	// DescribeTimeout bounds a plugin's Configure and Describe. Default 10s.
	DescribeTimeout time.Duration
	// Store keeps roles and agents. Nil means the host opens one in the
	// config's DataDir, or, when DataDir is empty, in a temporary directory
	// removed by Close.
	Store *store.Store
	// StoreWatch is how often the host checks the store for changes made by
	// other processes (such as `toolhost roles` beside a server). Default 1s.
	StoreWatch time.Duration
}

func (o *Options) withDefaults() Options {
	out := Options{}
	if o != nil {
		out = *o
	}
	if out.Logger == nil {
		out.Logger = hclog.NewNullLogger()
	}
	setDefault(&out.RestartBackoff, 250*time.Millisecond)
	setDefault(&out.MaxBackoff, 30*time.Second)
	setDefault(&out.HealthyAfter, 30*time.Second)
	setDefault(&out.DescribeTimeout, 10*time.Second)
	setDefault(&out.StoreWatch, time.Second)
	return out
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// Host runs the configured plugins, keeps their groups registered while their
// processes live, and routes tool calls to them.
type Host struct {
	cfg  *config.Config
	opts Options
	log  hclog.Logger
	mgr  *Manager

	store     *store.Store
	closeDB   func() error // closes the store if the host opened it
	dir       directory    // the store's roles and agents, cached
	views     sync.Map     // role name → *view
	stopWatch context.CancelFunc
	watching  sync.WaitGroup

	mu      sync.Mutex
	plugins []*supervisor // in config order
	closed  bool
}

// New returns a host for the configuration, with its store open. It starts
// no plugin; see Start.
func New(cfg *config.Config, opts *Options) (*Host, error) {
	if cfg == nil {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "host: nil config")
	}
	o := opts.withDefaults()
	h := &Host{cfg: cfg, opts: o, log: o.Logger, mgr: NewManager(), store: o.Store, closeDB: func() error { return nil }}
	if h.store == nil {
		dir, cleanup := cfg.DataDir, func() error { return nil }
		if dir == "" {
			tmp, err := os.MkdirTemp("", "toolhost-data-")
			if err != nil {
				return nil, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
			}
			dir, cleanup = tmp, func() error { return os.RemoveAll(tmp) }
		}
		st, err := store.Open(context.Background(), dir)
		if err != nil {
			_ = cleanup()
			return nil, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
		}
		h.store = st
		h.closeDB = func() error { return errors.Join(st.Close(), cleanup()) }
	}
	return h, nil
}

// Store returns the host's store.
func (h *Host) Store() *store.Store { return h.store }

// Manager returns the host's group manager.
func (h *Host) Manager() *Manager { return h.mgr }

// Config returns the configuration the host runs.
func (h *Host) Config() *config.Config { return h.cfg }

// workDir is the plugins' working directory: the config file's directory,
// or the host's own when the config was not read from a file.
func (h *Host) workDir() string {
	if h.cfg.File == "" {
		return ""
	}
	return filepath.Dir(h.cfg.File)
}

// Start launches every configured plugin in parallel and returns once each
// has registered its group or failed its first attempt; a plugin that fails
// is logged and shown by Plugins, and the host serves the others. Restarts
// go on in the background until Close.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	if h.closed || h.plugins != nil {
		h.mu.Unlock()
		return toolhost.Errorf(toolhost.CodeInternal, "host: Start called twice or after Close")
	}
	for _, p := range h.cfg.Plugins {
		h.plugins = append(h.plugins, newSupervisor(h, p))
	}
	sups := h.plugins
	watchCtx, stop := context.WithCancel(context.Background())
	h.stopWatch = stop
	h.mu.Unlock()
	if err := h.reconcileRoles(ctx); err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	if err := h.dir.load(ctx, h.store); err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	h.watching.Go(func() { h.watchStore(watchCtx, h.opts.StoreWatch) })
	for _, s := range sups {
		go s.run()
	}
	for _, s := range sups {
		select {
		case <-s.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, d := range h.configRoleDiagnostics() {
		h.log.Warn(d.Message)
	}
	return nil
}

// Diagnostics lists the problems that did not stop the host: tool-name
// conflicts and blocked plugins (seed 003), and config roles naming groups
// no module provides.
func (h *Host) Diagnostics() []Diagnostic {
	return append(h.mgr.Diagnostics(), h.configRoleDiagnostics()...)
}

// RegisterGroup registers an in-process group (source kind "runtime"), such
// as a *sdk.Group; runtime groups may use reserved ids. The provider is
// configured with an empty object and described in an empty context.
func (h *Host) RegisterGroup(ctx context.Context, p toolhost.Provider) error {
	if err := p.Configure(ctx, &toolhost.ConfigureRequest{Config: []byte("{}")}); err != nil {
		return err
	}
	spec, err := p.Describe(ctx, &toolhost.DescribeRequest{})
	if err != nil {
		return err
	}
	return h.register(&Group{Spec: *spec, Kind: SourceRuntime, SourceName: spec.ID, Provider: p})
}

func (h *Host) register(g *Group) error {
	replaced, err := h.mgr.Register(g)
	if err != nil {
		return err
	}
	if replaced != nil {
		h.log.Warn("group replaced", "code", toolhost.CodeDuplicateGroupID, "group", g.Spec.ID,
			"old_source", replaced.SourceName, "new_source", g.SourceName)
	}
	for _, d := range h.mgr.Diagnostics() {
		if d.Group == g.Spec.ID || d.Plugin == g.SourceName {
			h.log.Error(d.Message, "plugin", d.Plugin)
		}
	}
	h.log.Info("group registered", "group", g.Spec.ID, "tools", len(g.Spec.Tools), "source", g.SourceName)
	return nil
}

func (h *Host) unregister(g *Group) {
	if h.mgr.UnregisterGroup(g) {
		h.log.Info("group unregistered", "group", g.Spec.ID, "source", g.SourceName)
	}
}

// Unload removes a group: a plugin's process is stopped gracefully first and
// not restarted; a runtime group is unregistered.
func (h *Host) Unload(groupID string) error {
	g, ok := h.mgr.Get(groupID)
	if !ok {
		return toolhost.Errorf(toolhost.CodeValidation, "host: no group %q", groupID)
	}
	if s := h.supervisor(g.SourceName); s != nil && g.Kind != SourceRuntime {
		s.unload()
		return nil
	}
	h.unregister(g)
	return nil
}

func (h *Host) supervisor(name string) *supervisor {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.plugins {
		if s.cfg.Name == name {
			return s
		}
	}
	return nil
}

// Groups lists the registered groups, sorted by id, with their sources' pids,
// states and restart counts.
func (h *Host) Groups() []GroupInfo {
	groups := h.mgr.List()
	for i := range groups {
		src := &groups[i].Source
		if src.Kind == SourceRuntime {
			continue
		}
		if s := h.supervisor(src.Name); s != nil {
			st := s.status()
			src.Pid, src.State, src.Restarts = st.Pid, st.State, st.Restarts
		}
	}
	return groups
}

// Plugins lists every configured plugin, registered or not, in config order.
func (h *Host) Plugins() []PluginStatus {
	h.mu.Lock()
	sups := h.plugins
	h.mu.Unlock()
	out := make([]PluginStatus, len(sups))
	for i, s := range sups {
		out[i] = s.status()
	}
	return out
}

// Call routes a call to the group serving the tool and returns its result.
// The caller's role decides first: the role of Context.AgentID, else the role
// named by Context.Role, else (no agent, no role: an operator) every group
// under the global tools policy. A tool outside the role is refused with
// tool_not_available naming the tool and the role; a tool no group provides
// with unknown_tool. A tool that fails is a Result with OK false; an error
// means the call could not be carried out: those codes, validation (an
// unknown agent or role), timeout, cancelled, plugin_exited or internal. An
// empty call id is filled in, and the role set. The call is bounded by the
// tool's timeout, or the configured default.
func (h *Host) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	v, err := h.callerView(&req.Context)
	if err != nil {
		return nil, err
	}
	t, ok := v.tools[req.Tool]
	if !ok {
		if _, _, exists := h.mgr.lookup(req.Tool); !exists {
			return nil, toolhost.Errorf(toolhost.CodeUnknownTool, "unknown tool %q: no group provides it", req.Tool)
		}
		if v.role == "" {
			return nil, toolhost.Errorf(toolhost.CodeToolNotAvailable, "tool %q is not available: the tools policy hides it", req.Tool)
		}
		return nil, toolhost.Errorf(toolhost.CodeToolNotAvailable, "tool %q is not available to role %q", req.Tool, v.role)
	}
	if req.Context.CallID == "" || req.Context.Role != v.role {
		r := *req
		r.Context.Role = v.role
		if r.Context.CallID == "" {
			r.Context.CallID = newCallID()
		}
		req = &r
	}
	g, spec := t.group, t.spec
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = h.cfg.Limits.Timeout
	}
	// The timeout cancels the call rather than setting a gRPC deadline: the
	// plugin's ctx ends all the same, without a deadline's cost on every call.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() {
			cancel(toolhost.Errorf(toolhost.CodeTimeout, "tool %s timed out after %s", req.Tool, timeout))
		})
		defer t.Stop()
	}
	res, err := g.Provider.Call(ctx, req)
	// A call whose context ended is a timeout or a cancellation, even when
	// the plugin's answer (to its own cancelled context) won the race.
	if ctx.Err() != nil && !errors.Is(err, toolhost.ErrPluginExited) {
		cause := context.Cause(ctx)
		return nil, toolhost.Errorf(toolhost.CodeOf(cause), "call %s: %w", req.Context.CallID, cause)
	}
	return res, err
}

// newCallID returns a random call id.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// Close stops every plugin gracefully, in parallel, and waits until no plugin
// process, nor any process in a plugin's process group, is left.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	sups := h.plugins
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sups {
		wg.Go(s.unload)
	}
	wg.Wait()
	if h.stopWatch != nil {
		h.stopWatch()
	}
	h.watching.Wait()
	return h.closeDB()
}
