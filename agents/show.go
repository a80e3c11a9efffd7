package agents

import (
	"cmp"
	"context"
	"errors"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/store"
)

// AgentSummary is an agent with the name of its role: what `toolhost agents
// list` and GET /api/agents show.
type AgentSummary struct {
	store.Agent
	// Role is the name of the agent's role (its id when the role is gone).
	Role string `json:"role"`
}

// List returns every agent, oldest first, with its role's name.
func List(ctx context.Context, st *store.Store) ([]AgentSummary, error) {
	agents, err := st.Agents(ctx)
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	return summaries(ctx, st, agents)
}

// Page returns a page of at most limit agents, with their roles' names, as
// [store.Store.ListAgents] orders them (those not ended first), after the
// cursor a previous page returned ("" for the first); next is "" after the
// last page. A cursor ListAgents did not hand out is a validation error.
func Page(ctx context.Context, st *store.Store, cursor string, limit int) (page []AgentSummary, next string, err error) {
	agents, next, err := st.ListAgents(ctx, cursor, limit)
	if errors.Is(err, store.ErrInvalid) {
		return nil, "", toolhost.Errorf(toolhost.CodeValidation, "runtime: %w", err)
	}
	if err != nil {
		return nil, "", toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	page, err = summaries(ctx, st, agents)
	return page, next, err
}

// summaries names the roles of agents.
func summaries(ctx context.Context, st *store.Store, agents []store.Agent) ([]AgentSummary, error) {
	roles, err := st.Roles(ctx)
	if err != nil {
		return nil, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	names := make(map[string]string, len(roles))
	for _, r := range roles {
		names[r.ID] = r.Name
	}
	out := make([]AgentSummary, len(agents))
	for i, a := range agents {
		out[i] = AgentSummary{Agent: a, Role: cmp.Or(names[a.RoleID], a.RoleID)}
	}
	return out, nil
}

// AgentDetail is an agent with its role's name, conversation, mailbox and
// children: what `toolhost agents show` and GET /api/agents/{id} return.
type AgentDetail struct {
	AgentSummary
	// Messages are its conversation with its model, oldest first.
	Messages []store.AgentMessage `json:"messages"`
	// Mailbox holds the messages sent to it, read or not.
	Mailbox []store.Mail `json:"mailbox"`
	// Children are the agents it spawned.
	Children []string `json:"children"`
}

// Show reads an agent's detail from the store; an unknown id is a
// validation error.
func Show(ctx context.Context, st *store.Store, id string) (AgentDetail, error) {
	a, err := st.Agent(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return AgentDetail{}, noAgent(id)
	}
	if err != nil {
		return AgentDetail{}, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	d := AgentDetail{AgentSummary: AgentSummary{Agent: a, Role: a.RoleID}, Messages: []store.AgentMessage{}, Mailbox: []store.Mail{}, Children: []string{}}
	if r, err := st.Role(ctx, a.RoleID); err == nil {
		d.Role = r.Name
	}
	msgs, err := st.Messages(ctx, id)
	if err == nil && msgs != nil {
		d.Messages = msgs
	}
	mail, merr := st.Mailbox(ctx, id)
	if merr == nil && mail != nil {
		d.Mailbox = mail
	}
	all, aerr := st.Agents(ctx)
	for _, x := range all {
		if x.ParentID == id {
			d.Children = append(d.Children, x.ID)
		}
	}
	if err = errors.Join(err, merr, aerr); err != nil {
		return d, toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	return d, nil
}
