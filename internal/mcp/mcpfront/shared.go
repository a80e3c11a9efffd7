package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/store"
)

// What a sessionless client holds is in the store, so that every host
// sharing it (PostgreSQL) answers any of the client's requests, a load
// balancer sending each to any host:
//
//   - Its agents: a credential's client names an agent by its key, and the
//     store makes one agent per role, credential and key, which every host
//     finds (host.Agents.Client); the tools it loaded are the store's. A
//     host tells the store when a request used the agent (at most every
//     tenth of the idle timeout), and ends it idle only when no host has
//     used it for about that long (store.Store.EndIdleAgent); every host
//     sweeps the agents whose clients went away while their hosts stopped.
//   - Its tasks: the host running a task keeps it in the store (status,
//     status message, result); any host answers tasks/get from there, and
//     tasks/cancel marks it cancelled, which the running host hears through
//     PostgreSQL's notifications and ends the call. A task whose host has
//     not renewed its run's liveness within the runtime lease
//     (store.Store.RunAlive) is failed by the first host asked about it.
//   - Its held calls: the call runs on the host that holds it, which keeps
//     each round its client was sent in the store, named by its request
//     state. A retry that reaches another host leaves the client's answers
//     there; the holding host resumes the call with them, as it would
//     have the retry, and leaves its reply (the result, or the next round),
//     which the other host answers with.
//
// On SQLite, one host, all of it is this process's: the store keeps the
// rows all the same (the same seam), read only for what a run of the host
// that stopped left (its tasks fail, its held calls' retries are refused).

// clientKeyPrefix begins the store's client key of a sessionless agent,
// before the agent key its client chose (store.Agent.ClientKey).
const clientKeyPrefix = "mcp/"

// shared reports whether other hosts may share the host's store, and so
// serve its sessionless clients too.
func (r *mcpRole) shared() bool { return r.h.Store().Engine() == store.DriverPostgres }

// storeTimeout bounds a write of the shared state made off a request.
const storeTimeout = 30 * time.Second

// used tells the store that a request used sessionless agent a, at most
// every tenth of the idle timeout, so that no host ends it idle while
// another serves its client.
func (r *mcpRole) used(a *mcpAgent) {
	if !r.shared() || r.open == nil {
		return
	}
	now := time.Now()
	a.mu.Lock()
	stale := now.Sub(a.used) >= r.open.idle/10
	if stale {
		a.used = now
	}
	a.mu.Unlock()
	if !stale {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := r.h.Store().UsedAgent(ctx, a.agentID, now); err != nil {
		r.h.Logger().Debug("mcp: an agent's use not recorded", "agent", a.agentID, "error", err)
	}
}

// forgetIdle drops sessionless agent a, idle on this host for the idle
// timeout or ended to make room in its credential's share of this host. On
// a shared store its agent is marked terminated only when no host has used
// it for the idle timeout (it may serve its client through another, or
// have a task or a held call there: usedWhileBusy); its held calls and
// tasks here run on to their own ends.
func (r *mcpRole) forgetIdle(a *mcpAgent, why string) {
	if !r.shared() {
		r.forget(a, why)
		return
	}
	r.agents.CompareAndDelete(a.key, a)
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if _, err := r.h.Store().EndIdleAgent(ctx, a.agentID, time.Now().Add(-r.open.idle), why); err != nil {
		r.h.Logger().Warn("mcp: an idle agent is not marked terminated", "role", r.role, "agent", a.agentID, "error", err)
	}
}

// followShared follows, until ctx ends, the changes other hosts make to
// what this one holds for sessionless clients: tasks cancelled through
// them, rounds answered through them (and replies abandoned), and sweeps
// the agents idle everywhere. It runs on a shared store only.
func (f *Front) followShared(ctx context.Context) {
	w, err := f.h.Store().Changes(ctx, time.Second, "mcp_tasks", "mcp_rounds")
	if err != nil {
		f.h.Logger().Error("mcp: cannot follow the tasks and rounds of other hosts", "error", err)
		return
	}
	defer w.Close()
	sweep := time.NewTicker(f.open.idle / 2)
	defer sweep.Stop()
	touch := time.NewTicker(f.open.idle / 10)
	defer touch.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			f.sweepIdle(ctx)
			continue
		case <-touch.C:
			f.roles.Range(func(_, r any) bool {
				r.(*mcpRole).usedWhileBusy()
				return true
			})
			continue
		case <-w.C:
		}
		f.roles.Range(func(_, r any) bool {
			r.(*mcpRole).tasks.follow(ctx, r.(*mcpRole))
			r.(*mcpRole).followRounds(ctx)
			return true
		})
	}
}

