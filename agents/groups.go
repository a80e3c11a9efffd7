package agents

import (
	"cmp"
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/plugins/artifact"
	"github.com/toolhost/toolhost/plugins/console"
	"github.com/toolhost/toolhost/plugins/contextgroup"
	"github.com/toolhost/toolhost/plugins/toolsearch"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// groups are the built-in groups the runtime provides under reserved ids.
func (rt *Runtime) groups() []*sdk.Group {
	svc := builtins{rt}
	return []*sdk.Group{rt.orgGroup(), artifact.Group(svc), contextgroup.Group(svc), console.Group(svc), toolsearch.Group(rt.h.Agents())}
}

// builtins is the runtime as its built-in groups see it: it implements
// [artifact.Service], [console.Service] and [contextgroup.Service].
type builtins struct{ rt *Runtime }

// Console returns where console_print writes: [Options.Console].
func (b builtins) Console() io.Writer { return b.rt.opts.Console }

// Emit records an event in the host's store.
func (b builtins) Emit(e store.Event) { b.rt.h.Events().Emit(e) }

// RoleNamed finds a role by its name.
func (b builtins) RoleNamed(name string) (store.Role, error) { return b.rt.h.Roles().Get(name) }

// Role finds a role by its name or id.
func (b builtins) Role(nameOrID string) (store.Role, error) { return b.rt.role(nameOrID) }

// Put keeps an artifact in the host's storage.
func (b builtins) Put(ctx context.Context, a store.Artifact, data []byte) (store.Artifact, error) {
	return b.rt.h.Artifacts().Put(ctx, a, data)
}

// Artifact returns the index entry of an artifact the role reader may read.
func (b builtins) Artifact(ctx context.Context, id, reader string) (store.Artifact, error) {
	return b.rt.st.Artifact(ctx, id, reader)
}

// Data returns the bytes of an artifact the role reader may read, from
// the database or the artifact directory, wherever the config keeps them.
func (b builtins) Data(ctx context.Context, id, reader string) ([]byte, error) {
	if b.rt.h.Config().Store.Artifacts == "database" {
		return b.rt.st.ArtifactData(ctx, id, reader)
	}
	return os.ReadFile(b.rt.h.Artifacts().Path(id))
}

// Evicted returns when a quota evicted an artifact the role reader could
// read.
func (b builtins) Evicted(ctx context.Context, id, reader string) (time.Time, error) {
	return b.rt.st.Evicted(ctx, id, reader)
}

// Share lets roles read artifacts of the role owner.
func (b builtins) Share(ctx context.Context, owner string, ids, roles []string) error {
	return b.rt.st.ShareArtifacts(ctx, owner, ids, roles)
}

// Workspace returns the runtime block's workspace.
func (b builtins) Workspace() string { return b.rt.cfg.Workspace }

// DataDir returns the host's data directory.
func (b builtins) DataDir() string { return b.rt.h.Store().Dir() }

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

// orgGroup is org_management: roles, agents and messages.
func (rt *Runtime) orgGroup() *sdk.Group {
	return &sdk.Group{ID: "org_management", Description: "Organisation: find and create roles, spawn and terminate agents, send messages between agents.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("find_role_by_name", "Find a role by its name: its id, prompt and tool groups.",
			func(_ context.Context, r *sdk.Request[findRoleArgs]) (roleView, error) {
				role, err := rt.h.Roles().Get(r.Args.Name)
				if err != nil {
					names := []string{}
					for _, x := range rt.h.Roles().List() {
						names = append(names, x.Name)
					}
					return roleView{}, sdk.Errorf(toolhost.CodeValidation, "no role named %q; the roles are: %s", r.Args.Name, strings.Join(names, ", "))
				}
				return viewOf(role), nil
			}, sdk.Title("Find role"), sdk.ReadOnly()),
		sdk.NewStructuredTool("create_role", "Create a role whose agents use the given tool groups (omitted: every group). Unknown groups are refused.",
			func(ctx context.Context, r *sdk.Request[createRoleArgs]) (roleView, error) {
				by := cmp.Or(r.Call.AgentID, r.Call.Credential, "operator")
				role, err := rt.h.Roles().Create(ctx, host.RoleSpec{Name: r.Args.Name, Prompt: r.Args.RolePrompt, ToolGroups: r.Args.ToolGroups, CreatedBy: by})
				if err != nil {
					return roleView{}, err
				}
				return viewOf(role), nil
			}, sdk.Title("Create role"), sdk.Additive()),
		sdk.NewTool("spawn_agent", "Create an agent of a role; it waits for messages (send_message).",
			func(ctx context.Context, r *sdk.Request[spawnArgs]) (*sdk.Result, error) {
				return rt.spawnTool(ctx, r.Call, r.Args.RoleID, "", nil)
			}, sdk.Title("Spawn agent"), sdk.Additive()),
		sdk.NewTool("spawn_agent_with_task", "Create an agent of a role and give it a task, and the artifacts it needs; it can report back with send_message.",
			func(ctx context.Context, r *sdk.Request[spawnTaskArgs]) (*sdk.Result, error) {
				if strings.TrimSpace(r.Args.Task) == "" {
					return nil, sdk.Errorf(toolhost.CodeValidation, "field task: must not be empty")
				}
				return rt.spawnTool(ctx, r.Call, r.Args.RoleID, r.Args.Task, r.Args.Artifacts)
			}, sdk.Title("Spawn agent with task"), sdk.Additive()),
		sdk.NewTool("terminate_agent", "Terminate an agent you spawned (directly or not) and every agent it spawned.",
			func(ctx context.Context, r *sdk.Request[terminateArgs]) (*sdk.Result, error) {
				if err := asAgentOrOperator(r.Call, "terminate_agent"); err != nil {
					return nil, err
				}
				if err := rt.mayTerminate(ctx, r.Call.AgentID, r.Args.AgentID); err != nil {
					return nil, err
				}
				reason := "terminated by the operator"
				if r.Call.AgentID != "" {
					reason = "terminated by agent " + r.Call.AgentID
				}
				ids, err := rt.Terminate(ctx, r.Args.AgentID, reason)
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
				m, err := rt.Send(ctx, r.Call.AgentID, r.Args.To, r.Args.Message)
				if err != nil {
					return nil, err
				}
				return sdk.JSON(map[string]any{"sent": true, "id": m.ID, "to": m.To})
			}, sdk.Title("Send message"), sdk.Additive()),
	}}
}

