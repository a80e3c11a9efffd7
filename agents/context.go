package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/agents/model"
	"github.com/toolhost/toolhost/internal/tokencount"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

type compressArgs struct {
	Keep int `json:"keep,omitempty" jsonschema:"how many recent messages to keep verbatim; default from the runtime block (keep_recent)"`
}

// ContextStatus is what get_context_status reports.
type ContextStatus struct {
	Messages int `json:"messages"`
	// Tokens estimates the context's size: the system prompt, the tools and
	// the messages, counted with o200k_base.
	Tokens  int     `json:"tokens"`
	Budget  int     `json:"budget"`
	Percent float64 `json:"percent"`
	// Turns and TotalTokens are the agent's model calls and the tokens they
	// used over its life.
	Turns       int `json:"turns"`
	TotalTokens int `json:"totalTokens"`
}

// contextGroup is context: the calling agent's conversation.
func (rt *Runtime) contextGroup() *sdk.Group {
	return &sdk.Group{ID: "context", Description: "Your context window: how full it is, and compressing older turns into a summary.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("get_context_status", "How many messages and tokens your context holds, against its budget.",
			func(_ context.Context, r *sdk.Request[struct{}]) (ContextStatus, error) {
				a, err := rt.caller(r.Call)
				if err != nil {
					return ContextStatus{}, err
				}
				return rt.contextStatus(a)
			}, sdk.Title("Get context status"), sdk.NeedsAgent(), sdk.NeedsConversation(), sdk.ReadOnly()),
		sdk.NewTool("compress_context", "Summarise your older messages through the model, keeping your task and the most recent messages verbatim.",
			func(ctx context.Context, r *sdk.Request[compressArgs]) (*sdk.Result, error) {
				a, err := rt.caller(r.Call)
				if err != nil {
					return nil, err
				}
				return rt.compress(ctx, a, r.Args.Keep)
			}, sdk.Title("Compress context"), sdk.NeedsAgent(), sdk.NeedsConversation(), sdk.Destructive()),
	}}
}

// caller returns the calling agent, which must be run here.
func (rt *Runtime) caller(cc toolhost.CallContext) (*agent, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	a := rt.agents[cc.AgentID]
	if a == nil {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "agent %s is not run by this runtime, so it has no context here", cc.AgentID)
	}
	return a, nil
}

func (rt *Runtime) contextStatus(a *agent) (ContextStatus, error) {
	req, _, err := rt.request(a)
	if err != nil {
		return ContextStatus{}, err
	}
	b, _ := json.Marshal(req.Messages)
	tools, _ := json.Marshal(req.Tools)
	tokens, err := tokencount.Count(req.System + string(tools) + string(b))
	if err != nil {
		return ContextStatus{}, toolhost.Errorf(toolhost.CodeInternal, "runtime: counting tokens: %w", err)
	}
	rt.mu.Lock()
	turns, total := a.rec.Turns, a.rec.Tokens
	rt.mu.Unlock()
	return ContextStatus{Messages: len(req.Messages), Tokens: tokens, Budget: rt.cfg.ContextBudget,
		Percent: float64(int(1000*float64(tokens)/float64(rt.cfg.ContextBudget))) / 10, Turns: turns, TotalTokens: total}, nil
}

// compress replaces the messages between the task and the recent ones with
// a summary the model writes. The cut never separates tool results from the
// call that asked for them.
func (rt *Runtime) compress(ctx context.Context, a *agent, keep int) (*sdk.Result, error) {
	if keep <= 0 {
		keep = rt.cfg.KeepRecent
	}
	if rt.opts.Provider == nil {
		return nil, toolhost.Errorf(toolhost.CodeValidation, "no model provider is configured")
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
		return sdk.Text(fmt.Sprintf("nothing to compress: %d messages, the last %d are kept", len(msgs), keep)), nil
	}
	rt.mu.Lock()
	info := model.Agent{ID: a.id, Role: a.role, ParentID: a.rec.ParentID}
	rt.mu.Unlock()
	resp, err := rt.complete(ctx, &model.Request{Purpose: model.PurposeSummary, Agent: info,
		System:   "Summarise the conversation below for the agent that had it: the facts learnt, the decisions made, the work done and what is left. Be brief and exact.",
		Messages: msgs[first:cut]})
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeToolExec, "model provider: %v", err)
	}
	summary := strings.TrimSpace(resp.Message.Content)
	if summary == "" {
		return nil, toolhost.Errorf(toolhost.CodeToolExec, "the model returned an empty summary")
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
		return nil, err
	}
	return sdk.JSON(map[string]any{"summarised": cut - first, "removed": removed, "messages": len(next), "summary": summary})
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
