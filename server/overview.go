package server

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

// overviewWindows are the windows GET /api/overview counts, each with the
// width of its buckets: the last hour by minute, the last day by ten
// minutes.
var overviewWindows = map[string]struct{ span, bucket time.Duration }{
	"1h":  {time.Hour, time.Minute},
	"24h": {24 * time.Hour, 10 * time.Minute},
}

// overviewTop is how many tools the overview ranks as slowest and as most
// failing.
const overviewTop = 5

// overviewTimeout bounds the work of one GET /api/overview in the database.
const overviewTimeout = 15 * time.Second

// Overview is the answer of GET /api/overview: what an operator looks at
// first.
type Overview struct {
	// Window is the window asked for (1h or 24h), BucketSeconds the width of
	// Calls' buckets.
	Window        string `json:"window"`
	BucketSeconds int    `json:"bucketSeconds"`
	// Calls are the calls that ended in the window, counted in the store.
	Calls store.CallStats `json:"calls"`
	// Slowest are the tools of Calls with the highest p95 latency, and
	// Failing those with the most failed calls, at most overviewTop each.
	Slowest []store.ToolCalls `json:"slowest"`
	Failing []store.ToolCalls `json:"failing"`
	// Approvals are the calls waiting for an approver now.
	Approvals OverviewApprovals `json:"approvals"`
	// Modules are the configured modules, and those not running now.
	Modules OverviewModules `json:"modules"`
	// Storage is what the storage quotas count, against them.
	Storage host.StorageUsage `json:"storage"`
}

// OverviewApprovals are the calls waiting for a decision, on every host
// sharing the store.
type OverviewApprovals struct {
	// Waiting is how many calls wait.
	Waiting int `json:"waiting"`
	// Oldest is when the longest waiting call asked; none when none waits.
	Oldest time.Time `json:"oldest,omitzero"`
}

// OverviewModules count the configured modules (plugin, builtin and
// mcp_server blocks) and list those not running: starting, restarting,
// failed or stopped.
type OverviewModules struct {
	// Total is how many are configured, Running how many run, Down the
	// others with their state, restarts and last error.
	Total   int                 `json:"total"`
	Running int                 `json:"running"`
	Down    []host.PluginStatus `json:"down"`
}

func (s *Server) routesOverview() {
	s.mux.HandleFunc("GET /api/overview", s.overview)
}

// overview answers GET /api/overview?window=1h|24h (default 1h): the calls
// of the window by bucket, outcome, role and tool, counted in the store,
// and the state the host keeps now.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k, v := range q {
		if k != "window" || len(v) > 1 {
			writeError(w, http.StatusBadRequest, toolhost.Errorf(toolhost.CodeValidation, "%s: the overview takes one parameter, window, once", k))
			return
		}
	}
	name := "1h"
	if q.Has("window") {
		name = q.Get("window")
	}
	win, ok := overviewWindows[name]
	if !ok {
		writeError(w, http.StatusBadRequest, toolhost.Errorf(toolhost.CodeValidation, "window: %q: want 1h or 24h", name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), overviewTimeout)
	defer cancel()
	end := time.Now().UTC().Truncate(win.bucket).Add(win.bucket)
	calls, err := s.h.Store().CallStats(ctx, store.CallStatsQuery{Since: end.Add(-win.span), Until: end, Bucket: win.bucket})
	if err != nil {
		writeError(w, statusOf(err), toolhost.Errorf(toolhost.CodeInternal, "overview: %w", err))
		return
	}
	out := Overview{Window: name, BucketSeconds: int(win.bucket / time.Second), Calls: calls,
		Slowest: topTools(calls.Tools, func(t store.ToolCalls) float64 { return t.P95 }),
		Failing: topTools(calls.Tools, func(t store.ToolCalls) float64 { return float64(t.Outcomes.Failed) }),
		Modules: OverviewModules{Down: []host.PluginStatus{}}}
	if q := s.h.Approvals(); q != nil {
		pending := q.Pending()
		out.Approvals.Waiting = len(pending)
		if len(pending) > 0 {
			out.Approvals.Oldest = pending[0].Requested
		}
	}
	for _, m := range s.h.Modules().List() {
		out.Modules.Total++
		if m.State == host.StateRunning {
			out.Modules.Running++
		} else {
			out.Modules.Down = append(out.Modules.Down, m)
		}
	}
	if out.Storage, err = s.h.Artifacts().Usage(ctx); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// topTools returns the overviewTop tools with the highest positive key,
// highest first.
func topTools(tools []store.ToolCalls, key func(store.ToolCalls) float64) []store.ToolCalls {
	out := []store.ToolCalls{}
	for _, t := range tools {
		if key(t) > 0 {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b store.ToolCalls) int { return cmp.Compare(key(b), key(a)) })
	return out[:min(len(out), overviewTop)]
}
