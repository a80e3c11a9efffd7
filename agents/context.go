package agents

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/internal/tokencount"
	"github.com/toolhost/toolhost/plugins/contextgroup"
	"github.com/toolhost/toolhost/store"
)

// caller returns the calling agent, which must be run here.
func (rt *Runtime) caller(id string) (*agent, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	a := rt.agents[id]
	if a == nil {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "agent %s is not run by this runtime, so it has no context here", id)
	}
	return a, nil
}

// Status reports the conversation of agent id, run here: how many
// messages and tokens the next model request would carry.
func (b builtins) Status(id string) (contextgroup.Status, error) {
	rt := b.rt
	a, err := rt.caller(id)
	if err != nil {
		return contextgroup.Status{}, err
	}
	req, _, err := rt.request(a)
	if err != nil {
		return contextgroup.Status{}, err
	}
	msgs, _ := json.Marshal(req.Messages)
	tools, _ := json.Marshal(req.Tools)
	tokens, err := tokencount.Count(req.System + string(tools) + string(msgs))
	if err != nil {
		return contextgroup.Status{}, toolhost.Errorf(toolhost.CodeInternal, "runtime: counting tokens: %w", err)
	}
	rt.mu.Lock()
	turns, total := a.rec.Turns, a.rec.Tokens
	rt.mu.Unlock()
	return contextgroup.Status{Messages: len(req.Messages), Tokens: tokens, Budget: rt.cfg.ContextBudget,
		Percent: float64(int(1000*float64(tokens)/float64(rt.cfg.ContextBudget))) / 10, Turns: turns, TotalTokens: total}, nil
}

// Compress replaces the messages of agent id, run here, between its task
// and the keep most recent with a summary the model writes. The cut never
// separates tool results from the call that asked for them.
func (b builtins) Compress(ctx context.Context, id string, keep int) (contextgroup.Compression, error) {
	rt := b.rt
	a, err := rt.caller(id)
	if err != nil {
		return contextgroup.Compression{}, err
	}
	if keep <= 0 {
		keep = rt.cfg.KeepRecent
	}
	if rt.opts.Provider == nil {
		return contextgroup.Compression{}, toolhost.Errorf(toolhost.CodeValidation, "no model provider is configured")
	}
	a.convMu.Lock()
	msgs := a.msgs
	a.convMu.Unlock()
	first := 0
	if len(msgs) > 0 && msgs[0].Role == model.RoleUser {
		first = 1 // the task stays
	}
	cut := max(len(msgs)-keep, first)
	for cut > first && msgs[cut].Role == model.RoleTool {
		cut--
	}
	if cut-first < 2 {
		return contextgroup.Compression{Messages: len(msgs), Kept: keep}, nil
	}
	rt.mu.Lock()
	info := model.Agent{ID: a.id, Role: a.role, ParentID: a.rec.ParentID}
	rt.mu.Unlock()
	resp, err := rt.complete(ctx, &model.Request{Purpose: model.PurposeSummary, Agent: info,
		System:   "Summarise the conversation below for the agent that had it: the facts learnt, the decisions made, the work done and what is left. Be brief and exact.",
		Messages: msgs[first:cut]})
	if err != nil {
		return contextgroup.Compression{}, toolhost.Errorf(toolhost.CodeToolExec, "model provider: %v", err)
	}
	summary := strings.TrimSpace(resp.Message.Content)
	if summary == "" {
		return contextgroup.Compression{}, toolhost.Errorf(toolhost.CodeToolExec, "the model returned an empty summary")
	}
	rt.mu.Lock()
	a.rec.Tokens += resp.Usage.Total()
	rt.mu.Unlock()
	a.convMu.Lock()
	next := append([]model.Message{}, a.msgs[:first]...)
	next = append(next, model.Message{Role: model.RoleUser, Content: "Summary of the earlier conversation:\n" + summary})
	next = append(next, a.msgs[cut:]...)
	removed := len(a.msgs) - len(next)
	a.msgs, a.stored = next, 0
	a.convMu.Unlock()
	if err := rt.persistAll(ctx, a); err != nil {
		return contextgroup.Compression{}, err
	}
	return contextgroup.Compression{Summarised: cut - first, Removed: removed, Messages: len(next), Kept: keep, Summary: summary}, nil
}

// persistAll rewrites the agent's stored conversation.
func (rt *Runtime) persistAll(ctx context.Context, a *agent) error {
	a.convMu.Lock()
	defer a.convMu.Unlock()
	out := make([]store.AgentMessage, len(a.msgs))
	for i, m := range a.msgs {
		out[i] = toStored(m)
	}
	if err := rt.st.ReplaceMessages(context.WithoutCancel(ctx), a.id, out); err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	a.stored = len(a.msgs)
	return nil
}
