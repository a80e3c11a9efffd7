// Package org is the org_management group: find and create roles, spawn
// and terminate agents, send messages between agents. It runs in-process,
// registered by the agent runtime ([github.com/toolhost/toolhost/agents])
// under its reserved id. The runtime serves it as a [Service] and keeps the
// checks that need its agents: who may terminate whom, whose credential a
// spawned agent is.
package org

import (
	"cmp"
	"context"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// Service is what org_management needs from the agent runtime.
type Service interface {
	// RoleNamed finds a role by its name.
	RoleNamed(name string) (store.Role, error)
	// Roles lists the roles.
	Roles() []store.Role
	// CreateRole creates a role.
	CreateRole(ctx context.Context, spec host.RoleSpec) (store.Role, error)
	// Spawn creates an agent of role (its name or id) with task for the
	// caller by: the agent is by's agent's child and by's credential's, and
	// is handed the artifacts of by's role that artifacts names.
	Spawn(ctx context.Context, by toolhost.CallContext, role, task string, artifacts []string) (Spawned, error)
	// Terminate ends the agent target and every agent it spawned, for the
	// agent by ("" for the operator), which may end only the agents it
	// spawned, directly or not; it returns the agents ended.
	Terminate(ctx context.Context, by, target string) ([]string, error)
	// Send puts a message from the agent from ("" for the operator) in the
	// mailbox of the agent to, and wakes it.
	Send(ctx context.Context, from, to, body string) (store.Mail, error)
}

// Spawned is the agent [Service.Spawn] created.
type Spawned struct {
	// ID is the agent's id.
	ID string
	// Role is the name of its role.
	Role string
	// Status is its status, as [store.Agent.Status].
	Status string
}

type findRoleArgs struct {
	Name string `json:"name" jsonschema:"the role's name"`
}

type createRoleArgs struct {
	Name       string   `json:"name" jsonschema:"the new role's name: a letter or digit, then up to 63 letters, digits, '_', '.' or '-'"`
	RolePrompt string   `json:"rolePrompt" jsonschema:"the system prompt of the role's agents: who they are and how they work"`
	ToolGroups []string `json:"toolGroups,omitempty" jsonschema:"the tool groups the role's agents may use; omitted: every group"`
}

type spawnArgs struct {
	RoleID string `json:"roleId" jsonschema:"the role of the new agent: its name or id"`
}

type spawnTaskArgs struct {
	RoleID    string   `json:"roleId" jsonschema:"the role of the new agent: its name or id"`
	Task      string   `json:"task" jsonschema:"the work the new agent starts with"`
	Artifacts []string `json:"artifacts,omitempty" jsonschema:"ids of artifacts your role stored, handed to the new agent's role: it may read them from then on"`
}

type terminateArgs struct {
	AgentID string `json:"agentId" jsonschema:"the agent to terminate, one you spawned (directly or not)"`
}

type sendArgs struct {
	To      string `json:"to" jsonschema:"the receiving agent's id"`
	Message string `json:"message" jsonschema:"the message's text"`
}

// roleView is a role as org_management's tools show it.
type roleView struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	RolePrompt string   `json:"rolePrompt,omitempty"`
	ToolGroups []string `json:"toolGroups"`
	Source     string   `json:"source"`
}

func viewOf(r store.Role) roleView {
	groups := r.ToolGroups
	if groups == nil {
		groups = []string{}
	}
	return roleView{ID: r.ID, Name: r.Name, RolePrompt: r.Prompt, ToolGroups: groups, Source: string(r.Source)}
}

