package host

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/sandbox"
	"github.com/toolhost/toolhost/store"
	"go.opentelemetry.io/otel/trace"
)

// Options tune a [Host]; nil means defaults.
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
	// config's data directory ([config.Config.DataDir]), or, when that is
	// empty, in a temporary directory removed by [Host.Close].
	Store *store.Store
	// StoreWatch is how often the host checks the store for changes made by
	// other processes (such as `toolhost roles` beside a server). Default 1s.
	StoreWatch time.Duration
	// RetentionInterval is how often the host runs a retention pass
	// ([Events.Retain]), the first at [Host.Start], and removes the
	// agents that ended longer ago than the store block's agent_retention
	// (every agent_retention when that is shorter). Default 1h.
	RetentionInterval time.Duration
	// Approver decides calls that need an approval. Nil means the executor
	// block's approver: a queue served by the HTTP API (see [Host.Approvals]),
	// always-approve or always-deny.
	Approver Approver
	// DisableMetrics leaves the host without metrics: [Host.Metrics] returns
	// nil, and calls count nothing.
	DisableMetrics bool
	// EventQueue is how many audit events may wait in memory to be
	// written (0: 65536). Calls wait for room while the store writes; while
	// it cannot (its database unavailable or its disk full), an event past
	// the bound is dropped and counted instead (toolhost_events_lost_total).
	EventQueue int
	// TracerProvider receives the host's spans: calls and their stages,
	// with the plugins' spans under them. Nil means the config's telemetry
	// block and the OTEL_* environment decide, and with neither asking for
	// an exporter tracing is off.
	TracerProvider trace.TracerProvider
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
	setDefault(&out.RetentionInterval, time.Hour)
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
	mgr  *manager

	store     *store.Store
	closeDB   func() error // closes the store if the host opened it
	dir       directory    // the store's roles and agents, cached
	views     sync.Map     // role name → *view
	loaded    sync.Map     // agent id → map[string]bool, the tools it loaded (see loadedOf)
	loadMu    sync.Mutex   // held to load tools
	stopWatch context.CancelFunc
	watching  sync.WaitGroup
	sweeping  sync.WaitGroup // removals of the cgroups exited modules made (supervisor.sweep)

	events    *store.EventWriter
	metrics   *Metrics                    // nil when disabled
	tracing   trace.TracerProvider        // nil when tracing is off
	tracer    trace.Tracer                // from tracing, nil when it is
	stopTrace func(context.Context) error // flushes and stops a provider the host made
	approver  Approver
	queue     *ApprovalQueue // the approver, when it is a queue
	pending   *pendingWork   // bounds the calls waiting for an approval, per credential
	flights   flights
	inflight  sync.WaitGroup  // calls in the pipeline
	callGate  sync.RWMutex    // orders a call's start before Close's wait for the calls
	closing   context.Context // cancelled by Close: calls in flight end
	shutdown  context.CancelFunc

	watchers  watchers
	retention retentionStats

	mu      sync.Mutex
	plugins []*supervisor // in config order
	closed  bool
	started chan struct{} // closed when Start has finished: every plugin had its first outcome (see Ready)
	runID   string        // this process's run on the store (beginRun)
	hostID  string        // the host's id (data_dir/host.id), which its runs share

	storage storage // saved outputs and artifacts within the quotas
}

