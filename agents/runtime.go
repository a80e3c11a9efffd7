// Package agents is the agent runtime: it runs agents on a host, each in
// an agent loop, which asks a model provider for the next step, runs the
// tool calls it asks for through the host's execution pipeline and repeats
// until a final answer, within limits. It registers in-process, under
// their reserved ids, the built-in tool groups defined under plugins/
// (org_management, artifact, context, console, tool_search, code: see
// [github.com/toolhost/toolhost/plugins/org],
// [github.com/toolhost/toolhost/plugins/artifact],
// [github.com/toolhost/toolhost/plugins/contextgroup],
// [github.com/toolhost/toolhost/plugins/console],
// [github.com/toolhost/toolhost/plugins/toolsearch] and
// [github.com/toolhost/toolhost/plugins/codemode]), and serves what they
// need of it: agents, roles, artifacts, conversations and the pipeline.
//
// Agents are persisted in the host's store: their status, conversation and
// mailbox survive a restart, and a server adopts the agents no live process
// runs. Agents talk through send_message; an agent without work waits for
// messages.
//
// A runtime agent is run by one process at a time, the owner named in its
// row, which holds a lease on it: the owner renews its leases every third
// of the lease's length, and stops an agent whose lease it could not renew
// in time or that another process took. A process that stops cleanly
// releases its agents, for another to adopt at once; one that dies (or
// loses the database) leaves leases that pass, after which a server with
// Adopt takes the agents over, a lease after the last renewal. On one
// machine (and pid namespace) the death of an owner's process is seen
// sooner, by its process id, at the adopter's next look.
package agents

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
	"go.opentelemetry.io/otel/trace"
)

// The event types the runtime records, beside the host's tool_call.* and
// the console group's
// [github.com/toolhost/toolhost/plugins/console.EventPrint].
const (
	EventAgentSpawned    = "agent.spawned"    // an agent was created (parent: the spawning call)
	EventAgentStarted    = "agent.started"    // an agent began working on a task or messages
	EventAgentCompleted  = "agent.completed"  // an agent reached a final answer and waits for messages
	EventAgentFailed     = "agent.failed"     // an agent stopped with an error (final)
	EventAgentTerminated = "agent.terminated" // an agent was terminated (final)
	EventTurnStarted     = "turn.started"     // the agent asked its model for the next step (parent: the agent)
	EventTurnCompleted   = "turn.completed"   // the model answered: tool calls, an answer, or a bad output
)

// Options tune a [Runtime]; nil means the defaults.
type Options struct {
	// Provider is the model agents call. Nil: agents can be recorded (by a
	// runtime that does not run them) but spawning fails in one that does.
	Provider model.Provider
	// RunAgents runs the loops of the agents this runtime spawns. False (a
	// one-shot CLI command) records them for a server to adopt.
	RunAgents bool
	// Adopt also runs, at [Runtime.Start], whenever the store changes, and
	// when a lease it saw passes, the agents no live process runs: those
	// spawned by one-shot commands, released by runtimes that closed, or whose
	// owner's lease has passed (a host that died).
	Adopt bool
	// Console receives console_print's lines; nil: [os.Stdout].
	Console io.Writer
	// WatchEvery is how often the store is checked for changes made by
	// other processes (terminations, messages, agents to adopt); 0: 1s.
	WatchEvery time.Duration
	// Lease is how long this runtime's claim on an agent lasts unless
	// renewed; 0: the runtime block's lease (default 15s).
	Lease time.Duration
	// Machine names the machine and process-id namespace this runtime
	// runs in, in its claims on agents: a runtime adopts at once the
	// agents of a dead process of its own machine (known by its pid), and
	// waits for the leases of other machines' to pass. Default: the host
	// name and a digest of the boot id and pid namespace.
	Machine string
}

// The lease's timing, in fractions of its length: the owner renews every
// third, tries again every twelfth after a failure, and stops an agent a
// quarter before its lease would pass unless renewed by then, so that an
// adopter (whose clock may differ by less than that) never finds it still
// running. A server with Adopt looks for agents to adopt every third too,
// and when a lease it saw is due to pass.
const (
	renewParts  = 3
	retryParts  = 12
	marginParts = 4
)

