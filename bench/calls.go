package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/rpcplugin"
	"github.com/toolhost/toolhost/server"
	"github.com/toolhost/toolhost/store"
)

// The call paths, in the order the report lists them.
const (
	pathRaw      = "raw gRPC Call"
	pathHost     = "Host.Call"
	pathAPI      = "POST /api/call"
	pathMCPHTTP  = "MCP HTTP (ours)"
	pathMCPStdio = "MCP stdio (go-sdk)"
	pathHostMCP  = "Host.Call → mcp_server"
)

// callPath is one way of calling the no-op tool.
type callPath struct {
	name string
	call func(context.Context) error
}

// callRig holds everything the call paths need: an in-process host running
// the no-op plugin, its HTTP server on a loopback port, a second no-op
// plugin process called over raw gRPC, the go-sdk stdio server, and a second
// in-process host running another process of that server as an mcp_server
// block.
type callRig struct {
	paths   []callPath
	h       *host.Host   // the host of Host.Call and of the HTTP paths
	hosts   []*host.Host // every host started, whose events are flushed between turns
	closers []func()
	// Pids of the processes involved, for the RSS table.
	noopPid, rawPid int
}

// Close stops everything the rig started, last started first.
func (r *callRig) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// newCallRig starts the paths, or only the raw gRPC and Host.Call ones when
// hostOnly is set. noop and mcpnoop are the built executables.
func newCallRig(ctx context.Context, tmp, noop, mcpnoop string, hostOnly bool) (_ *callRig, err error) {
	r := &callRig{}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()

	// Raw gRPC: a plugin process of its own, called with no host in between.
	proc, err := rpcplugin.Launch(rpcplugin.Options{Path: noop})
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, proc.Stop)
	r.rawPid = proc.Pid
	if err := proc.Provider.Configure(ctx, &toolhost.ConfigureRequest{Config: []byte("{}")}); err != nil {
		return nil, err
	}
	rawReq := &toolhost.CallRequest{Tool: "noop", Arguments: []byte("{}")}
	r.add(pathRaw, func(ctx context.Context) error {
		res, err := proc.Provider.Call(ctx, rawReq)
		return checkResult(res, err)
	})

	// Host.Call: an in-process host with the no-op plugin, as an agent of a
	// role holding its group.
	h, err := startHost(ctx, tmp, fmt.Sprintf("plugin \"noop\" {\n  path = %q\n}\n", noop), nil)
	if err != nil {
		return nil, err
	}
	r.h = h
	r.hosts = append(r.hosts, h)
	r.closers = append(r.closers, func() { _ = h.Close() })
	agent, err := benchAgent(ctx, h, "noop")
	if err != nil {
		return nil, err
	}
	for _, g := range h.Groups() {
		if g.ID == "noop" {
			r.noopPid = g.Source.Pid
		}
	}
	r.add(pathHost, func(ctx context.Context) error {
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "noop", Arguments: []byte("{}"),
			Context: toolhost.CallContext{AgentID: agent.ID, Channel: "bench"}})
		return checkResult(res, err)
	})
	if hostOnly {
		return r, nil
	}

	// The HTTP server, in this process, on a loopback port.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	handler, err := server.New(h, nil)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	r.closers = append(r.closers, func() { _ = srv.Close() })
	base := "http://" + lis.Addr().String()
	// Both HTTP paths carry the role's token, as an MCP client would: its
	// lookup in the store is part of what they measure.
	token, _, err := h.Store().CreateToken(ctx, "bench", "bench", time.Time{})
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: bearer{token: token, base: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}}
	body, _ := json.Marshal(server.CallBody{Role: "bench", Tool: "noop", Arguments: []byte("{}")})
	r.add(pathAPI, func(ctx context.Context) error { return postCall(ctx, client, base+"/api/call", body) })

	// Our MCP front: one streamable HTTP session shared by the callers.
	httpSess, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp/bench", HTTPClient: client}, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp http: %w", err)
	}
	r.closers = append(r.closers, func() { _ = httpSess.Close() })
	r.add(pathMCPHTTP, mcpCall(httpSess))

	// The baseline MCP server: go-sdk over stdio, one session.
	cmd := exec.Command(mcpnoop)
	cmd.Stderr = os.Stderr
	stdioSess, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp stdio: %w", err)
	}
	r.closers = append(r.closers, func() { _ = stdioSess.Close() })
	r.add(pathMCPStdio, mcpCall(stdioSess))

	// Host.Call → mcp_server: a second in-process host, whose only module is
	// an mcp_server block running the same mcpnoop binary as a process of its
	// own (unconfined, as the baseline's), called through the whole pipeline.
	// A host of its own, because in the first one the plugin's "noop" would
	// shadow the server's. The server's tool keeps its name: "noop" already
	// matches the host's tool-name rule, and the block sets no tool_prefix.
	mh, err := startHost(ctx, tmp, fmt.Sprintf("mcp_server \"mcpnoop\" {\n  command = %q\n}\n", mcpnoop), nil)
	if err != nil {
		return nil, fmt.Errorf("mcp_server host: %w", err)
	}
	r.hosts = append(r.hosts, mh)
	r.closers = append(r.closers, func() { _ = mh.Close() })
	mcpAgent, err := benchAgent(ctx, mh, "mcpnoop")
	if err != nil {
		return nil, fmt.Errorf("mcp_server host: %w", err)
	}
	// Say so plainly if the name the agent sees is not "noop" after all.
	tools, err := mh.ToolsFor(mcpAgent.ID)
	if err != nil {
		return nil, fmt.Errorf("mcp_server host: %w", err)
	}
	if len(tools) != 1 || tools[0].Function.Name != "noop" {
		return nil, fmt.Errorf("mcp_server host: the agent sees %+v, want the one tool noop", tools)
	}
	r.add(pathHostMCP, func(ctx context.Context) error {
		res, err := mh.Call(ctx, &toolhost.CallRequest{Tool: "noop", Arguments: []byte("{}"),
			Context: toolhost.CallContext{AgentID: mcpAgent.ID, Channel: "bench"}})
		return checkResult(res, err)
	})
	return r, nil
}