// New returns a host for the configuration, with its store open. It starts
// no plugin; see [Host.Start].
func New(cfg *config.Config, opts *Options) (*Host, error) {
	if cfg == nil {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "host: nil config")
	}
	if err := checkTrust(cfg); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	h := &Host{cfg: cfg, opts: o, log: o.Logger, mgr: newManager(), store: o.Store, closeDB: func() error { return nil }, started: make(chan struct{})}
	if h.store == nil {
		dir, cleanup := cfg.DataDir, func() error { return nil }
		if dir == "" {
			tmp, err := os.MkdirTemp("", "toolhost-data-")
			if err != nil {
				return nil, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
			}
			dir, cleanup = tmp, func() error { return os.RemoveAll(tmp) }
		}
		changed, err := store.Tighten(dir)
		if err != nil {
			_ = cleanup()
			return nil, toolhost.Errorf(toolhost.CodeInternal, "host: the data directory must be private: %w", err)
		}
		if len(changed) > 0 {
			o.Logger.Warn("the data directory was readable by other users: made it private (directories 0700, files 0600)", "dir", dir, "paths", len(changed))
		}
		st, err := store.OpenWith(context.Background(), dir, store.Options{Driver: cfg.Store.Driver, DSN: cfg.Store.DSN})
		if err != nil {
			_ = cleanup()
			return nil, toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
		}
		h.store = st
		h.closeDB = func() error { return errors.Join(st.Close(), cleanup()) }
	}
	if err := h.setupTracing(); err != nil {
		_ = h.closeDB()
		return nil, err
	}
	h.events = h.store.NewEventWriter(&store.WriterOptions{OnError: func(err error) { h.log.Error("writing events", "error", err) },
		Urgent: cfg.Audit.Mode == "strict", QueueSize: o.EventQueue})
	if !o.DisableMetrics {
		h.metrics = newMetrics(h)
	}
	h.approver = o.Approver
	if q, ok := o.Approver.(*ApprovalQueue); ok && q != nil {
		h.queue = q
	}
	if h.approver == nil {
		switch cfg.Executor.Approver {
		case "approve":
			h.approver = AlwaysApprove{}
		case "deny":
			h.approver = AlwaysDeny{Reason: "the executor block's approver denies every call that needs approval"}
		default:
			h.queue = newApprovalQueue(cmp.Or(cfg.Executor.ApprovalTimeout, 5*time.Minute))
			h.approver = h.queue
		}
	}
	if h.queue != nil { // shared with the hosts on the store
		h.queue.useStore(h.store, o.StoreWatch, func() string { return h.runID }, h.log)
	}
	h.pending = newPendingWork(cmp.Or(cfg.Executor.MaxPendingApprovals, config.DefaultMaxPendingApprovals),
		int64(cmp.Or(cfg.Executor.MaxPendingApprovalMB, config.DefaultMaxPendingApprovalMB))<<20)
	h.closing, h.shutdown = context.WithCancel(context.Background())
	h.flights.saves, h.flights.done = make(chan *flight, 1024), make(chan struct{})
	go h.flights.saveLoop(h)
	return h, nil
}

// checkTrust refuses a config in which agents could write what the host
// trusts (config.Config.CheckTrust, for a Config built in code too; Parse
// has checked a file's), and makes the workspace directory.
func checkTrust(cfg *config.Config) error {
	exe, _ := os.Executable()
	if diags := cfg.CheckTrust(exe); len(diags) > 0 {
		return toolhost.Errorf(toolhost.CodePolicy, "host: %w", diags)
	}
	if cfg.Workspace != "" {
		if err := os.MkdirAll(cfg.Workspace, 0o755); err != nil {
			return toolhost.Errorf(toolhost.CodeInternal, "host: the workspace: %w", err)
		}
	}
	return nil
}

// Approvals returns the queue of calls waiting for a decision, or nil when
// the host's approver is not a queue.
func (h *Host) Approvals() *ApprovalQueue { return h.queue }

// List returns recorded events (see [store.EventFilter]).
func (es Events) List(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	h := es.h
	return h.store.Events(ctx, f)
}

// Emit records an event through the host's event writer: it only
// enqueues. The agent runtime records its agent.* and turn.* events so.
func (es Events) Emit(e store.Event) {
	h := es.h
	h.events.Emit(e)
}

// Logger returns the host's logger.
func (h *Host) Logger() hclog.Logger { return h.log }

// Flush returns once every event recorded so far is in the store.
func (es Events) Flush(ctx context.Context) error {
	h := es.h
	return h.events.Flush(ctx)
}

