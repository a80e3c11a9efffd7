package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// CallStory is what the events of one call id tell of it, composed by
// [Store.CallStory]: who called, the arguments and the result as stored
// (redacted), the verdicts of the role's rule and limits, the approval
// and who decided it, how long it took, and where it sits among calls.
type CallStory struct {
	// CallID is the call's id.
	CallID string `json:"callId"`
	// Tool, Group, AgentID and Role are the call's, as its events name them.
	Tool    string `json:"tool,omitempty"`
	Group   string `json:"group,omitempty"`
	AgentID string `json:"agentId,omitempty"`
	Role    string `json:"role,omitempty"`
	// Credential and Principal name who held the caller's credential.
	Credential string `json:"credential,omitempty"`
	Principal  string `json:"principal,omitempty"`
	// Channel is how the call came (mcp, api, agent, …).
	Channel string `json:"channel,omitempty"`
	// Started and Ended are the times of its started and terminal events.
	Started *time.Time `json:"started,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	// Outcome is ok, failed, or running while no terminal event is stored.
	Outcome string `json:"outcome"`
	// Code and Error say why a failed call failed.
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
	// LatencyMs is how long the call took, as its terminal event says.
	LatencyMs *float64 `json:"latencyMs,omitempty"`
	// Arguments are the call's arguments as stored: redacted, and text
	// when cut at the events' bound (ArgumentsTruncated).
	Arguments          any  `json:"arguments,omitempty"`
	ArgumentsTruncated bool `json:"argumentsTruncated,omitempty"`
	// Rule is the role's rule that decided the call, with its action.
	Rule       string `json:"rule,omitempty"`
	RuleAction string `json:"ruleAction,omitempty"`
	// Limits are the verdicts of the call limits that counted the call.
	Limits any `json:"limits,omitempty"`
	// Approval is the approver's decision, its reason and who made it
	// (by), when the call asked for one.
	Approval any `json:"approval,omitempty"`
	// Replays counts the later calls with the same id that replayed its
	// outcome without running.
	Replays int `json:"replays,omitempty"`
	// Result is the result envelope kept for a call id the caller chose
	// (replayed when it repeats), while kept; nil otherwise.
	Result json.RawMessage `json:"result,omitempty"`
	// ParentID is the id the call was made under (an agent's turn);
	// ParentCall the call it comes from: that id when it is a call's, else
	// the call that spawned the calling agent.
	ParentID   string `json:"parentId,omitempty"`
	ParentCall string `json:"parentCall,omitempty"`
	// Children are the events under the call that are not its own: the
	// agents it spawned, what it printed, the calls made under it.
	Children []Event `json:"children"`
	// Events are the call's own events, oldest first (readable: see
	// [Event.Readable]).
	Events []Event `json:"events"`
}

// maxStoryEvents bounds the call's own events and its children in a
// [CallStory]: the most recent are kept.
const maxStoryEvents = 1000

// agentSpawned is the type of the event the agent runtime writes when it
// creates an agent (agents/runtime.go), whose parent is the spawning call.
const agentSpawned = "agent.spawned"

// CallStory composes the story of the call id from its events; an error
// wrapping [ErrNotFound] when no event names it.
func (s *Store) CallStory(ctx context.Context, id string) (CallStory, error) {
	st := CallStory{CallID: id, Children: []Event{}, Events: []Event{}}
	own, err := s.Events(ctx, EventFilter{Call: id, Limit: maxStoryEvents})
	if err != nil {
		return st, err
	}
	if len(own) == 0 {
		return st, fmt.Errorf("store: call %q: no event names it: %w", id, ErrNotFound)
	}
	st.Events = make([]Event, 0, len(own))
	var started, ended *Event
	for i := range own {
		e := own[i].Readable()
		st.Events = append(st.Events, e)
		switch {
		case e.Type == EventCallStarted && started == nil:
			started = &st.Events[i]
		case e.Type != EventCallCompleted && e.Type != EventCallFailed:
		case e.Payload["replayed"] == true:
			st.Replays++
		case ended == nil:
			ended = &st.Events[i]
		}
	}
	if started == nil && len(own) == maxStoryEvents { // more events than kept: the started one is older
		first, err := s.Events(ctx, EventFilter{Call: id, Type: EventCallStarted, Limit: 1, first: true})
		if err != nil {
			return st, err
		}
		if len(first) > 0 {
			e := first[0].Readable()
			started = &e
		}
	}
	st.Outcome = "running"
	for _, e := range []*Event{started, ended} { // what one lacks (a host_exited end) the other says
		if e == nil {
			continue
		}
		st.Tool, st.Group, st.AgentID = cmp.Or(st.Tool, e.Tool), cmp.Or(st.Group, e.Group), cmp.Or(st.AgentID, e.AgentID)
		st.Role, st.ParentID = cmp.Or(st.Role, e.Role), cmp.Or(st.ParentID, e.ParentID)
		st.Credential, st.Principal = cmp.Or(st.Credential, payloadText(e, "credential")), cmp.Or(st.Principal, payloadText(e, "principal"))
	}
	if started != nil {
		st.Started, st.Channel, st.Arguments = &started.Time, payloadText(started, "channel"), started.Payload["arguments"]
		st.ArgumentsTruncated = started.Payload["arguments_truncated"] == true
	}
	if ended != nil {
		p := ended.Payload
		st.Ended, st.Outcome = &ended.Time, OutcomeOK
		if ended.Type == EventCallFailed {
			st.Outcome = OutcomeFailed
			st.Code, st.Error = payloadText(ended, "code"), payloadText(ended, "error")
		}
		if v, ok := p["latency_ms"].(float64); ok {
			st.LatencyMs = &v
		}
		st.Rule, st.RuleAction = payloadText(ended, "rule"), payloadText(ended, "rule_action")
		st.Limits, st.Approval = p["limits"], p["approval"]
	}
	if r, err := s.CallResult(ctx, id, time.Time{}); err == nil {
		st.Result = r.Result
	} else if !errors.Is(err, ErrNotFound) {
		return st, err
	}
	if err := s.storyFamily(ctx, &st); err != nil {
		return st, err
	}
	return st, nil
}

// storyFamily fills in the call's parent call and its children.
func (s *Store) storyFamily(ctx context.Context, st *CallStory) error {
	children, err := s.Events(ctx, EventFilter{Parent: st.CallID, Limit: maxStoryEvents})
	if err != nil {
		return err
	}
	for _, e := range children {
		if e.CallID != st.CallID {
			st.Children = append(st.Children, e.Readable())
		}
	}
	if st.ParentID != "" {
		parent, err := s.Events(ctx, EventFilter{Call: st.ParentID, Limit: 1})
		if err != nil {
			return err
		}
		if len(parent) > 0 {
			st.ParentCall = st.ParentID
			return nil
		}
	}
	if st.AgentID == "" {
		return nil
	}
	spawned, err := s.Events(ctx, EventFilter{Agent: st.AgentID, Type: agentSpawned, Limit: 1})
	if err != nil || len(spawned) == 0 {
		return err
	}
	st.ParentCall = spawned[0].ParentID
	return nil
}

// payloadText is the text of e's payload at k; "" when it is no text.
func payloadText(e *Event, k string) string {
	v, _ := e.Payload[k].(string)
	return v
}