// benchAgent creates, on h, the role "bench" holding the group and an agent
// bound to it.
func benchAgent(ctx context.Context, h *host.Host, group string) (store.Agent, error) {
	if _, err := h.CreateRole(ctx, host.RoleSpec{Name: "bench", ToolGroups: []string{group}}); err != nil {
		return store.Agent{}, err
	}
	return h.CreateAgent(ctx, "bench", store.Agent{})
}

// bearer sends a token on every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func (r *callRig) add(name string, call func(context.Context) error) {
	r.paths = append(r.paths, callPath{name: name, call: call})
}

// startHost starts an in-process host for a config made of body, with its
// data in a fresh directory under tmp.
func startHost(ctx context.Context, tmp, body string, opts *host.Options) (*host.Host, error) {
	dir, err := os.MkdirTemp(tmp, "host-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "config.hcl")
	src := fmt.Sprintf("data_dir = %q\n%s", filepath.Join(dir, "data"), body)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		return nil, err
	}
	cfg, err := config.Load(file)
	if err != nil {
		return nil, err
	}
	h, err := host.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := h.Start(ctx); err != nil {
		_ = h.Close()
		return nil, err
	}
	return h, nil
}

// checkResult turns a failed no-op call into an error.
func checkResult(res *toolhost.Result, err error) error {
	if err == nil && (res == nil || !res.OK) {
		err = fmt.Errorf("noop failed: %+v", res)
	}
	return err
}

// postCall makes one POST /api/call and checks the envelope says ok.
func postCall(ctx context.Context, c *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var res toolhost.Result
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &res) != nil || !res.OK {
		return fmt.Errorf("POST /api/call: %s: %s", resp.Status, data)
	}
	return nil
}

// mcpCall returns a path calling the no-op tool over an MCP session.
func mcpCall(s *mcp.ClientSession) func(context.Context) error {
	return func(ctx context.Context) error {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{}})
		if err == nil && res.IsError {
			err = errors.New("noop failed over MCP")
		}
		return err
	}
}

// callPlan says how many calls each path makes at each concurrency, split
// into rounds in which the paths take turns, so that each sees the same
// machine.
type callPlan struct {
	Concs  []int
	Calls  func(conc int) int
	Rounds int
	Warmup int
}

// runCalls runs the plan and returns the series, per concurrency in plan
// order, per path in rig order. Between two runs it waits, untimed, until
// the host's events are written, so one path's backlog does not slow the
// next.
func runCalls(ctx context.Context, r *callRig, plan callPlan, logf func(string, ...any)) ([][]*Series, error) {
	for _, p := range r.paths {
		if _, _, err := runRound(ctx, p.call, 8, plan.Warmup); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", p.name, err)
		}
	}
	var out [][]*Series
	for _, conc := range plan.Concs {
		row := make([]*Series, len(r.paths))
		for i, p := range r.paths {
			row[i] = &Series{Path: p.name, Conc: conc}
		}
		n := plan.Calls(conc) / plan.Rounds
		for round := range plan.Rounds {
			for k := range r.paths {
				i := (k + round) % len(r.paths) // a different order each round
				lat, wall, err := runRound(ctx, r.paths[i].call, conc, n)
				if err != nil {
					return nil, fmt.Errorf("%s at c=%d: %w", r.paths[i].name, conc, err)
				}
				s := row[i]
				s.Lat, s.Calls, s.Wall = append(s.Lat, lat...), s.Calls+len(lat), s.Wall+wall
				for _, h := range r.hosts {
					if err := h.FlushEvents(ctx); err != nil {
						return nil, err
					}
				}
			}
		}
		for _, s := range row {
			s.Finish()
			logf("  c=%-2d %-22s p50 %-9s p99 %-9s %8.0f calls/s", conc, s.Path, fmtDur(s.P(0.5)), fmtDur(s.P(0.99)), s.Rate())
		}
		out = append(out, row)
	}
	return out, nil
}
