package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

// scrape reads GET /metrics with the client and parses it with Prometheus's
// text parser.
func scrape(t *testing.T, c *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := c.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// series maps a family's series, written as their labels in order
// ("tool=x,group=y"), to their values: a counter's or gauge's, or a
// histogram's count.
func series(families map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	f := families[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		out[strings.Join(labels, ",")] = v
	}
	return out
}

// metricsServer serves a host with the console group (console_print, taking
// {"text": string}) and the other group (other_print), the role "developer"
// holding console, and an agent of that role.
func metricsServer(t *testing.T, cfg *config.Config) (*httptest.Server, *host.Host, store.Agent) {
	t.Helper()
	srv, h := serve(t, cfg, group("console", "console_print"), group("other", "other_print"))
	ctx := context.Background()
	if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: "developer", ToolGroups: []string{"console"}}); err != nil {
		t.Fatal(err)
	}
	a, err := h.Agents().Create(ctx, "developer", store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	return srv, h, a
}

// TestMetricsCountCalls: after known calls, the scrape holds exactly their
// counts, by tool, group, role and code; tools, roles and agents no one
// registered are counted under _unknown; and no label holds a call id or an
// agent id.
func TestMetricsCountCalls(t *testing.T) {
	srv, h, a := metricsServer(t, &config.Config{})
	ctx := context.Background()
	var ids []string // every call id and agent id, which no label may hold
	call := func(tool, args string, cc toolhost.CallContext, want toolhost.Code) {
		t.Helper()
		cc.CallID = "call-" + tool + "-" + string(want) + "-" + time.Now().Format("150405.000000000")
		ids = append(ids, cc.CallID)
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: json.RawMessage(args), Context: cc})
		code := toolhost.CodeOf(err)
		if err == nil && res.OK {
			code = "ok"
		}
		if code != want {
			t.Fatalf("%s %s: %v %+v, want %s", tool, args, err, res, want)
		}
	}
	dev := toolhost.CallContext{AgentID: a.ID}
	call("console_print", `{"text":"a"}`, dev, "ok")
	call("console_print", `{"text":"b"}`, dev, "ok")
	call("console_print", `{"text":5}`, dev, toolhost.CodeValidation)
	call("other_print", `{"text":"c"}`, dev, toolhost.CodeToolNotAvailable)
	call("no_such_tool", `{}`, dev, toolhost.CodeUnknownTool)
	call("console_print", `{"text":"d"}`, toolhost.CallContext{Role: "ghost"}, toolhost.CodeValidation)
	call("console_print", `{"text":"e"}`, toolhost.CallContext{AgentID: "agent_nobody"}, toolhost.CodeValidation)
	call("other_print", `{"text":"f"}`, toolhost.CallContext{}, "ok") // the operator: no role
	ids = append(ids, a.ID, "agent_nobody")

	// An MCP session of the role: one session, and one more agent.
	cs, _ := connect(t, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp/developer"})
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}

	families := scrape(t, http.DefaultClient, srv.URL)
	for _, c := range []struct {
		name string
		want map[string]float64
	}{
		{"toolhost_tool_calls_total", map[string]float64{
			"code=ok,group=console,role=developer,tool=console_print":         2,
			"code=validation,group=console,role=developer,tool=console_print": 1,
			"code=tool_not_available,group=,role=developer,tool=other_print":  1,
			"code=unknown_tool,group=,role=developer,tool=_unknown":           1,
			"code=validation,group=,role=_unknown,tool=console_print":         2,
			"code=ok,group=other,role=,tool=other_print":                      1,
		}},
		{"toolhost_tool_call_duration_seconds", map[string]float64{"group=console": 3, "group=": 4, "group=other": 1}},
		{"toolhost_tool_calls_in_flight", map[string]float64{"": 0}},
		{"toolhost_approvals_pending", map[string]float64{"": 0}},
		{"toolhost_mcp_sessions", map[string]float64{"role=developer": 1}},
	} {
		if got := series(families, c.name); !equalSeries(got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	agents := series(families, "toolhost_agents")
	if agents["role=developer,status=active"] != 2 || agents["role=developer,status=failed"] != 0 || len(agents) != 5*len(h.Roles().List()) {
		t.Errorf("toolhost_agents = %v", agents)
	}
	for _, name := range []string{"toolhost_event_queue_depth", "toolhost_events_written_total", "toolhost_events_lost_total",
		"go_goroutines", "process_resident_memory_bytes"} {
		if families[name] == nil {
			t.Errorf("no %s", name)
		}
	}
	if lost := series(families, "toolhost_events_lost_total"); lost["reason=write_failed"] != 0 || lost["reason=closed"] != 0 {
		t.Errorf("toolhost_events_lost_total = %v", lost)
	}

	// No label value is a call id or an agent id, the MCP session's agent's
	// included.
	created, err := h.Store().Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ag := range created {
		if ag.ID != "root" { // also the root role's name
			ids = append(ids, ag.ID)
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if slices.Contains(ids, l.GetValue()) {
					t.Errorf("%s has label %s=%q, an id", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// equalSeries reports whether two series maps are equal.
func equalSeries(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestMetricsCredentials: /metrics needs the admin token or a metrics
// token, unless public; a metrics token opens nothing else, and a role
// token does not open /metrics.
func TestMetricsCredentials(t *testing.T) {
	srv, h, _ := metricsServer(t, &config.Config{})
	ctx := context.Background()
	metrics, tok, err := h.Tokens().CreateMetrics(ctx, "prometheus", time.Time{}, "test")
	if err != nil || tok.Scope != store.ScopeMetrics {
		t.Fatalf("CreateMetricsToken = %+v %v", tok, err)
	}
	dev, _, err := h.Store().CreateToken(ctx, "cursor", "developer", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	isMetrics := `token "prometheus" is a metrics token`
	for _, a := range []attack{
		{name: "no token", method: "GET", path: "/metrics", status: 401, code: toolhost.CodePolicy, message: "a bearer token is required"},
		{name: "a wrong token", method: "GET", path: "/metrics", token: "thk_nope", status: 401, code: toolhost.CodePolicy},
		{name: "admin", method: "GET", path: "/metrics", token: testToken, status: 200},
		{name: "the metrics token", method: "GET", path: "/metrics", token: metrics, status: 200},
		{name: "the metrics token, HEAD", method: "HEAD", path: "/metrics", token: metrics, status: 200},
		{name: "a role token", method: "GET", path: "/metrics", token: dev, status: 403, code: toolhost.CodePolicy, message: `token "cursor" is for role developer`},
		{name: "metrics: the roles", method: "GET", path: "/api/roles", token: metrics, status: 403, code: toolhost.CodePolicy, message: isMetrics},
		{name: "metrics: a role's tools", method: "GET", path: "/api/roles/developer/tools", token: metrics, status: 403, code: toolhost.CodePolicy, message: isMetrics},
		{name: "metrics: a call", method: "POST", path: "/api/call", token: metrics, body: `{"tool":"console_print","arguments":{"text":"x"}}`, status: 403, code: toolhost.CodePolicy, message: isMetrics},
		{name: "metrics: an MCP endpoint", method: "POST", path: "/mcp/developer", token: metrics, body: `{}`, status: 403, code: toolhost.CodePolicy, message: isMetrics},
		{name: "metrics: a token for itself", method: "POST", path: "/api/auth/tokens", token: metrics, body: `{"role":"developer"}`, status: 403, code: toolhost.CodePolicy, message: isMetrics},
		{name: "metrics: the events", method: "GET", path: "/api/events", token: metrics, status: 403, code: toolhost.CodePolicy, message: isMetrics},
	} {
		a.send(t, srv)
	}

	// Public: /metrics without a credential, and nothing else.
	pub, _, _ := metricsServer(t, &config.Config{Metrics: config.Metrics{Public: true}})
	for _, a := range []attack{
		{name: "public: no token", method: "GET", path: "/metrics", status: 200},
		{name: "public: the roles still need one", method: "GET", path: "/api/roles", status: 401, code: toolhost.CodePolicy},
		{name: "public: a POST to /metrics", method: "POST", path: "/metrics", body: `{}`, status: 401, code: toolhost.CodePolicy},
	} {
		a.send(t, pub)
	}

	// Without metrics, there is no /metrics.
	h2, err := host.New(withTestToken(&config.Config{}), &host.Options{DisableMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h2.Close() })
	if err := h2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if h2.Metrics() != nil {
		t.Fatal("DisableMetrics: Metrics() is not nil")
	}
	attack{name: "metrics disabled", method: "GET", path: "/metrics", token: testToken, status: 404, code: toolhost.CodeValidation}.send(t, newHTTPServer(t, h2, nil))
}

// TestMetricsTokensAPI: the admin makes a metrics token over HTTP; a role
// with it, or an unknown scope, is refused.
func TestMetricsTokensAPI(t *testing.T) {
	srv, _, _ := metricsServer(t, &config.Config{})
	var made NewToken
	if code := do(t, "POST", srv.URL+"/api/auth/tokens", map[string]string{"scope": "metrics", "name": "prom"}, &made); code != 201 ||
		made.Scope != store.ScopeMetrics || made.Role != "" || !strings.HasPrefix(made.Secret, "thk_") {
		t.Fatalf("create = %d %+v", code, made)
	}
	attack{name: "the new metrics token", method: "GET", path: "/metrics", token: made.Secret, status: 200}.send(t, srv)
	var e apiError
	for _, body := range []map[string]string{
		{"scope": "metrics", "role": "developer"},
		{"scope": "admin"},
	} {
		if code := do(t, "POST", srv.URL+"/api/auth/tokens", body, &e); code != 400 || e.Error.Code != toolhost.CodeValidation {
			t.Errorf("create %v = %d %+v, want 400", body, code, e)
		}
	}
}

// TestMetricsModelTokens: the tokens of an agent's model requests are
// counted by role, prompt and completion adding up to the agent's own count.
func TestMetricsModelTokens(t *testing.T) {
	srv, h, rt := agentServer(t)
	var a struct{ ID string }
	if code := do(t, "POST", srv.URL+"/api/agents", spawnBody{Role: "helper", Task: "sum"}, &a); code != 201 {
		t.Fatalf("spawn = %d", code)
	}
	settle(t, h, rt, a.ID)
	rec, err := h.Store().Agent(context.Background(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := series(scrape(t, http.DefaultClient, srv.URL), "toolhost_model_tokens_total")
	prompt, completion := got["kind=prompt,role=helper"], got["kind=completion,role=helper"]
	if len(got) != 2 || prompt <= 0 || completion <= 0 || prompt+completion != float64(rec.Tokens) {
		t.Fatalf("toolhost_model_tokens_total = %v, want prompt and completion adding up to the agent's %d", got, rec.Tokens)
	}
}
