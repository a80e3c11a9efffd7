package sdk

import (
	"context"
	"sync"

	"github.com/toolhost/toolhost"
)

// Group is a tool group: an id, a description and its tools. *Group
// implements [toolhost.Provider], so a host can also run it in-process.
type Group struct {
	// ID names the group; it must match ^[a-z][a-z0-9_-]{0,63}$.
	ID string
	// Description says in a sentence what the group is for.
	Description string
	// Version is the module's version, free-form.
	Version string
	// Tools are the group's tools, used when ToolsFor is nil.
	Tools []Tool
	// ToolsFor, when set, chooses the tools per context: the host passes the
	// agent, role and session on [Group.Describe] and on each [Group.Call], so
	// a group may offer different tools to different callers. It replaces
	// Tools.
	ToolsFor func(ctx context.Context, cc CallContext) ([]Tool, error)
	// OnConfigure, when set, receives the plugin block's config {} once,
	// before the first [Group.Describe], with the paths the host keeps to
	// itself ([toolhost.ConfigureRequest.HostPaths]). An error stops the
	// plugin from loading.
	OnConfigure func(ctx context.Context, req *ConfigureRequest) error

	indexOnce sync.Once
	index     map[string]Tool
}

var _ toolhost.Provider = (*Group)(nil)

// tools returns the group's tools for a context.
func (g *Group) tools(ctx context.Context, cc CallContext) ([]Tool, error) {
	if g.ToolsFor != nil {
		return g.ToolsFor(ctx, cc)
	}
	return g.Tools, nil
}

// Describe reports the group and its tools as seen from the request's context.
func (g *Group) Describe(ctx context.Context, req *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	tools, err := g.tools(ctx, req.Context)
	if err != nil {
		return nil, err
	}
	spec := &toolhost.GroupSpec{ID: g.ID, Description: g.Description, Version: g.Version}
	for _, t := range tools {
		if t.err != nil {
			return nil, &toolhost.Error{Code: toolhost.CodeInvalidGroupDef, Message: t.err.Error(), Err: t.err}
		}
		spec.Tools = append(spec.Tools, t.spec)
	}
	return spec, nil
}

// Configure passes the configuration to OnConfigure, if set.
func (g *Group) Configure(ctx context.Context, req *toolhost.ConfigureRequest) error {
	if g.OnConfigure == nil {
		return nil
	}
	return g.OnConfigure(ctx, req)
}

// Call runs one tool. A tool that fails is a [Result] with OK false; the error
// is non-nil only when the group has no such tool.
func (g *Group) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	t, ok, err := g.lookup(ctx, req)
	if err != nil {
		return nil, err
	}
	if !ok || t.run == nil {
		return nil, toolhost.Errorf(toolhost.CodeUnknownTool, "group %s has no tool %q", g.ID, req.Tool)
	}
	return t.call(ctx, req), nil
}

// lookup finds the tool a call names, in the call's context.
func (g *Group) lookup(ctx context.Context, req *toolhost.CallRequest) (Tool, bool, error) {
	if g.ToolsFor == nil {
		g.indexOnce.Do(func() {
			g.index = make(map[string]Tool, len(g.Tools))
			for _, t := range g.Tools {
				g.index[t.spec.Name] = t
			}
		})
		t, ok := g.index[req.Tool]
		return t, ok, nil
	}
	tools, err := g.ToolsFor(ctx, req.Context)
	if err != nil {
		return Tool{}, false, err
	}
	for _, t := range tools {
		if t.spec.Name == req.Tool {
			return t, true, nil
		}
	}
	return Tool{}, false, nil
}
