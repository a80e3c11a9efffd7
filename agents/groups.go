package agents

import (
	"context"
	"io"
	"os"
	"slices"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/plugins/artifact"
	"github.com/toolhost/toolhost/plugins/codemode"
	"github.com/toolhost/toolhost/plugins/console"
	"github.com/toolhost/toolhost/plugins/contextgroup"
	"github.com/toolhost/toolhost/plugins/org"
	"github.com/toolhost/toolhost/plugins/toolsearch"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// groups are the built-in groups the runtime provides under reserved ids.
func (rt *Runtime) groups() []*sdk.Group {
	svc := builtins{rt}
	return []*sdk.Group{org.Group(svc), artifact.Group(svc), contextgroup.Group(svc), console.Group(svc), toolsearch.Group(rt.h.Agents()), codemode.Group(svc)}
}

// builtins is the runtime as its built-in groups see it: it implements
// [org.Service], [artifact.Service], [contextgroup.Service] (in
// context.go), [console.Service] and [codemode.Service].
type builtins struct{ rt *Runtime }

// RoleNamed finds a role by its name.
func (b builtins) RoleNamed(name string) (store.Role, error) { return b.rt.h.Roles().Get(name) }

// Roles lists the host's roles.
func (b builtins) Roles() []store.Role { return b.rt.h.Roles().List() }

// CreateRole creates a role on the host.
func (b builtins) CreateRole(ctx context.Context, spec host.RoleSpec) (store.Role, error) {
	return b.rt.h.Roles().Create(ctx, spec)
}

// Spawn spawns an agent of role with task as the caller by's child, of
// by's credential, handing it the artifacts of by's role that artifacts
// names.
func (b builtins) Spawn(ctx context.Context, by toolhost.CallContext, role, task string, artifacts []string) (org.Spawned, error) {
	rt := b.rt
	if len(artifacts) > 0 {
		r, err := rt.role(role)
		if err != nil {
			return org.Spawned{}, err
		}
		if task, err = artifact.HandOver(ctx, b, by, r, task, artifacts); err != nil {
			return org.Spawned{}, err
		}
	}
	a, err := rt.Spawn(ctx, SpawnRequest{Role: role, Task: task, ParentID: by.AgentID, CallID: by.CallID, Credential: by.Credential})
	if err != nil {
		return org.Spawned{}, err
	}
	return org.Spawned{ID: a.ID, Role: a.Role, Status: a.Status}, nil
}

// Terminate terminates the agent target and its descendants for the agent
// by, if [Runtime.mayTerminate] allows it.
func (b builtins) Terminate(ctx context.Context, by, target string) ([]string, error) {
	if err := b.rt.mayTerminate(ctx, by, target); err != nil {
		return nil, err
	}
	reason := "terminated by the operator"
	if by != "" {
		reason = "terminated by agent " + by
	}
	return b.rt.Terminate(ctx, target, reason)
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

// Send sends a message between agents: [Runtime.Send].
func (b builtins) Send(ctx context.Context, from, to, body string) (store.Mail, error) {
	return b.rt.Send(ctx, from, to, body)
}

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

// Console returns where console_print writes: [Options.Console].
func (b builtins) Console() io.Writer { return b.rt.opts.Console }

// Tools lists the tools an agent or a role may call: [host.Host.Tools].
func (b builtins) Tools(q host.ToolQuery) (host.ToolList, error) { return b.rt.h.Tools(q) }

// Call runs a call through the host's pipeline: [host.Host.Call].
func (b builtins) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	return b.rt.h.Call(ctx, req)
}

// CodeBounds returns the bounds of the role's scripts: its code block's
// over the config's over the defaults.
func (b builtins) CodeBounds(role string) rules.CodeBounds {
	bounds := b.rt.h.Config().Code.Over(rules.DefaultCodeBounds())
	if r, err := b.rt.h.Roles().Get(role); err == nil {
		bounds = r.Code.Over(bounds)
	}
	return bounds
}

// Emit records an event in the host's store.
func (b builtins) Emit(e store.Event) { b.rt.h.Events().Emit(e) }
