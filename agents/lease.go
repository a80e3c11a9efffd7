package agents

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/store"
)

// Leases: each runtime agent is run by one host at a time, the one holding
// its lease in the store, renewed every lease/3 (keep); a dead or cut-off
// host's agents are adopted once their lease passes (adopt).

// adopt runs the runtime agents among all that are not final and that no
// live process runs: without an owner, with a lease that has passed, or
// owned by a dead process of this machine. Without a model provider there
// is nothing to run them with. It notes in adoptAt when the soonest lease
// it saw that has not passed will.
func (rt *Runtime) adopt(ctx context.Context, all []store.Agent) error {
	rt.adoptAt = time.Time{}
	if rt.opts.Provider == nil {
		return nil
	}
	now := time.Now()
	lagging := false
	for _, rec := range all {
		if rec.Kind != store.AgentRuntime || rec.Final() || rt.runs(rec.ID) {
			continue
		}
		stale := ""
		switch {
		case rec.Owner == "", expired(rec, now):
		case rt.ownerLocal(rec.Owner) && !ownerAlive(rec.Owner):
			stale = rec.Owner
		default:
			// A live owner, or one elsewhere whose lease has not passed
			// (this runtime's own, for an agent Spawn is starting).
			if !rec.LeaseUntil.IsZero() && (rt.adoptAt.IsZero() || rec.LeaseUntil.Before(rt.adoptAt)) {
				rt.adoptAt = rec.LeaseUntil
			}
			continue
		}
		// The host reloads what it knows of agents and roles when the store
		// changes, as this does: a new agent may be new to it yet, and its
		// loop would fail.
		r, err := rt.role(rec.RoleID)
		if _, known := rt.h.Agents().Get(rec.ID); err != nil || !known {
			lagging = true
			if rt.catchUp >= rt.lease/renewParts {
				rt.log.Warn("cannot adopt an agent the host does not know, or whose role it does not", "agent", rec.ID, "role", rec.RoleID)
			}
			continue
		}
		begun := time.Now()
		ok, err := rt.st.ClaimAgent(ctx, rec.ID, rt.owner, stale, rt.lease)
		if err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
		if !ok {
			continue
		}
		rt.log.Info("agent resumed", "agent", rec.ID, "role", r.Name, "status", rec.Status, "previous_owner", rec.Owner)
		rec.Owner = rt.owner
		rt.launch(&agent{id: rec.ID, rec: rec, role: r.Name, cred: rec.Credential}, begun)
	}
	if lagging {
		rt.catchUp = min(max(2*rt.catchUp, catchUpFirst), rt.lease/renewParts)
	} else {
		rt.catchUp = 0
	}
	return nil
}

// expired reports whether the agent's lease passed before now.
func expired(rec store.Agent, now time.Time) bool {
	return !rec.LeaseUntil.IsZero() && rec.LeaseUntil.Before(now)
}

// runs reports whether an agent's loop runs here (or is ending).
func (rt *Runtime) runs(id string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.agents[id] != nil
}

// machineID names this machine and its process-id namespace: processes
// that share it can tell each other's liveness by pid.
func machineID() string {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	sum := sha256.Sum256([]byte(string(bytes.TrimSpace(boot)) + "\x00" + ns))
	return host + "/" + hex.EncodeToString(sum[:4])
}

// ownerLocal reports whether an owner claim was made on this machine (and
// pid namespace). A claim without a machine predates leases, which were
// made on one machine: it counts as local.
func (rt *Runtime) ownerLocal(owner string) bool {
	_, machine, ok := strings.Cut(owner, "@")
	return !ok || machine == rt.machine
}