// Store returns the host's store.
func (h *Host) Store() *store.Store { return h.store }

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

// Load makes the store's config roles those the config declares and reads
// the roles and agents, without starting any module: enough for a program that
// reads or edits roles and tokens, such as toolhost roles list. [Host.Start]
// does it first. Group ids are known only once the modules run, so
// [Roles.Create] and [Roles.Update] naming groups need [Host.Start].
func (rs Roles) Load(ctx context.Context) error {
	h := rs.h
	if err := h.reconcileRoles(ctx); err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	if _, err := h.dir.load(ctx, h.store); err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	return nil
}

// Start launches every configured plugin in parallel and returns once each has
// registered its group or failed its first attempt; a plugin that fails is
// logged and shown by [Modules.List], and the host serves the others. Restarts
// go on in the background until [Host.Close]. A block's sandbox (see
// [config.Plugin.Sandbox]) confines its plugin; a plugin that cannot be
// confined is refused with policy, never run unconfined.
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
	if err := h.Roles().Load(ctx); err != nil {
		return err
	}
	h.pruneCallResults(ctx)
	if err := h.beginRun(ctx); err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "host: %w", err)
	}
	if err := h.sweepOutputs(ctx); err != nil {
		h.log.Warn("the saved outputs and their index could not be reconciled", "error", err)
	}
	h.watching.Go(func() { h.watchStore(watchCtx, h.opts.StoreWatch) })
	h.watching.Go(func() { h.renewRun(watchCtx) })
	h.watching.Go(func() { h.retainLoop(watchCtx) })
	h.watching.Go(func() { h.forgetLoop(watchCtx) })
	h.logSandboxes()
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
	close(h.started)
	return nil
}

// Diagnostics lists the problems that did not stop the host: tool-name
// conflicts and blocked plugins (a core group's tool wins over a plugin's,
// else the first registered; a plugin whose id is a core tool's name is
// blocked whole), and config roles naming groups no module provides.
func (ms Modules) Diagnostics() []Diagnostic {
	h := ms.h
	return append(h.mgr.Diagnostics(), h.configRoleDiagnostics()...)
}

