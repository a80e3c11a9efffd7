package main

import (
	"context"
	"fmt"
	"time"

	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// toolsForResult holds the Host.Tools timings, in ns per call.
type toolsForResult struct {
	Groups, ToolsPerGroup int
	Cached                float64         // a 5-group role, from the cache
	Invalidated           map[int]float64 // role size in groups → the first call after a role update
	MapLookup             float64         // baseline: one lookup in a map of every tool name
}

// NoArgs is the input of the in-process tools.
type NoArgs struct{}

// measureToolsFor registers 100 in-process groups of 20 tools and times
// Host.Tools for an agent whose role has 5 groups: from the cache, and right
// after the role is updated (which invalidates its view), also for roles of
// 1 and 50 groups to show the cost follows the role's tools.
func measureToolsFor(ctx context.Context, tmp string, loops, updates int) (*toolsForResult, error) {
	res := &toolsForResult{Groups: 100, ToolsPerGroup: 20, Invalidated: map[int]float64{}}
	h, err := startHost(ctx, tmp, "", nil)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	names := map[string]*sdk.Tool{}
	noop := func(context.Context, *sdk.Request[NoArgs]) (*sdk.Result, error) { return sdk.Text("ok"), nil }
	var ids []string
	for i := range res.Groups {
		g := &sdk.Group{ID: fmt.Sprintf("g%d", i), Description: "A benchmark group."}
		for j := range res.ToolsPerGroup {
			t := sdk.NewTool(fmt.Sprintf("g%d_t%d", i, j), "A benchmark tool.", noop)
			g.Tools = append(g.Tools, t)
			names[t.Spec().Name] = &t
		}
		if err := h.Modules().Register(ctx, g); err != nil {
			return nil, err
		}
		ids = append(ids, g.ID)
	}
	for _, size := range []int{1, 5, 50} {
		var groups []string
		for k := range size {
			groups = append(groups, ids[k*res.Groups/size])
		}
		role := fmt.Sprintf("r%d", size)
		if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: role, ToolGroups: groups}); err != nil {
			return nil, err
		}
		agent, err := h.Agents().Create(ctx, role, store.Agent{})
		if err != nil {
			return nil, err
		}
		want := size * res.ToolsPerGroup
		list := func() error {
			list, err := h.Tools(host.ToolQuery{Agent: agent.ID})
			if err == nil && len(list.Tools) != want {
				err = fmt.Errorf("Tools: %d tools, want %d", len(list.Tools), want)
			}
			return err
		}
		var total time.Duration
		for i := range updates {
			desc := fmt.Sprintf("update %d", i)
			if _, err := h.Roles().Update(ctx, role, host.RoleUpdate{Description: &desc}); err != nil {
				return nil, err
			}
			t := time.Now()
			if err := list(); err != nil {
				return nil, err
			}
			total += time.Since(t)
		}
		res.Invalidated[size] = float64(total.Nanoseconds()) / float64(updates)
		if size != 5 {
			continue
		}
		t := time.Now()
		for range loops {
			if err := list(); err != nil {
				return nil, err
			}
		}
		res.Cached = float64(time.Since(t).Nanoseconds()) / float64(loops)
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	hits := 0
	t := time.Now()
	for i := range loops {
		if names[keys[i%len(keys)]] != nil {
			hits++
		}
	}
	res.MapLookup = float64(time.Since(t).Nanoseconds()) / float64(loops)
	if hits != loops {
		return nil, fmt.Errorf("map lookup baseline: %d hits of %d", hits, loops)
	}
	logf("  Host.Tools cached %.0f ns, after invalidation %.0f ns (5 groups), map lookup %.1f ns",
		res.Cached, res.Invalidated[5], res.MapLookup)
	return res, nil
}