// Group returns org_management, acting on roles and agents through svc.
func Group(svc Service) *sdk.Group {
	return &sdk.Group{ID: "org_management", Description: "Organisation: find and create roles, spawn and terminate agents, send messages between agents.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("find_role_by_name", "Find a role by its name: its id, prompt and tool groups.",
			func(_ context.Context, r *sdk.Request[findRoleArgs]) (roleView, error) {
				role, err := svc.RoleNamed(r.Args.Name)
				if err != nil {
					names := []string{}
					for _, x := range svc.Roles() {
						names = append(names, x.Name)
					}
					return roleView{}, sdk.Errorf(toolhost.CodeValidation, "no role named %q; the roles are: %s", r.Args.Name, strings.Join(names, ", "))
				}
				return viewOf(role), nil
			}, sdk.Title("Find role"), sdk.ReadOnly()),
		sdk.NewStructuredTool("create_role", "Create a role whose agents use the given tool groups (omitted: every group). Unknown groups are refused.",
			func(ctx context.Context, r *sdk.Request[createRoleArgs]) (roleView, error) {
				by := cmp.Or(r.Call.AgentID, r.Call.Credential, "operator")
				role, err := svc.CreateRole(ctx, host.RoleSpec{Name: r.Args.Name, Prompt: r.Args.RolePrompt, ToolGroups: r.Args.ToolGroups, CreatedBy: by})
				if err != nil {
					return roleView{}, err
				}
				return viewOf(role), nil
			}, sdk.Title("Create role"), sdk.Additive()),
		sdk.NewTool("spawn_agent", "Create an agent of a role; it waits for messages (send_message).",
			func(ctx context.Context, r *sdk.Request[spawnArgs]) (*sdk.Result, error) {
				return spawn(ctx, svc, r.Call, r.Args.RoleID, "", nil)
			}, sdk.Title("Spawn agent"), sdk.Additive()),
		sdk.NewTool("spawn_agent_with_task", "Create an agent of a role and give it a task, and the artifacts it needs; it can report back with send_message.",
			func(ctx context.Context, r *sdk.Request[spawnTaskArgs]) (*sdk.Result, error) {
				if strings.TrimSpace(r.Args.Task) == "" {
					return nil, sdk.Errorf(toolhost.CodeValidation, "field task: must not be empty")
				}
				return spawn(ctx, svc, r.Call, r.Args.RoleID, r.Args.Task, r.Args.Artifacts)
			}, sdk.Title("Spawn agent with task"), sdk.Additive()),
		sdk.NewTool("terminate_agent", "Terminate an agent you spawned (directly or not) and every agent it spawned.",
			func(ctx context.Context, r *sdk.Request[terminateArgs]) (*sdk.Result, error) {
				if err := asAgentOrOperator(r.Call, "terminate_agent"); err != nil {
					return nil, err
				}
				ids, err := svc.Terminate(ctx, r.Call.AgentID, r.Args.AgentID)
				if err != nil {
					return nil, err
				}
				return sdk.JSON(map[string]any{"terminated": ids})
			}, sdk.Title("Terminate agent"), sdk.Destructive()),
		sdk.NewTool("send_message", "Send a message to another agent; it reads it on its next step (an idle agent wakes up).",
			func(ctx context.Context, r *sdk.Request[sendArgs]) (*sdk.Result, error) {
				if r.Args.To == r.Call.AgentID {
					return nil, sdk.Errorf(toolhost.CodeValidation, "field to: an agent cannot send a message to itself")
				}
				if err := asAgentOrOperator(r.Call, "send_message"); err != nil {
					return nil, err
				}
				m, err := svc.Send(ctx, r.Call.AgentID, r.Args.To, r.Args.Message)
				if err != nil {
					return nil, err
				}
				return sdk.JSON(map[string]any{"sent": true, "id": m.ID, "to": m.To})
			}, sdk.Title("Send message"), sdk.Additive()),
	}}
}

// spawn spawns an agent of role with task for the caller cc, handing it
// the artifacts of the caller's role that artifacts names.
func spawn(ctx context.Context, svc Service, cc toolhost.CallContext, role, task string, artifacts []string) (*sdk.Result, error) {
	a, err := svc.Spawn(ctx, cc, role, task, artifacts)
	if err != nil {
		return nil, err
	}
	return sdk.JSON(map[string]any{"agentId": a.ID, "role": a.Role, "status": a.Status})
}

// asAgentOrOperator refuses a call of tool that acts for its caller (as an
// agent, or as the operator when it has none) from a caller that is
// neither: a role's credential (a role token, an access token) calling
// without an agent is not the operator, and must not be recorded as one.
// The operator is a call without an agent of the admin, the CLI or the
// embedding program.
func asAgentOrOperator(cc toolhost.CallContext, tool string) error {
	if cc.AgentID != "" || cc.Credential == "" || cc.Credential == store.CredentialAdmin || cc.Credential == store.CredentialCLI {
		return nil
	}
	return toolhost.Errorf(toolhost.CodePolicy,
		"%s acts for its caller, as an agent or as the operator: %s is not the operator, so call it as an agent of your own (an MCP session or agent key)", tool, cc.Credential)
}