// usedWhileBusy tells the store that the sessionless agents with work on
// this host (a request open, a task's call among them, or a call held for
// their client) are in use, however long since their client's last
// request: no other host may end them idle, or to make room, meanwhile.
func (r *mcpRole) usedWhileBusy() {
	r.agents.Range(func(_, v any) bool {
		a := v.(*mcpAgent)
		if !a.key.sessionless() {
			return true
		}
		busy := a.entry != nil && r.open.inUse(a.entry)
		if !busy {
			busy = len(r.held.all(func(c *heldCall) bool { return c.agent.agentID == a.agentID })) > 0
		}
		if busy {
			r.used(a)
		}
		return true
	})
}

// sweepIdle marks terminated the sessionless agents no host has used for
// the idle timeout (those of hosts that stopped, above all).
func (f *Front) sweepIdle(ctx context.Context) {
	ids, err := f.h.Store().EndIdleClientAgents(ctx, time.Now().Add(-f.open.idle), f.open.idleReason())
	if err != nil {
		f.h.Logger().Warn("mcp: idle agents not swept", "error", err)
	} else if len(ids) > 0 {
		f.h.Logger().Debug("mcp: idle agents swept", "count", len(ids))
	}
}

// saveTask records task t, which began, in the store, as it is by now
// (it may have ended already); its end waits for the record, and goes to
// the store after it (storeEnd).
func (r *mcpRole) saveTask(t *mcpTask) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	t.mu.Lock()
	defer t.mu.Unlock()
	row := store.ClientTask{ID: t.id, AgentID: t.agent.agentID, Credential: t.agent.cred, RunID: r.h.Agents().Run(),
		Status: t.status, Message: t.message, CreatedAt: t.created, UpdatedAt: t.updated}
	if t.result != nil {
		row.Result = string(completeResult(t.result))
	}
	if err := r.h.Store().PutTask(ctx, row, taskTTL, maxKeptTasks); err != nil {
		r.h.Logger().Warn("mcp: a task is not shared with the other hosts", "task", t.id, "error", err)
		return
	}
	t.saved = true
}

// taskNoteEvery is how often a task's status message goes to the store.
const taskNoteEvery = time.Second

// storeNote passes a working task's new status message on to the store, at
// most every taskNoteEvery. t.mu is held.
func (t *mcpTask) storeNote() {
	if !t.saved || time.Since(t.noted) < taskNoteEvery {
		return
	}
	t.noted = time.Now()
	id, message, st := t.id, t.message, t.store
	t.writes.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		_ = st.NoteTask(ctx, id, message)
	})
}

// storeEnd records in the store how task t ended. t.mu is held.
func (t *mcpTask) storeEnd() {
	if !t.saved {
		return
	}
	var result string
	if t.result != nil {
		result = string(completeResult(t.result))
	}
	id, status, message, st := t.id, t.status, t.message, t.store
	t.writes.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		_, _ = st.EndTask(ctx, id, status, message, result)
	})
}

// follow ends the working tasks of ts that another host ended in the
// store (tasks/cancel through it).
func (ts *mcpTasks) follow(ctx context.Context, r *mcpRole) {
	ts.mu.Lock()
	var ids []string
	for id, t := range ts.tasks {
		t.mu.Lock()
		if t.status == store.TaskWorking && t.saved {
			ids = append(ids, id)
		}
		t.mu.Unlock()
	}
	ts.mu.Unlock()
	ended, err := r.h.Store().EndedTasks(ctx, ids)
	if err != nil {
		r.h.Logger().Debug("mcp: the tasks other hosts ended not read", "error", err)
	}
	for id, row := range ended {
		ts.mu.Lock()
		t := ts.tasks[id]
		ts.mu.Unlock()
		if t != nil {
			t.end(row.Status, nil, row.Message)
		}
	}
}

