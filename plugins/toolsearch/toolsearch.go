// Package toolsearch is the tool_search group: find_tools and load_tools
// find and load the tools of the caller's deferred groups. It runs
// in-process, registered by the agent runtime
// ([github.com/toolhost/toolhost/agents]) under its reserved id
// ([host.ToolSearchGroup]); the host offers it to roles with deferred groups
// only.
package toolsearch

import (
	"context"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
)

// Service is what the tool_search group needs: a host's
// [host.Agents] handle serves it.
type Service interface {
	// FindTools ranks the tools of the agent role's deferred groups against
	// query, best first, at most limit of them.
	FindTools(agentID, query string, limit int) ([]host.ToolMatch, error)
	// LoadTools adds the tools named to the agent's loaded tools and
	// returns those newly loaded.
	LoadTools(ctx context.Context, agentID string, names []string) ([]string, error)
}

type findToolsArgs struct {
	Query string `json:"query" jsonschema:"what you need to do, in a few words"`
	Limit int    `json:"limit,omitempty" jsonschema:"how many tools to return (default 5, at most 20)"`
}

type loadToolsArgs struct {
	Names []string `json:"names" jsonschema:"the names of the tools to load, as find_tools gave them"`
}

// FoundTool is one tool find_tools returns.
type FoundTool struct {
	// Name is the tool's name.
	Name string `json:"name"`
	// Group is the id of the tool's group.
	Group string `json:"group"`
	// Description is the first sentence of the tool's description.
	Description string `json:"description" jsonschema:"the first sentence of its description"`
	// Why says which words of the query matched which parts of the tool.
	Why string `json:"why" jsonschema:"which words of your query, or their synonyms, matched which parts of the tool"`
	// Loaded says the caller has loaded the tool already.
	Loaded bool `json:"loaded" jsonschema:"its definition is already among your tools"`
}

// FoundTools is find_tools' result.
type FoundTools struct {
	// Tools are the matches, best first.
	Tools []FoundTool `json:"tools"`
}

// LoadedTools is load_tools' result.
type LoadedTools struct {
	// Loaded names the tools newly loaded.
	Loaded []string `json:"loaded" jsonschema:"the tools newly loaded; they are among your tools from your next step on"`
}

// Group returns the tool_search group, finding and loading tools through
// svc for the calling agent.
func Group(svc Service) *sdk.Group {
	return &sdk.Group{ID: host.ToolSearchGroup, Description: "Tool search: find the tools you may load on demand, and load them.", Tools: []sdk.Tool{
		sdk.NewStructuredTool("find_tools", "Search the tools you can load on demand (they are not among your tools until loaded) by what you need to do; returns the best matches, best first, each with why it matched: choose among them.",
			func(_ context.Context, r *sdk.Request[findToolsArgs]) (FoundTools, error) {
				limit := r.Args.Limit
				switch {
				case limit < 0 || limit > 20:
					return FoundTools{}, sdk.Errorf(toolhost.CodeValidation, "field limit: must be from 1 to 20, not %d", limit)
				case limit == 0:
					limit = 5
				}
				found, err := svc.FindTools(r.Call.AgentID, r.Args.Query, limit)
				if err != nil {
					return FoundTools{}, err
				}
				out := FoundTools{Tools: []FoundTool{}}
				for _, m := range found {
					out.Tools = append(out.Tools, FoundTool{Name: m.Name, Group: m.Group, Description: m.Description, Why: m.Why, Loaded: m.Loaded})
				}
				return out, nil
			}, sdk.Title("Find tools"), sdk.NeedsAgent(), sdk.ReadOnly(), sdk.Idempotent()),
		sdk.NewStructuredTool("load_tools", "Load tools that find_tools found: their definitions are among your tools from your next step on.",
			func(ctx context.Context, r *sdk.Request[loadToolsArgs]) (LoadedTools, error) {
				if len(r.Args.Names) == 0 {
					return LoadedTools{}, sdk.Errorf(toolhost.CodeValidation, "field names: name at least one tool")
				}
				added, err := svc.LoadTools(ctx, r.Call.AgentID, r.Args.Names)
				if added == nil {
					added = []string{}
				}
				return LoadedTools{Loaded: added}, err
			}, sdk.Title("Load tools"), sdk.NeedsAgent(), sdk.Additive(), sdk.Idempotent()),
	}}
}
