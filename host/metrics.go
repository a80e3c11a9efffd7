package host

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/store"
)

// Metrics are a host's Prometheus metrics, on a registry of the host's own
// (never the global default one, so that a program embedding several hosts
// can serve each): the calls through the pipeline, counted as they end, and
// the state of plugins, approvals, events and agents, read from the host at
// each scrape. The Go runtime and process collectors are registered too.
// Labels are bounded: tool, group, role and plugin names and codes, never a
// call id or an agent id. docs/operating.md lists every metric.
//
// Serve its [Metrics.Registry] with
// [github.com/prometheus/client_golang/prometheus/promhttp.HandlerFor], as
// `toolhost serve` does at GET /metrics. The methods are safe on a nil *Metrics (a host with
// [Options.DisableMetrics]), where they do nothing.
type Metrics struct {
	h   *Host
	reg *prometheus.Registry

	calls    *prometheus.CounterVec   // tool, group, role, code
	latency  *prometheus.HistogramVec // group
	tokens   *prometheus.CounterVec   // role, kind
	inflight atomic.Int64

	// series holds the calls' label children already resolved, so that a
	// call costs a map lookup, not a WithLabelValues (a hash, a lock and an
	// allocation). The map is never changed once stored: adding a series
	// copies it, under mu.
	series atomic.Pointer[map[seriesKey]callSeries]
	mu     sync.Mutex
}

// seriesKey is the labels of a call's series.
type seriesKey struct {
	tool, group, role string
	code              toolhost.Code
}

// callSeries is a call's counter and its group's histogram.
type callSeries struct {
	calls   prometheus.Counter
	latency prometheus.Observer
}

// maxCachedSeries bounds the resolved series kept; past it, a call resolves
// its series each time.
const maxCachedSeries = 1 << 14

// Label values standing for what cannot be a label: a tool no group
// provides, or a role that does not exist, named by a caller.
const unknownLabel = "_unknown"

// codeOK is the code label of a call whose result is ok.
const codeOK toolhost.Code = "ok"

// callBuckets are the bounds of the call latency histogram, in seconds:
// from a no-op call (~100 µs) to the longest timeouts.
var callBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

func newMetrics(h *Host) *Metrics {
	m := &Metrics{h: h, reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolhost_tool_calls_total",
			Help: "Tool calls through the pipeline, by tool, group (\"\" when the call reached none), caller's role (\"\" for none) and outcome: ok or the error code."},
			[]string{"tool", "group", "role", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "toolhost_tool_call_duration_seconds",
			Help: "Time from a tool call's start to its outcome, by group.", Buckets: callBuckets}, []string{"group"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolhost_model_tokens_total",
			Help: "Tokens of the model requests the agent runtime made, by the agent's role and kind: prompt (sent to the model) or completion."},
			[]string{"role", "kind"}),
	}
	empty := map[seriesKey]callSeries{}
	m.series.Store(&empty)
	m.reg.MustRegister(m.calls, m.latency, m.tokens,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "toolhost_tool_calls_in_flight", Help: "Tool calls in the pipeline now."},
			func() float64 { return float64(m.inflight.Load()) }),
		stateCollector{h}, storageCollector{h}, retentionCollector{h},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Metrics returns the host's metrics; nil when [Options.DisableMetrics] is set.
func (h *Host) Metrics() *Metrics { return h.metrics }

// Registry returns the registry holding the host's metrics. Register a
// collector of your own on it to serve it beside them.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ModelTokens counts the tokens of one model request made for an agent of
// role: prompt tokens (sent to the model) and completion tokens.
func (m *Metrics) ModelTokens(role string, prompt, completion int) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues(role, "prompt").Add(float64(prompt))
	m.tokens.WithLabelValues(role, "completion").Add(float64(completion))
}

// callStarted counts a call entering the pipeline.
func (m *Metrics) callStarted() {
	if m != nil {
		m.inflight.Add(1)
	}
}

// callEnded counts a call's outcome and its latency, and that it left the
// pipeline.
func (m *Metrics) callEnded(c *call) {
	if m == nil {
		return
	}
	m.inflight.Add(-1)
	s := m.seriesOf(m.labels(c))
	s.calls.Inc()
	s.latency.Observe(time.Since(c.start).Seconds())
}

// labels are a call's labels. A call outside its caller's view reached no
// group, and keeps the tool and role it names only when they exist: an
// unknown tool, role or agent (whose role stays "") is unknownLabel.
func (m *Metrics) labels(c *call) seriesKey {
	k := seriesKey{tool: c.req.Tool, role: c.req.Context.Role, code: outcomeCode(c)}
	if c.found {
		k.group = c.tool.group.Spec.ID
		return k
	}
	if _, ok := m.h.mgr.GroupOf(k.tool); !ok {
		k.tool = unknownLabel
	}
	if r, _ := m.h.dir.role(k.role); k.role != "" && r == nil || k.role == "" && c.req.Context.AgentID != "" {
		k.role = unknownLabel
	}
	return k
}

// outcomeCode is a call's code label: ok, or its error's code. A code that
// is not one of toolhost.Codes (a module may send any string) counts as
// tool_exec in a result and internal in an error.
func outcomeCode(c *call) toolhost.Code {
	var code, other toolhost.Code = "", toolhost.CodeInternal
	switch {
	case c.err != nil:
		code = toolhost.CodeOf(c.err) // not before: it allocates
	case c.res.OK:
		return codeOK
	case c.res.Error != nil:
		code, other = c.res.Error.Code, toolhost.CodeToolExec
	default:
		return toolhost.CodeToolExec
	}
	if !slices.Contains(toolhost.Codes(), code) {
		return other
	}
	return code
}