// spawnTool spawns an agent of role with task, handing it the artifacts
// of the caller's role that artifacts names.
func (rt *Runtime) spawnTool(ctx context.Context, cc toolhost.CallContext, role, task string, artifacts []string) (*sdk.Result, error) {
	if len(artifacts) > 0 {
		r, err := rt.role(role)
		if err != nil {
			return nil, err
		}
		if task, err = artifact.HandOver(ctx, builtins{rt}, cc, r, task, artifacts); err != nil {
			return nil, err
		}
	}
	a, err := rt.Spawn(ctx, SpawnRequest{Role: role, Task: task, ParentID: cc.AgentID, CallID: cc.CallID, Credential: cc.Credential})
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

// mayTerminate allows an operator (no agent) to terminate any agent, and an
// agent only those it spawned, directly or not.
func (rt *Runtime) mayTerminate(ctx context.Context, by, target string) error {
	all, err := rt.st.Agents(ctx)
	if err != nil {
		return toolhost.Errorf(toolhost.CodeInternal, "runtime: %w", err)
	}
	under := subtree(all, target)
	switch {
	case len(under) == 0:
		return noAgent(target)
	case by == "":
		return nil
	case target == by:
		return toolhost.Errorf(toolhost.CodePolicy, "an agent cannot terminate itself: give a final answer instead")
	}
	if !slices.Contains(subtree(all, by), target) {
		return toolhost.Errorf(toolhost.CodePolicy, "agent %s did not spawn agent %s (directly or not), so it may not terminate it", by, target)
	}
	return nil
}
