package host

import (
	"cmp"
	"context"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/store"
)

// eventRetention is the type of the event a retention pass records, with
// what it did in its payload: exported, deleted, files, partitions,
// before, and error when it failed.
const eventRetention = "events.retention"

// retentionStats are the figures of the host's retention passes, for
// /metrics.
type retentionStats struct {
	exported, deleted atomic.Int64
	agentsRemoved     atomic.Int64 // by forgetAgents
	lastPass          atomic.Int64 // unix nanoseconds of the last pass's end; 0: none yet
	bytes             atomic.Int64 // the events' bytes, measured at the last pass
}

// retainLoop runs a retention pass at once, then every
// Options.RetentionInterval, until ctx ends.
func (h *Host) retainLoop(ctx context.Context) {
	t := time.NewTicker(h.opts.RetentionInterval)
	defer t.Stop()
	for {
		_, _ = h.Events().Retain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Retain runs a retention pass now, as the host does at start and
// every [Options.RetentionInterval]: it prepares the events table for the
// coming days ([store.Store.MaintainEvents]), then, with audit { retention }
// set, exports and deletes the events older than the retention
// ([store.Store.PruneEvents]), and measures the bytes the events take. The
// pass is logged, counted in /metrics and, unless another host ran it,
// recorded as an events.retention event.
func (es Events) Retain(ctx context.Context) (store.RetentionResult, error) {
	h := es.h
	start := time.Now()
	var res store.RetentionResult
	err := h.store.MaintainEvents(ctx, start)
	keep := h.cfg.Audit.Retention
	if err == nil && keep > 0 {
		before := start.Add(-keep)
		dir := h.cfg.Audit.Export
		if dir == "" {
			dir = filepath.Join(h.store.Dir(), config.DefaultExportDir)
		}
		res, err = h.store.PruneEvents(ctx, store.Retention{Before: before, ExportDir: dir})
		h.retention.exported.Add(res.Exported)
		h.retention.deleted.Add(res.Deleted)
		if !res.Skipped {
			payload := map[string]any{"exported": res.Exported, "deleted": res.Deleted, "partitions": res.Partitions,
				"before": before.UTC().Format(time.RFC3339), "files": baseNames(res.Files)}
			if err != nil {
				payload["error"] = err.Error()
			}
			h.events.Emit(store.Event{Type: eventRetention, Payload: payload})
		}
	}
	bytes, berr := h.store.EventBytes(ctx)
	if berr == nil {
		h.retention.bytes.Store(bytes)
	}
	h.retention.lastPass.Store(time.Now().UnixNano())
	if ctx.Err() != nil {
		return res, ctx.Err() // the host is closing
	}
	if err != nil {
		h.log.Error("retention pass", "error", err, "exported", res.Exported, "deleted", res.Deleted)
		return res, err
	}
	h.log.Info("retention pass", "retention", keep, "exported", res.Exported, "deleted", res.Deleted,
		"partitions", res.Partitions, "skipped", res.Skipped, "event_bytes", bytes, "took", time.Since(start).Round(time.Millisecond))
	return res, berr
}

// forgetLoop removes the agents that ended longer ago than the store
// block's agent_retention, at once and then every
// Options.RetentionInterval, or every agent_retention when that is
// shorter, until ctx ends.
func (h *Host) forgetLoop(ctx context.Context) {
	keep := cmp.Or(h.cfg.Store.AgentRetention, config.DefaultAgentRetention)
	t := time.NewTicker(min(h.opts.RetentionInterval, keep))
	defer t.Stop()
	for {
		h.forgetAgents(ctx, keep)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// forgetAgents removes from the store, and from the directory, the agents
// that have been final (failed or terminated) for keep
// ([store.Store.RemoveEndedAgents]); their events stay.
func (h *Host) forgetAgents(ctx context.Context, keep time.Duration) {
	ids, err := h.store.RemoveEndedAgents(ctx, time.Now().Add(-keep))
	h.dir.dropAgents(ids)
	h.retention.agentsRemoved.Add(int64(len(ids)))
	switch {
	case err != nil && ctx.Err() == nil:
		h.log.Error("removing ended agents", "error", err, "removed", len(ids))
	case len(ids) > 0:
		h.log.Info("ended agents removed", "removed", len(ids), "agent_retention", keep)
	}
}

// baseNames returns the file names of paths.
func baseNames(paths []string) []any {
	out := make([]any, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

var (
	eventsExportedDesc = prometheus.NewDesc("toolhost_events_exported_total",
		"Audit events this host's retention passes exported before deleting them.", nil, nil)
	eventsDeletedDesc = prometheus.NewDesc("toolhost_events_deleted_total",
		"Audit events this host's retention passes deleted (rows on SQLite, the rows of dropped partitions on PostgreSQL).", nil, nil)
	retentionLastPassDesc = prometheus.NewDesc("toolhost_events_retention_last_pass_timestamp_seconds",
		"When this host's last retention pass ended, in Unix time; 0 before the first.", nil, nil)
	agentsRemovedDesc = prometheus.NewDesc("toolhost_agents_removed_total",
		"Agents this host removed from the store once they had ended longer ago than store { agent_retention }.", nil, nil)
)

// retentionCollector reads the figures of the host's retention passes.
type retentionCollector struct{ h *Host }

// Describe implements prometheus.Collector.
func (retentionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{eventsExportedDesc, eventsDeletedDesc, retentionLastPassDesc, agentsRemovedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c retentionCollector) Collect(ch chan<- prometheus.Metric) {
	r := &c.h.retention
	ch <- prometheus.MustNewConstMetric(eventsExportedDesc, prometheus.CounterValue, float64(r.exported.Load()))
	ch <- prometheus.MustNewConstMetric(eventsDeletedDesc, prometheus.CounterValue, float64(r.deleted.Load()))
	ch <- prometheus.MustNewConstMetric(retentionLastPassDesc, prometheus.GaugeValue, float64(r.lastPass.Load())/1e9)
	ch <- prometheus.MustNewConstMetric(agentsRemovedDesc, prometheus.CounterValue, float64(r.agentsRemoved.Load()))
}
