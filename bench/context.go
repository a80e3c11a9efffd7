package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/toolhost/toolhost/agents"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/tokencount"
	"github.com/toolhost/toolhost/store"
)

// contextResult is what the first model request of an agent costs, in
// tokens (o200k_base), on the real catalog: the first-party modules and
// npm's reference MCP servers filesystem (fs), memory and everything.
type contextResult struct {
	Groups []string     // the catalog's groups, the roles'
	Rows   []contextRow // every tool; the role eager; the role deferring every group
}

// contextRow is one way of sending the catalog.
type contextRow struct {
	Name          string
	Tools         int // definitions sent
	ToolTokens    int // their tokens, as JSON
	PromptTokens  int // the role's prompt (Roles().Prompt)
	LoadableTools int // tools left to find_tools and load_tools
}

// total is the first request's tokens: prompt and tool definitions.
func (r contextRow) total() int { return r.ToolTokens + r.PromptTokens }

// measureContext starts a host with the catalog and the agent runtime, and
// counts the first request of an agent of a role holding every catalog
// group: with every tool of the host, with the role's tools eager, and with
// every group of the role deferred (tool_search's two tools alone).
func measureContext(ctx context.Context, root, tmp string) (*contextResult, error) {
	ws, err := os.MkdirTemp(tmp, "catalog-")
	if err != nil {
		return nil, err
	}
	servers, err := mcptest.ReferenceServers(ws, filepath.Join(ws, "memory.json"))
	if err != nil {
		return nil, fmt.Errorf("%w; run scripts/test once", err)
	}
	body := fmt.Sprintf(`plugin_dir = %q
builtin "workspace" {}
builtin "command" {}
builtin "network" {}
plugin "chrome" {
  path = "chrome"
}
%s`, filepath.Join(root, "bin/plugins"), servers)
	h, err := startHost(ctx, tmp, body, nil)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	rt := agents.New(h, &agents.Options{Console: io.Discard})
	if err := rt.Start(ctx); err != nil {
		return nil, err
	}
	defer rt.Close()
	res := &contextResult{Groups: []string{"workspace", "command", "network", "chrome", "fs", "memory", "everything"}}
	for _, p := range h.Modules().List() {
		if p.State != host.StateRunning {
			return nil, fmt.Errorf("catalog: %s is %s: %s", p.Name, p.State, p.LastError)
		}
	}
	eager, err := contextOf(ctx, h, "catalog", res.Groups, nil)
	if err != nil {
		return nil, err
	}
	deferred, err := contextOf(ctx, h, "catalog-deferred", res.Groups, res.Groups)
	if err != nil {
		return nil, err
	}
	all, err := h.Tools(host.ToolQuery{Role: "catalog", Tokens: true})
	if err != nil {
		return nil, err
	}
	res.Rows = []contextRow{
		{Name: "every tool of the host", Tools: all.AllTools, ToolTokens: all.AllTokens, PromptTokens: eager.PromptTokens},
		eager, deferred,
	}
	return res, nil
}

// contextOf creates a role with the groups, deferring those given, and an
// agent of it, and counts what its first request carries.
func contextOf(ctx context.Context, h *host.Host, role string, groups, deferred []string) (contextRow, error) {
	if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: role, ToolGroups: groups, DeferredGroups: deferred}); err != nil {
		return contextRow{}, err
	}
	a, err := h.Agents().Create(ctx, role, store.Agent{})
	if err != nil {
		return contextRow{}, err
	}
	list, err := h.Tools(host.ToolQuery{Agent: a.ID})
	if err != nil {
		return contextRow{}, err
	}
	prompt, err := h.Roles().Prompt(role)
	if err != nil {
		return contextRow{}, err
	}
	name := "the role, every group eager"
	if len(deferred) > 0 {
		name = "the role, every group deferred (tool_search only)"
	}
	row := contextRow{Name: name, Tools: len(list.Tools), ToolTokens: tokencount.JSON(list.Tools), LoadableTools: len(list.Deferred)}
	row.PromptTokens, _ = tokencount.Count(prompt)
	return row, nil
}