// sharedTask answers a tasks method about a task this host does not hold,
// from the store: the task of agent a with the id, cancelled when cancel
// is set. A task whose host stopped is failed first. Nil when a has no such
// task.
func (r *mcpRole) sharedTask(ctx context.Context, a *mcpAgent, id string, cancel bool) (*taskResult, error) {
	if a == nil {
		return nil, nil
	}
	row, err := r.h.Store().Task(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && row.AgentID != a.agentID) {
		return nil, nil
	}
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "mcp: %w", err)
	}
	if row.Status == store.TaskWorking {
		alive, hostID, err := r.h.Store().RunAlive(ctx, row.RunID)
		if err != nil {
			return nil, toolhost.Errorf(toolhost.CodeInternal, "mcp: %w", err)
		}
		switch {
		case !alive:
			row, err = r.h.Store().EndTask(ctx, id, store.TaskFailed, stoppedHost(hostID, row.RunID)+": the call may or may not have run to its end", "")
		case cancel:
			row, err = r.h.Store().EndTask(ctx, id, store.TaskCancelled, "cancelled by the client", "")
		}
		if err != nil {
			return nil, toolhost.Errorf(toolhost.CodeInternal, "mcp: %w", err)
		}
	}
	var result json.RawMessage
	if row.Result != "" {
		result = json.RawMessage(row.Result)
	}
	return taskView(row.ID, row.Status, row.Message, row.CreatedAt, row.UpdatedAt, result), nil
}

// stoppedHost says that the host of a run stopped.
func stoppedHost(hostID, runID string) string {
	if hostID == "" {
		return fmt.Sprintf("the host that ran it stopped (run %s)", runID)
	}
	return fmt.Sprintf("the host that ran it (%s) stopped: its run %s ended, or has not renewed its liveness within the runtime lease", hostID, runID)
}

// shareRound records in the store the round of held call c its client is
// sent under the state, for a retry that reaches another host.
func (r *mcpRole) shareRound(c *heldCall, state string, window time.Duration) {
	if !c.agent.key.sessionless() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	err := r.h.Store().PutRound(ctx, store.ClientRound{State: state, AgentID: c.agent.agentID, Method: c.ask.rq.method,
		RunID: r.h.Agents().Run(), Expires: time.Now().Add(window)})
	if err != nil {
		r.h.Logger().Warn("mcp: a held call's round is not shared with the other hosts", "error", err)
	}
}

// takeRound takes in the store the round under the state, which a call
// of sessionless agent a waiting here holds, for a retry that reached
// this host; false when the round was answered through another host, or
// said lost there (this host was taken for dead), or that is not a's
// request of the method. A round the store does
// not hold (its write failed) is this host's alone to take.
func (r *mcpRole) takeRound(ctx context.Context, a *mcpAgent, state, method string) bool {
	if !a.key.sessionless() {
		return true
	}
	st := r.h.Store()
	row, err := st.Round(ctx, state)
	if errors.Is(err, store.ErrNotFound) {
		return true
	}
	if err != nil || row.Status != store.RoundAsking || row.AgentID != a.agentID || row.Method != method {
		return false // another agent's retry leaves the round as it is
	}
	ok, err := st.MoveRound(ctx, state, store.RoundResuming, "", "", store.RoundAsking)
	return err == nil && ok
}

// roundReply is a held call's reply to a retry another host took: the
// request's result, or its protocol error.
type roundReply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *jsonrpc.Error  `json:"error,omitempty"`
}

// resumeShared answers the retry rq of agent a whose request state names a
// call another host holds: the client's answers go to the store, the
// holding host resumes the call with them (followRounds), and its reply is
// the answer. The protocol's invalid-params error when the state names no
// round of a's waiting for its client.
func (r *mcpRole) resumeShared(ctx context.Context, a *mcpAgent, rq *roundRequest) (mcp.Result, error) {
	unknown := errUnknownState(rq.method)
	if !a.key.sessionless() {
		return nil, unknown
	}
	st := r.h.Store()
	row, err := st.Round(ctx, rq.state)
	if err != nil || row.AgentID != a.agentID || row.Method != rq.method || row.RunID == r.h.Agents().Run() {
		return nil, unknown
	}
	answers, err := json.Marshal(rq.in)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "inputResponses: " + err.Error()}
	}
	if lost, err := r.declareLost(ctx, rq, row.RunID, store.RoundAsking); lost {
		return rq.failure(err)
	}
	if ok, err := st.MoveRound(ctx, rq.state, store.RoundAnswered, string(answers), "", store.RoundAsking); err != nil || !ok {
		return nil, unknown
	}
	w, err := st.Changes(ctx, time.Second, "mcp_rounds")
	if err != nil {
		return rq.failure(toolhost.Errorf(toolhost.CodeInternal, "mcp: %w", err))
	}
	defer w.Close()
	check := time.NewTicker(time.Second) // whether the holding host still lives
	defer check.Stop()
	for {
		row, err := st.Round(ctx, rq.state)
		switch {
		case err != nil && ctx.Err() == nil:
			return rq.failure(toolhost.Errorf(toolhost.CodeInternal, "mcp: the held call's round: %w", err))
		case row.Status == store.RoundDone:
			return decodeReply(rq.method, row.Reply)
		case row.Status == store.RoundCancelled:
			return rq.failure(toolhost.Errorf(toolhost.CodeCancelled, "the held call was cancelled"))
		}
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
			_, _ = st.MoveRound(cctx, rq.state, store.RoundCancelled, "", "", store.RoundAnswered, store.RoundResuming)
			cancel()
			return rq.failure(toolhost.Errorf(toolhost.CodeCancelled, "the call was cancelled: %v", context.Cause(ctx)))
		case <-w.C:
		case <-check.C:
			if lost, err := r.declareLost(ctx, rq, row.RunID, store.RoundAnswered); lost {
				return rq.failure(err)
			}
		}
	}
}