// seriesOf returns the series of the labels, resolving it on first use.
func (m *Metrics) seriesOf(k seriesKey) callSeries {
	if s, ok := (*m.series.Load())[k]; ok {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.series.Load()
	if s, ok := old[k]; ok {
		return s
	}
	s := callSeries{calls: m.calls.WithLabelValues(k.tool, k.group, k.role, string(k.code)), latency: m.latency.WithLabelValues(k.group)}
	if len(old) < maxCachedSeries {
		next := make(map[seriesKey]callSeries, len(old)+1)
		maps.Copy(next, old)
		next[k] = s
		m.series.Store(&next)
	}
	return s
}

// The metrics read from the host's state at each scrape.
var (
	pluginStateDesc = prometheus.NewDesc("toolhost_plugin_state",
		"1 for the state each configured module (plugin, builtin, mcp_server block) is in, 0 for the others.", []string{"plugin", "state"}, nil)
	pluginRestartsDesc = prometheus.NewDesc("toolhost_plugin_restarts_total",
		"Restarts of each configured module since the host started.", []string{"plugin"}, nil)
	approvalsPendingDesc = prometheus.NewDesc("toolhost_approvals_pending",
		"Calls on this host waiting for an approval decision (the executor's approval queue; absent with another approver).", nil, nil)
	eventQueueDesc = prometheus.NewDesc("toolhost_event_queue_depth",
		"Events emitted and not yet written to the store.", nil, nil)
	eventsWrittenDesc = prometheus.NewDesc("toolhost_events_written_total",
		"Events written to the store.", nil, nil)
	eventsLostDesc = prometheus.NewDesc("toolhost_events_lost_total",
		"Events not written, by reason: write_failed (every attempt failed), queue_full (the queue was full while the store could not write) or closed (emitted after the writer closed).", []string{"reason"}, nil)
	storeDownDesc = prometheus.NewDesc("toolhost_store_down",
		"1 while the store cannot write events, for the reason: disk_full (its disk is full) or unavailable (its database cannot be reached); 0 for the other.", []string{"reason"}, nil)
	agentsDesc = prometheus.NewDesc("toolhost_agents",
		"Agents in the store, by role and status.", []string{"role", "status"}, nil)
)

// pluginStates and agentStatuses are every value of the state and status
// labels: each series is present, 0 when nothing is in that state.
var (
	pluginStates  = []State{StateStarting, StateRunning, StateRestarting, StateFailed, StateStopped}
	agentStatuses = []string{store.StatusActive, store.StatusRunning, store.StatusWaiting, store.StatusFailed, store.StatusTerminated}
)

// stateCollector reads the metrics whose truth is the host's state when
// Prometheus scrapes, rather than tracking every change.
type stateCollector struct{ h *Host }

// Describe implements prometheus.Collector.
func (stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pluginStateDesc, pluginRestartsDesc, approvalsPendingDesc, eventQueueDesc, eventsWrittenDesc, eventsLostDesc, storeDownDesc, agentsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.h
	for _, p := range h.Modules().List() {
		for _, s := range pluginStates {
			ch <- prometheus.MustNewConstMetric(pluginStateDesc, prometheus.GaugeValue, oneIf(p.State == s), p.Name, string(s))
		}
		ch <- prometheus.MustNewConstMetric(pluginRestartsDesc, prometheus.CounterValue, float64(p.Restarts), p.Name)
	}
	if h.queue != nil {
		ch <- prometheus.MustNewConstMetric(approvalsPendingDesc, prometheus.GaugeValue, float64(h.queue.numWaiting()))
	}
	ch <- prometheus.MustNewConstMetric(eventQueueDesc, prometheus.GaugeValue, float64(h.events.Queued()))
	ch <- prometheus.MustNewConstMetric(eventsWrittenDesc, prometheus.CounterValue, float64(h.events.Written()))
	failed, overflowed := h.events.Lost()
	ch <- prometheus.MustNewConstMetric(eventsLostDesc, prometheus.CounterValue, float64(failed), "write_failed")
	ch <- prometheus.MustNewConstMetric(eventsLostDesc, prometheus.CounterValue, float64(overflowed), "queue_full")
	ch <- prometheus.MustNewConstMetric(eventsLostDesc, prometheus.CounterValue, float64(h.events.Dropped()), "closed")
	down := h.events.Down()
	full := errors.Is(down, store.ErrDiskFull)
	ch <- prometheus.MustNewConstMetric(storeDownDesc, prometheus.GaugeValue, oneIf(full), "disk_full")
	ch <- prometheus.MustNewConstMetric(storeDownDesc, prometheus.GaugeValue, oneIf(down != nil && !full), "unavailable")
	for role, n := range h.agentCounts() {
		for i, status := range agentStatuses {
			ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(n[i]), role, status)
		}
	}
}

// agentCounts counts the agents of each role (every role, none left out) by
// status, in agentStatuses' order.
func (h *Host) agentCounts() map[string][]int {
	h.dir.mu.RLock()
	defer h.dir.mu.RUnlock()
	out := make(map[string][]int, len(h.dir.roles))
	for name := range h.dir.roles {
		out[name] = make([]int, len(agentStatuses))
	}
	for _, a := range h.dir.agents {
		if r := h.dir.byID[a.RoleID]; r != nil && out[r.Name] != nil {
			if i := slices.Index(agentStatuses, a.Status); i >= 0 {
				out[r.Name][i]++
			}
		}
	}
	return out
}

func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