// Runtime runs agents on a host.
type Runtime struct {
	h          *host.Host
	st         *store.Store
	cfg        config.Runtime
	opts       Options
	log        hclog.Logger
	owner      string // this process's claim on the agents it runs: pid:nonce@machine
	machine    string
	lease      time.Duration
	registered bool
	tracer     trace.Tracer // nil when the host traces nothing

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	changed sync.Cond // an agent's state changed (for Wait)
	agents  map[string]*agent
	// holds maps the agents run here whose lease this runtime holds to
	// when it stops them unless renewed; lost are those it gave up (an
	// expired lease, another owner), whose loops are ending.
	holds map[string]time.Time
	lost  map[*agent]bool

	// When adopt should look again (watch's goroutine only): adoptAt,
	// when the soonest lease the last refresh saw passes; catchUp, after
	// how long, when the host did not know yet an agent to adopt (or its
	// role), learnt of through the store a moment before it.
	adoptAt time.Time
	catchUp time.Duration
}

// New returns a runtime for h, which must outlive it. [Runtime.Start]
// registers the built-in groups.
func New(h *host.Host, opts *Options) *Runtime {
	rt := &Runtime{h: h, st: h.Store(), cfg: h.Config().Runtime, log: h.Logger().Named("runtime"), agents: map[string]*agent{},
		holds: map[string]time.Time{}, lost: map[*agent]bool{}}
	if opts != nil {
		rt.opts = *opts
	}
	rt.lease = cmp.Or(rt.opts.Lease, rt.cfg.Lease, config.DefaultLease)
	rt.machine = cmp.Or(rt.opts.Machine, machineID())
	if rt.opts.Console == nil {
		rt.opts.Console = os.Stdout
	}
	if rt.opts.WatchEvery <= 0 {
		rt.opts.WatchEvery = time.Second
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	rt.owner = strconv.Itoa(os.Getpid()) + ":" + hex.EncodeToString(b[:]) + "@" + rt.machine
	rt.changed.L = &rt.mu
	rt.ctx, rt.cancel = context.WithCancel(context.Background())
	if tp := h.TracerProvider(); tp != nil {
		rt.tracer = tp.Tracer(tracerName)
	}
	return rt
}

// Register registers the built-in groups with the host. Called before the
// host's [host.Host.Start], it lets the host know them when it checks the
// config's roles; [Runtime.Start] calls it otherwise.
func (rt *Runtime) Register(ctx context.Context) error {
	if rt.registered {
		return nil
	}
	for _, g := range rt.groups() {
		if err := rt.h.Modules().Register(ctx, g); err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
	}
	rt.registered = true
	return nil
}

// Start registers the built-in groups (unless [Runtime.Register] did) and, with
// Adopt, resumes the agents no live process runs and watches the store for
// more. Call it after the host's [host.Host.Start].
func (rt *Runtime) Start(ctx context.Context) error {
	if err := rt.Register(ctx); err != nil {
		return err
	}
	if rt.opts.Adopt {
		if err := rt.refresh(ctx); err != nil {
			return err
		}
	}
	if rt.opts.RunAgents || rt.opts.Adopt {
		rt.wg.Add(2)
		go rt.watch()
		go rt.keep()
	}
	return nil
}

// Close stops every agent loop, leaving the agents' status as it is so that
// a later runtime resumes them, and releases them, so that another runtime
// may adopt them at once.
func (rt *Runtime) Close() error {
	rt.cancel()
	rt.wg.Wait()
	if !rt.opts.RunAgents && !rt.opts.Adopt {
		return nil // it ran no agents
	}
	if _, err := rt.st.ReleaseAgents(context.Background(), rt.owner); err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	return nil
}

// SpawnRequest asks for a new agent.
type SpawnRequest struct {
	// Role names the agent's role (its name or id).
	Role string
	// Task is the agent's first message; empty: it waits for messages.
	Task string
	// ParentID is the spawning agent; empty for an operator.
	ParentID string
	// CallID is the tool call that spawns it, under which its events show.
	CallID string
	// Credential is the credential spawning it (see
	// [toolhost.CallContext.Credential]); the agent is that credential's,
	// and its calls count against that credential's limits. Empty: the
	// parent's, if it has one.
	Credential string
}

// Spawn creates an agent of a role and, when the runtime runs agents,
// starts its loop. It returns the agent with its role's name.
func (rt *Runtime) Spawn(ctx context.Context, req SpawnRequest) (AgentSummary, error) {
	if rt.opts.RunAgents && rt.opts.Provider == nil {
		return AgentSummary{}, toolhost.Errorf(toolhost.CodeValidation, "no model provider is configured: add a model block to the config")
	}
	role, err := rt.role(req.Role)
	if err != nil {
		return AgentSummary{}, err
	}
	if req.ParentID != "" {
		parent, err := rt.st.Agent(ctx, req.ParentID)
		if err != nil {
			return AgentSummary{}, toolhost.Errorf(toolhost.CodeValidation, "no agent %q to be the parent", req.ParentID)
		}
		req.Credential = cmp.Or(req.Credential, parent.Credential)
	}
	// The agent, its task with it (the first save of its loop opens its
	// conversation with the task), is this runtime's from the start, so
	// that no other server adopts it as it starts here; one that does not
	// run agents releases it, for a server to adopt.
	begun := time.Now()
	rec := store.Agent{ParentID: req.ParentID, Kind: store.AgentRuntime, Task: req.Task, Status: store.StatusWaiting,
		Owner: rt.owner, LeaseUntil: begun.Add(rt.lease), Credential: req.Credential}
	rec, err = rt.h.Agents().Create(ctx, role.Name, rec)
	if err != nil {
		return AgentSummary{}, err
	}
	rt.h.Events().Emit(store.Event{Type: EventAgentSpawned, AgentID: rec.ID, Role: role.Name, ParentID: req.CallID,
		Payload: map[string]any{"parent_agent": req.ParentID, "task": req.Task, "credential": rec.Credential}})
	rt.log.Info("agent spawned", "agent", rec.ID, "role", role.Name, "parent", req.ParentID)
	if rt.opts.RunAgents {
		rt.launch(&agent{id: rec.ID, rec: rec, role: role.Name, cred: rec.Credential}, begun)
	} else {
		// Should this fail, the lease passes instead.
		if _, err := rt.st.ReleaseAgent(context.WithoutCancel(ctx), rec.ID, rt.owner); err != nil {
			rt.log.Warn("releasing a recorded agent: a server adopts it once its lease passes", "agent", rec.ID, "error", err)
		}
		rec.Owner, rec.LeaseUntil = "", time.Time{}
	}
	return AgentSummary{Agent: rec, Role: role.Name}, nil
}

// role finds a role by name or id.
func (rt *Runtime) role(nameOrID string) (store.Role, error) {
	r, err := rt.h.Roles().Get(nameOrID)
	if err == nil {
		return r, nil
	}
	for _, r := range rt.h.Roles().List() {
		if r.ID == nameOrID {
			return r, nil
		}
	}
	return r, err
}

// Send puts a message in an agent's mailbox and wakes the agent. from is
// the sending agent, empty for an operator.
func (rt *Runtime) Send(ctx context.Context, from, to, body string) (store.Mail, error) {
	if err := rt.recipient(ctx, to); err != nil {
		return store.Mail{}, err
	}
	m, err := rt.st.Send(ctx, store.Mail{To: to, From: from, Body: body})
	if err != nil {
		return m, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	rt.wake(to)
	return m, nil
}

// recipient checks that agent to exists and reads mail: not final.
func (rt *Runtime) recipient(ctx context.Context, to string) error {
	target, err := rt.st.Agent(ctx, to)
	if errors.Is(err, store.ErrNotFound) {
		return noAgent(to)
	}
	if err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	if target.Final() {
		return toolhost.Errorf(toolhost.CodeValidation, "agent %s is %s: it reads no more messages", to, target.Status)
	}
	return nil
}

// wake tells an agent run here that mail is waiting.
func (rt *Runtime) wake(id string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if a := rt.agents[id]; a != nil {
		a.pending = true
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// Terminate ends an agent and its descendants: their loops stop and their
// status becomes terminated, with the reason.
func (rt *Runtime) Terminate(ctx context.Context, id, reason string) ([]string, error) {
	all, err := rt.st.Agents(ctx)
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	ids := subtree(all, id)
	if len(ids) == 0 {
		return nil, noAgent(id)
	}
	var done []string
	for _, x := range ids {
		a, err := rt.st.TerminateAgent(ctx, x, reason)
		if errors.Is(err, store.ErrFinal) {
			continue
		}
		if err != nil {
			return done, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
		}
		done = append(done, x)
		rt.h.Events().Emit(store.Event{Type: EventAgentTerminated, AgentID: x, Payload: map[string]any{"reason": reason}})
		rt.stopped(x, a)
	}
	return done, nil
}

// stopped records a final state decided outside an agent's loop and stops
// the loop.
func (rt *Runtime) stopped(id string, rec store.Agent) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if a := rt.agents[id]; a != nil {
		a.rec = rec
		if a.cancel != nil {
			a.cancel(errTerminated)
		}
		rt.changed.Broadcast()
	}
}

// noAgent is the error for an unknown agent id: validation, wrapping
// store.ErrNotFound.
func noAgent(id string) error {
	return &toolhost.Error{Code: toolhost.CodeValidation, Message: fmt.Sprintf("no agent %q", id), Err: store.ErrNotFound}
}

var errTerminated = toolhost.Errorf(toolhost.CodeCancelled, "the agent was terminated")

// subtree returns id and every agent descending from it, parents first;
// nothing when id is unknown.
func subtree(all []store.Agent, id string) []string {
	children := map[string][]string{}
	known := false
	for _, a := range all {
		children[a.ParentID] = append(children[a.ParentID], a.ID)
		known = known || a.ID == id
	}
	if !known {
		return nil
	}
	out := []string{id}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// Wait returns once the agent and every agent it spawned (transitively) are
// idle — waiting with no unread message, or failed or terminated and their
// loops ended — and the events they recorded are in the store, so that
// [Tree] then shows all they did; or when ctx ends. Only agents this
// runtime runs are waited for.
func (rt *Runtime) Wait(ctx context.Context, id string) error {
	if err := rt.waitIdle(ctx, id); err != nil {
		return err
	}
	if err := rt.h.Events().Flush(ctx); err != nil {
		return toolhost.Errorf(toolhost.CodeOf(err), "waiting for the events of agent %s: %w", id, err)
	}
	return nil
}

// waitIdle returns once the agents run here under id are all idle, or
// when ctx ends.
func (rt *Runtime) waitIdle(ctx context.Context, id string) error {
	stop := context.AfterFunc(ctx, func() {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		rt.changed.Broadcast()
	})
	defer stop()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for !rt.idle(id) {
		if ctx.Err() != nil {
			return toolhost.Errorf(toolhost.CodeOf(ctx.Err()), "waiting for agent %s: %w", id, ctx.Err())
		}
		rt.changed.Wait()
	}
	return nil
}

// idle reports whether the agents run here under id are all idle; rt.mu is
// held. A final agent is idle once its loop has ended: the loop records
// its last events (the failure, a call cut short) after the status.
func (rt *Runtime) idle(id string) bool {
	all := make([]store.Agent, 0, len(rt.agents))
	for _, a := range rt.agents {
		all = append(all, a.rec)
	}
	for _, x := range subtree(all, id) {
		a := rt.agents[x]
		if a.rec.Final() {
			if !a.ended {
				return false
			}
		} else if a.busy || a.pending {
			return false
		}
	}
	return true
}

// catchUpFirst is how soon adopt looks again for an agent the host did not
// know yet; then twice as late each time, up to a third of a lease.
const catchUpFirst = 20 * time.Millisecond

// watch follows changes other processes make to the store: an agent
// terminated elsewhere stops, mail sent elsewhere wakes its agent, an agent
// another process took stops here, and (with Adopt) agents spawned by
// one-shot commands or left by dead hosts are adopted. Since a lease
// passing is no change to the store, with Adopt it also looks every third
// of a lease, and when a lease it saw passes.
func (rt *Runtime) watch() {
	defer rt.wg.Done()
	w, err := rt.st.Changes(rt.ctx, rt.opts.WatchEvery, "agents", "mailbox")
	if err != nil {
		rt.log.Error("cannot watch the store", "error", err)
		return
	}
	defer w.Close()
	var tick *time.Timer
	var ticks <-chan time.Time
	if rt.opts.Adopt {
		tick = time.NewTimer(rt.nextLook())
		defer tick.Stop()
		ticks = tick.C
	}
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-w.C:
		case <-ticks:
		}
		if err := rt.refresh(rt.ctx); err != nil && rt.ctx.Err() == nil {
			rt.log.Error("following the store", "error", err)
		}
		if tick != nil {
			tick.Reset(rt.nextLook())
		}
	}
}

// refresh follows the store with two reads, whatever the number of agents:
// the agents run here that another process ended stop, those another
// process took stop, those with unread mail wake, and (with Adopt) the
// agents no live process runs are taken.
func (rt *Runtime) refresh(ctx context.Context) error {
	all, err := rt.st.Agents(ctx)
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	unread, err := rt.st.Unread(ctx)
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	for _, rec := range all { // stopped, taken and wake ignore agents not run here
		switch {
		case rec.Final():
			rt.stopped(rec.ID, rec)
		case rec.Owner != rt.owner:
			// Claims of this runtime's all happened before the read (in
			// Spawn, with this owner, or in an earlier adopt), so an
			// agent it runs under another owner was taken from it.
			rt.loseIfHeld(rec.ID, "another process took the agent over", "owner", rec.Owner)
		case unread[rec.ID]:
			rt.wake(rec.ID)
		}
	}
	if rt.opts.Adopt {
		return rt.adopt(ctx, all)
	}
	return nil
}

// errLost is why the loop of an agent this runtime no longer holds stops:
// not a failure, nor a termination (but cancelled, as a termination is, so
// that the loop leaves the agent's status alone).
var errLost = toolhost.Errorf(toolhost.CodeCancelled, "the host running the agent lost its lease; another host resumes the agent")