// declareLost declares lost the held call of the retry rq, whose round is
// in the status from, when its host's run is taken for dead: the round is
// cancelled, and stays so should the host come back (it was frozen, not
// dead), which then cancels the call (followRounds) and refuses its
// retries. It reports whether it did, and the error the retry fails with
// then.
func (r *mcpRole) declareLost(ctx context.Context, rq *roundRequest, runID, from string) (bool, error) {
	st := r.h.Store()
	alive, hostID, err := st.RunAlive(ctx, runID)
	if err != nil || alive {
		return false, nil
	}
	if ok, err := st.MoveRound(ctx, rq.state, store.RoundCancelled, "", "", from); err != nil || !ok {
		return false, nil
	}
	return true, toolhost.Errorf(toolhost.CodeCancelled, "%s; the call may or may not have run", stoppedHost(hostID, runID))
}

// decodeReply is a held call's reply (roundReply) as the answer of a
// request of the method.
func decodeReply(method, reply string) (mcp.Result, error) {
	var rr roundReply
	if err := json.Unmarshal([]byte(reply), &rr); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the held call's reply does not decode: " + err.Error()}
	}
	if rr.Error != nil {
		return nil, rr.Error
	}
	var res mcp.Result
	switch method {
	case toolhost.MethodPromptsGet:
		res = &mcp.GetPromptResult{}
	case toolhost.MethodResourcesRead:
		res = &mcp.ReadResourceResult{}
	default:
		res = &mcp.CallToolResult{}
	}
	if err := json.Unmarshal(rr.Result, res); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the held call's result does not decode: " + err.Error()}
	}
	return res, nil
}

// followRounds resumes the held calls of this host whose rounds another
// host's retry answered, and cancels those whose retry went away there.
func (r *mcpRole) followRounds(ctx context.Context) {
	st := r.h.Store()
	rounds, err := st.RunRounds(ctx, r.h.Agents().Run(), store.RoundAnswered, store.RoundCancelled)
	if err != nil {
		r.h.Logger().Debug("mcp: the rounds other hosts answered not read", "error", err)
		return
	}
	for _, row := range rounds {
		if row.Status == store.RoundCancelled {
			r.held.cancelRemote(row.State)
			r.held.forgetState(row.State)
			continue
		}
		if ok, err := st.MoveRound(ctx, row.State, store.RoundResuming, "", "", store.RoundAnswered); err != nil || !ok {
			continue
		}
		go r.resumeFor(row)
	}
}

// resumeFor resumes, as its retry would have, the held call whose round
// row another host's retry answered, and leaves the reply in the store.
func (r *mcpRole) resumeFor(row store.ClientRound) {
	reply := func(res mcp.Result, err error) {
		var rr roundReply
		if err != nil {
			var je *jsonrpc.Error
			if !errors.As(rpcError(err, ""), &je) {
				je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
			}
			rr.Error = je
		} else if rr.Result, err = json.Marshal(res); err != nil {
			rr = roundReply{Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the result does not encode: " + err.Error()}}
		}
		b, _ := json.Marshal(rr)
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		if _, err := r.h.Store().MoveRound(ctx, row.State, store.RoundDone, "", string(b), store.RoundResuming); err != nil {
			r.h.Logger().Warn("mcp: a held call's reply is not shared", "error", err)
		}
	}
	var p mcp.CallToolParams
	if err := json.Unmarshal([]byte(`{"name":"","inputResponses":`+row.Answers+`}`), &p); err != nil {
		reply(nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "inputResponses: " + err.Error()})
		return
	}
	c, rd := r.held.takeState(row.State, row.AgentID, row.Method)
	if c == nil {
		reply(nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState names no " + row.Method + " waiting for its client's answer here (it ended)"})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.resumeWindow())
	defer cancel()
	r.held.remote(row.State, cancel)
	defer r.held.remote(row.State, nil)
	reply(r.answerRound(ctx, c, rd, p.InputResponses, nil))
}