// Register registers an in-process group (source kind "runtime"), such
// as a [*github.com/toolhost/toolhost/sdk.Group]; runtime groups may use reserved ids. The provider is
// configured with an empty object and the host's paths, and described in an
// empty context.
func (ms Modules) Register(ctx context.Context, p toolhost.Provider) error {
	h := ms.h
	if err := p.Configure(ctx, &toolhost.ConfigureRequest{Config: []byte("{}"), HostPaths: h.hostPaths()}); err != nil {
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
	h.registered(g, false)
	return nil
}

// update puts g in old's place at once (see manager.Replace): calls to the
// tools both have never find them gone. Nothing is done when old is no
// longer registered.
func (h *Host) update(old, g *Group) error {
	if ok, err := h.mgr.Replace(old, g); !ok || err != nil {
		return err
	}
	h.registered(g, true)
	return nil
}

// registered records and announces a group just registered: the event
// group.registered (with "updated" when it replaced its own earlier
// version), the log lines of the conflicts it lost or won (so that a tool
// skipped when a core group registers after its own is said too), and the
// change to the roles' views.
func (h *Host) registered(g *Group, updated bool) {
	payload := map[string]any{"source": g.SourceName, "kind": g.Kind, "tools": len(g.Spec.Tools)}
	if updated {
		payload["updated"] = true
	}
	h.events.Emit(store.Event{Type: store.EventGroupRegistered, Group: g.Spec.ID, Payload: payload})
	for _, d := range h.mgr.Diagnostics() {
		if d.Group == g.Spec.ID || d.Plugin == g.SourceName || d.winner == g.Spec.ID {
			h.log.Error(d.Message, "plugin", d.Plugin)
		}
	}
	h.log.Info("group registered", "group", g.Spec.ID, "tools", len(g.Spec.Tools), "source", g.SourceName, "updated", updated)
	h.changed()
}

func (h *Host) unregister(g *Group) {
	if h.mgr.UnregisterGroup(g) {
		h.log.Info("group unregistered", "group", g.Spec.ID, "source", g.SourceName)
		h.events.Emit(store.Event{Type: store.EventGroupUnregistered, Group: g.Spec.ID, Payload: map[string]any{"source": g.SourceName}})
		h.changed()
	}
}

// Unload removes a group: a plugin's process is stopped gracefully first and
// not restarted; a runtime group is unregistered.
func (ms Modules) Unload(groupID string) error {
	h := ms.h
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
func (ms Modules) Groups() []GroupInfo {
	h := ms.h
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

// Group returns the registered group of this id.
func (ms Modules) Group(id string) (*Group, bool) { return ms.h.mgr.Get(id) }

// List lists every configured plugin, registered or not, in config order.
func (ms Modules) List() []PluginStatus {
	h := ms.h
	h.mu.Lock()
	sups := h.plugins
	h.mu.Unlock()
	out := make([]PluginStatus, len(sups))
	for i, s := range sups {
		out[i] = s.status()
	}
	return out
}

// newCallID returns a new call id: the time in milliseconds, then 10
// random bytes, in hex. Ids made later sort later, so the events' index
// of call ids (both engines) grows at its end instead of at a random page
// for each call, which cost SQLite a page written per call at each commit.
func newCallID() string { return randomID(fmt.Sprintf("call_%012x", time.Now().UnixMilli()), 10) }

// randomID is prefix and n random bytes in hex.
func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Close ends the calls in flight (cancelled), stops every plugin gracefully,
// in parallel, and waits until no plugin process, nor any process in a
// plugin's process group, is left; then it writes the events still queued and
// closes the store it opened.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	sups := h.plugins
	h.mu.Unlock()
	h.callGate.Lock()
	h.shutdown() // no call starts from here on
	h.callGate.Unlock()
	var wg sync.WaitGroup
	for _, s := range sups {
		wg.Go(s.unload)
	}
	wg.Wait()
	h.sweeping.Wait()
	sandbox.RemoveCgroups(os.Getpid()) // the empty ones kept for the modules' next sandboxes
	h.inflight.Wait()
	close(h.flights.saves)
	<-h.flights.done
	if h.stopWatch != nil {
		h.stopWatch()
	}
	h.watching.Wait()
	err := h.events.Close()
	if h.stopTrace != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = errors.Join(err, h.stopTrace(ctx))
		cancel()
	}
	if h.runID != "" {
		err = errors.Join(err, h.store.EndRun(context.Background(), h.runID))
	}
	return errors.Join(err, h.closeDB())
}

// Roles is the host's roles: those of the config and those made through
// the API, with the tool groups each sees.
type Roles struct{ h *Host }

// Roles returns the host's roles.
func (h *Host) Roles() Roles { return Roles{h} }

// Tokens makes and revokes the bearer tokens of roles and of metrics.
type Tokens struct{ h *Host }

// Tokens returns the host's tokens.
func (h *Host) Tokens() Tokens { return Tokens{h} }

// Agents is the host's agents: each calls as one role, and sees only its
// role's tools.
type Agents struct{ h *Host }

// Agents returns the host's agents.
func (h *Host) Agents() Agents { return Agents{h} }

// Events is the host's audit trail: what it records, and reads back.
type Events struct{ h *Host }

// Events returns the host's events.
func (h *Host) Events() Events { return Events{h} }

// Modules is the host's configured plugins and the tool groups registered
// from them and in-process.
type Modules struct{ h *Host }

// Modules returns the host's modules.
func (h *Host) Modules() Modules { return Modules{h} }

// Artifacts is the files agents share, each owned by a role.
type Artifacts struct{ h *Host }

// Artifacts returns the host's artifacts.
func (h *Host) Artifacts() Artifacts { return Artifacts{h} }