// ownerAlive reports whether the process named by an owner claim
// ("pid:nonce@machine") is alive on this machine.
func ownerAlive(owner string) bool {
	pid, err := strconv.Atoi(strings.SplitN(owner, ":", 2)[0])
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// nextLook is how long adoption may wait before looking again: a third of
// a lease, or less when a lease the last refresh saw passes sooner.
func (rt *Runtime) nextLook() time.Duration {
	wait := rt.lease / renewParts
	if rt.catchUp > 0 {
		wait = min(wait, rt.catchUp)
	}
	if !rt.adoptAt.IsZero() {
		// A moment after: the claim needs the lease to have passed.
		wait = min(wait, max(time.Until(rt.adoptAt)+time.Millisecond, time.Millisecond))
	}
	return wait
}

// launch starts the loop of an agent this runtime has just claimed (the
// claim's statement began at begun), unless one runs already, and holds
// its lease. Once a loop this runtime gave up ends, the agent may be
// adopted again.
func (rt *Runtime) launch(a *agent, begun time.Time) {
	ctx, cancel := context.WithCancelCause(rt.ctx)
	a.cancel, a.wake, a.busy = cancel, make(chan struct{}, 1), true
	rt.mu.Lock()
	if rt.agents[a.id] != nil {
		rt.mu.Unlock()
		cancel(nil)
		return
	}
	rt.agents[a.id] = a
	rt.holds[a.id] = rt.holdUntil(begun)
	rt.mu.Unlock()
	rt.wg.Add(2) // one is the loop's
	go func() {
		defer rt.wg.Done()
		rt.loop(ctx, a)
		rt.mu.Lock()
		defer rt.mu.Unlock()
		a.ended = true
		delete(rt.holds, a.id)
		if rt.lost[a] {
			delete(rt.lost, a)
			delete(rt.agents, a.id)
		}
		rt.changed.Broadcast()
	}()
}

// holdUntil is when this runtime stops an agent whose lease it took or
// renewed with a statement begun at begun, unless renewed again.
func (rt *Runtime) holdUntil(begun time.Time) time.Time {
	return begun.Add(rt.lease - rt.lease/marginParts)
}

// loseIfHeld stops the loop of an agent run here, without changing its
// status, since this runtime no longer holds it; the rest of the message
// says why, with its key-value pairs.
func (rt *Runtime) loseIfHeld(id, why string, kv ...any) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.lose(id, why, kv...)
}

// lose is loseIfHeld with rt.mu held.
func (rt *Runtime) lose(id, why string, kv ...any) {
	a := rt.agents[id]
	if _, held := rt.holds[id]; a == nil || !held || a.rec.Final() {
		return
	}
	delete(rt.holds, id)
	rt.lost[a] = true
	a.cancel(errLost)
	rt.log.Warn("agent stopped here: "+why, append([]any{"agent", id}, kv...)...)
}

// keep renews the leases of the agents run here every third of a lease
// (every twelfth after a failure), until the runtime closes.
func (rt *Runtime) keep() {
	defer rt.wg.Done()
	t := time.NewTimer(rt.lease / renewParts)
	defer t.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-t.C:
		}
		next := rt.lease / renewParts
		if err := rt.renew(rt.ctx); err != nil && rt.ctx.Err() == nil {
			rt.log.Error("renewing the agents' leases", "error", err)
			next = rt.lease / retryParts
		}
		t.Reset(next)
	}
}

// renew renews the leases of the agents run here. An agent whose lease
// another process took, or that could not be renewed before the time this
// runtime holds it until, stops here.
func (rt *Runtime) renew(ctx context.Context) error {
	begun := time.Now()
	rt.mu.Lock()
	var ids []string
	var soonest time.Time
	for id, until := range rt.holds {
		if a := rt.agents[id]; a == nil || a.rec.Final() {
			continue // its loop is ending
		}
		if !until.After(begun) {
			rt.lose(id, "its lease could not be renewed in time", "lease", rt.lease)
			continue
		}
		ids = append(ids, id)
		if soonest.IsZero() || until.Before(soonest) {
			soonest = until
		}
	}
	rt.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	// Not past the first agent's hold: a database that does not answer
	// by then has not renewed it.
	ctx, cancel := context.WithDeadline(ctx, soonest)
	defer cancel()
	held, err := rt.st.RenewLeases(ctx, rt.owner, rt.lease, ids)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if err != nil {
		now := time.Now()
		for _, id := range ids {
			if until, ok := rt.holds[id]; ok && !until.After(now) {
				rt.lose(id, "its lease could not be renewed in time", "lease", rt.lease, "error", err)
			}
		}
		return fmt.Errorf("runtime: %w", err)
	}
	until := rt.holdUntil(begun)
	kept := make(map[string]bool, len(held))
	for _, id := range held {
		kept[id] = true
		if _, ok := rt.holds[id]; ok {
			rt.holds[id] = until
		}
	}
	for _, id := range ids {
		if !kept[id] {
			rt.lose(id, "another process took the agent over")
		}
	}
	return nil
}
