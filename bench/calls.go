package main

import (
	"bufio"
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
	"runtime/trace"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
	"github.com/toolhost/toolhost/internal/protocol"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/server"
	"github.com/toolhost/toolhost/store"
)

// The call paths, in the order the report lists them.
const (
	pathRaw        = "raw gRPC Call"
	pathHost       = "Host.Call"
	pathHostPG     = "Host.Call (PostgreSQL)"
	pathHostPG2    = "Host.Call, 2 hosts (PostgreSQL)"
	pathHostBare   = "Host.Call, metrics off"
	pathHostStrict = "Host.Call, audit strict"
	pathHostTraced = "Host.Call, traced"
	pathHostRules  = "Host.Call, 10 rules"
	// Host.Call as a credential under a call limit it never reaches, and
	// through a rule that sends every call for an approval the approver
	// gives at once: what a limit and the approval path cost.
	pathHostLimited  = "Host.Call, a call limit"
	pathHostApproved = "Host.Call, approved"
	pathAPI          = "POST /api/call"
	pathHostMCP      = "Host.Call → mcp_server"

	// Our MCP front and its baseline, a go-sdk server, on each transport in
	// each protocol era (mcpPairs).
	pathOursHTTP25  = "MCP HTTP 2025 (ours)"
	pathSDKHTTP25   = "MCP HTTP 2025 (go-sdk)"
	pathOursHTTP26  = "MCP HTTP 2026 (ours)"
	pathSDKHTTP26   = "MCP HTTP 2026 (go-sdk)"
	pathOursStdio25 = "MCP stdio 2025 (ours)"
	pathSDKStdio25  = "MCP stdio 2025 (go-sdk)"
	pathOursStdio26 = "MCP stdio 2026 (ours)"
	pathSDKStdio26  = "MCP stdio 2026 (go-sdk)"
	// Our front again, the no-op group in its own process as the go-sdk
	// server's tool is (bench/mcpfront): the front alone.
	pathFrontHTTP25  = "MCP HTTP 2025 (ours, in-process)"
	pathFrontHTTP26  = "MCP HTTP 2026 (ours, in-process)"
	pathFrontStdio25 = "MCP stdio 2025 (ours, in-process)"
	pathFrontStdio26 = "MCP stdio 2026 (ours, in-process)"

	// Against peer gateways (peers.go): npm's server-everything behind our
	// MCP front and behind the floor, a gateway of the go-sdk alone, in
	// each client era (gatewayEras); behind each peer, and alone, in the
	// 2025 era only (peerCallee).
	pathPeerOurs25   = "/mcp/bench → everything (2025)"
	pathFloor25      = "go-sdk gateway → everything (2025)"
	pathPeerOurs26   = "/mcp/bench → everything (2026)"
	pathFloor26      = "go-sdk gateway → everything (2026)"
	pathSupergateway = "supergateway → everything (2025)"
	pathMCPProxy     = "mcp-proxy → everything (2025)"
	pathEverything   = "everything over stdio (2025)"
)

// callPaths are all the call paths, in the report's order.
var callPaths = []string{pathRaw, pathHost, pathHostPG, pathHostPG2, pathHostBare, pathHostStrict, pathHostTraced, pathHostRules,
	pathHostLimited, pathHostApproved, pathAPI,
	pathOursHTTP25, pathSDKHTTP25, pathFrontHTTP25, pathOursHTTP26, pathSDKHTTP26, pathFrontHTTP26,
	pathOursStdio25, pathSDKStdio25, pathFrontStdio25, pathOursStdio26, pathSDKStdio26, pathFrontStdio26, pathHostMCP, pathRR1, pathRR2,
	pathPeerOurs25, pathFloor25, pathPeerOurs26, pathFloor26, pathSupergateway, pathMCPProxy, pathEverything}

// mcpPair is our MCP front on one transport in one era, twice: with the
// no-op plugin, and with the no-op group in its own process; and its
// baseline, a go-sdk server answering the no-op tool itself. The report
// holds each of ours against the baseline.
type mcpPair struct {
	ours, sdk, front string // our front, the go-sdk server, our front in-process
	http             bool   // streamable HTTP, else stdio
	// version is the era's protocol version, the bench's client pinned to
	// it: the newest of the sessions (initialize, a session;
	// mcpversion.Legacy) or the first without (server/discover,
	// sessionless requests; mcpversion.Stateless).
	version string
}

// mcpPairs are the MCP paths, in the report's order.
var mcpPairs = []mcpPair{
	{pathOursHTTP25, pathSDKHTTP25, pathFrontHTTP25, true, mcpversion.Legacy},
	{pathOursHTTP26, pathSDKHTTP26, pathFrontHTTP26, true, mcpversion.Stateless},
	{pathOursStdio25, pathSDKStdio25, pathFrontStdio25, false, mcpversion.Legacy},
	{pathOursStdio26, pathSDKStdio26, pathFrontStdio26, false, mcpversion.Stateless},
}

// mcpServer is which server of a pair a path calls.
type mcpServer int

const (
	serverOurs   mcpServer = iota // our front: toolhost
	serverSDK                     // mcpnoop
	serverInProc                  // our front, in-process: mcpfront
)

// path is the path of the pair's server s.
func (p mcpPair) path(s mcpServer) string {
	return [...]string{p.ours, p.sdk, p.front}[s]
}

// isMCP2025 reports whether a call path is an MCP path of the 2025 era.
func isMCP2025(path string) bool {
	return slices.ContainsFunc(mcpPairs, func(p mcpPair) bool {
		return p.version == mcpversion.Legacy && (path == p.ours || path == p.sdk || path == p.front)
	})
}

// isMCPFront reports whether a call path is our front in-process.
func isMCPFront(path string) bool {
	return slices.ContainsFunc(mcpPairs, func(p mcpPair) bool { return path == p.front })
}

// wantsMCP reports whether want accepts, of any pair on the transport (http
// or stdio), the path of server s.
func wantsMCP(want func(string) bool, http bool, s mcpServer) bool {
	return slices.ContainsFunc(mcpPairs, func(p mcpPair) bool { return p.http == http && want(p.path(s)) })
}

// callPath is one way of calling the no-op tool (or, for the peer paths,
// server-everything's echo).
type callPath struct {
	name string
	call func(context.Context) error
}

// executables are the programs the call paths start.
type executables struct {
	root       string // the repository root, whose bin/toolhost serves
	noop       string // bench/noop
	mcpnoop    string // bench/mcpnoop
	mcpfront   string // bench/mcpfront
	sdkgateway string // bench/sdkgateway
	toolhost   string // bin/toolhost
}

// callRig holds everything the call paths need: an in-process host running
// the no-op plugin, its HTTP server on a loopback port, a second no-op
// plugin process called over raw gRPC, `toolhost mcp` over stdio with a host
// of its own for each MCP era, the go-sdk servers (stdio, one for each era,
// and streamable HTTP, serving both), and a second
// in-process host running another process of the go-sdk stdio server as an
// mcp_server block; and the hosts of the variants of Host.Call (on
// PostgreSQL, two on one PostgreSQL database, metrics off, audit strict,
// traced), the traced one exporting to an OTLP sink; `toolhost serve`
// hosts on PostgreSQL behind a round-robin proxy (roundrobin.go); and the
// peer paths (peers.go).
type callRig struct {
	paths   []callPath
	hosts   []*host.Host // every in-process host started, whose events (and spans) are flushed between turns
	sink    *otlpSink    // the traced path's collector, nil when it does not run
	peers   string       // the npm packages and Node.js of the peer paths, "" when none runs
	spreads []spread     // how the round-robin paths' work spread over their hosts, recorded as the rig closes
	closers []func()
	traced  bool // an execution trace is on (-trace): each call is a region
	rrRun   int  // requests in a row the round-robin proxy sends to one host (-rr-run)
}

// call returns path i's call, in a region of the execution trace named
// after the path when one is on.
func (r *callRig) call(i int) func(context.Context) error {
	p := r.paths[i]
	if !r.traced {
		return p.call
	}
	return func(ctx context.Context) (err error) {
		trace.WithRegion(ctx, p.name, func() { err = p.call(ctx) })
		return err
	}
}

// Close stops everything the rig started, last started first.
func (r *callRig) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// newCallRig starts the paths whose names want accepts (all of them with a
// nil want), in the report's order; the PostgreSQL ones only when pg is not
// nil, each on a fresh database of pg; the round-robin proxy sends rrRun
// requests in a row to each host.
func newCallRig(ctx context.Context, tmp string, exe executables, pg *pgCluster, want func(path string) bool, rrRun int) (_ *callRig, err error) {
	if want == nil {
		want = func(string) bool { return true }
	}
	if pg == nil {
		accepts := want
		want = func(path string) bool { return !isPGPath(path) && accepts(path) }
	}
	r := &callRig{rrRun: rrRun}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()

	// Raw gRPC: a plugin process of its own, called with no host in between.
	if want(pathRaw) {
		proc, err := protocol.Launch(protocol.Options{Path: exe.noop})
		if err != nil {
			return nil, err
		}
		r.closers = append(r.closers, proc.Stop)
		if err := proc.Provider.Configure(ctx, &toolhost.ConfigureRequest{Config: []byte("{}")}); err != nil {
			return nil, err
		}
		rawReq := &toolhost.CallRequest{Tool: "noop", Arguments: []byte("{}")}
		r.add(pathRaw, func(ctx context.Context) error {
			res, err := proc.Provider.Call(ctx, rawReq)
			return checkResult(res, err)
		})
	}

	// Host.Call: an in-process host with the no-op plugin, as an agent of a
	// role holding its group; POST /api/call serves the same host. The plugin
	// runs unconfined, as the raw gRPC baseline's does: the ratio is the
	// host's pipeline, not the sandbox around the plugin.
	noopPlugin := fmt.Sprintf("plugin \"noop\" {\n  path = %q\n  sandbox = \"off\"\n}\n", exe.noop)
	var served *host.Host
	if want(pathHost) || want(pathAPI) || want(pathHostRules) || want(pathHostLimited) || want(pathHostApproved) {
		// Its approver approves at once, for Host.Call, approved; no
		// other path asks it.
		h, agent, err := r.startHost(ctx, tmp, noopPlugin, &host.Options{Approver: host.AlwaysApprove{}}, "noop", "")
		if err != nil {
			return nil, err
		}
		if want(pathHost) {
			if h.TracerProvider() != nil {
				return nil, fmt.Errorf("%s: tracing is on (an OTEL_* variable?), but this path is the host without it", pathHost)
			}
			r.add(pathHost, hostCall(h, agent.ID))
		}
		// Host.Call, 10 rules: the same host and plugin process, as an
		// agent of a role of its own with the same group and ten rules on
		// the tool that do not match its calls, so that every one is
		// evaluated: the two paths differ by the role's rules alone.
		if want(pathHostRules) {
			if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: "bench-rules", ToolGroups: []string{"noop"}, Rules: benchRules}); err != nil {
				return nil, fmt.Errorf("%s: %w", pathHostRules, err)
			}
			ruled, err := h.Agents().Create(ctx, "bench-rules", store.Agent{})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pathHostRules, err)
			}
			r.add(pathHostRules, hostCall(h, ruled.ID))
		}
		for _, v := range []struct {
			path string
			spec host.RoleSpec
		}{
			{pathHostLimited, host.RoleSpec{Name: "bench-limited", ToolGroups: []string{"noop"}, Limits: []rules.Limit{{Target: "noop", Calls: 1 << 30, Per: time.Hour}}}},
			{pathHostApproved, host.RoleSpec{Name: "bench-approved", ToolGroups: []string{"noop"}, Rules: []rules.Rule{{Name: "ask", Tools: []string{"noop"}, Action: rules.Approve, Reason: "bench"}}}},
		} {
			if !want(v.path) {
				continue
			}
			const cred = "token/bench/1"
			if _, err := h.Roles().Create(ctx, v.spec); err != nil {
				return nil, fmt.Errorf("%s: %w", v.path, err)
			}
			a, err := h.Agents().Create(ctx, v.spec.Name, store.Agent{Credential: cred})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.path, err)
			}
			r.add(v.path, hostCallAs(h, a.ID, cred))
		}
		served = h
	}

	// Host.Call (PostgreSQL): the same as Host.Call, on a host of its own
	// (its own no-op plugin process and data directory) whose store is a
	// fresh PostgreSQL database, as a `store { driver = "postgres" }` block
	// makes it.
	if want(pathHostPG) {
		dsn, err := pg.createDB(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pathHostPG, err)
		}
		h, agent, err := r.startHost(ctx, tmp, noopPlugin, nil, "noop", dsn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pathHostPG, err)
		}
		r.add(pathHostPG, hostCall(h, agent.ID))
	}
	// Host.Call, 2 hosts (PostgreSQL): two such hosts, each with its own
	// no-op plugin process and data directory, on one fresh database; the
	// role made through the first, an agent on each. The callers are split
	// between them by number (even ones call the first, odd ones the
	// second), as a load balancer pinning each client to a host would.
	if want(pathHostPG2) {
		dsn, err := pg.createDB(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pathHostPG2, err)
		}
		var calls []func(context.Context) error
		for range 2 {
			h, agent, err := r.startHost(ctx, tmp, noopPlugin, nil, "noop", dsn)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pathHostPG2, err)
			}
			calls = append(calls, hostCall(h, agent.ID))
		}
		r.add(pathHostPG2, byCaller(calls...))
	}

	// Host.Call, metrics off: the same, on a host of its own (and its own
	// no-op plugin process) without metrics, to measure what they cost.
	if want(pathHostBare) {
		h, agent, err := r.startHost(ctx, tmp, noopPlugin, &host.Options{DisableMetrics: true}, "noop", "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pathHostBare, err)
		}
		r.add(pathHostBare, hostCall(h, agent.ID))
	}
	// Host.Call, audit strict: a host of its own whose calls are dispatched
	// only once their started event is committed.
	if want(pathHostStrict) {
		h, agent, err := r.startHost(ctx, tmp, "audit {\n  mode = \"strict\"\n}\n"+noopPlugin, nil, "noop", "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pathHostStrict, err)
		}
		r.add(pathHostStrict, hostCall(h, agent.ID))
	}
	// Host.Call, traced: a host of its own with a telemetry block, every call
	// sampled and its spans exported in batches over OTLP/HTTP to a sink in
	// this process (stopped after the host, which flushes to it on Close).
	// The block pins what the OTEL_* variables could otherwise change.
	if want(pathHostTraced) {
		r.sink = newOTLPSink()
		r.closers = append(r.closers, r.sink.Close)
		telemetry := fmt.Sprintf("telemetry {\n  traces       = \"otlp\"\n  endpoint     = %q\n  protocol     = \"http/protobuf\"\n  sample_ratio = 1\n}\n", r.sink.srv.URL)
		h, agent, err := r.startHost(ctx, tmp, telemetry+noopPlugin, nil, "noop", "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pathHostTraced, err)
		}
		if h.TracerProvider() == nil {
			return nil, fmt.Errorf("%s: tracing is off (OTEL_SDK_DISABLED?)", pathHostTraced)
		}
		r.add(pathHostTraced, hostCall(h, agent.ID))
	}
	if want(pathAPI) {
		if err := r.addAPI(ctx, served); err != nil {
			return nil, err
		}
	}

	// Our MCP front and the go-sdk servers, pair by pair.
	if err := r.addMCPPairs(ctx, tmp, exe, want); err != nil {
		return nil, err
	}

	// Host.Call → mcp_server: a second in-process host, whose only module is
	// an mcp_server block running the same mcpnoop binary as a process of its
	// own (unconfined, as the baseline's), called through the whole pipeline.
	// A host of its own, because in the first one the plugin's "noop" would
	// shadow the server's. The server's tool keeps its name: "noop" already
	// matches the host's tool-name rule, and the block sets no tool_prefix.
	if want(pathHostMCP) {
		mh, mcpAgent, err := r.startHost(ctx, tmp, mcpServerBlock("mcpnoop", exe.mcpnoop), nil, "mcpnoop", "")
		if err != nil {
			return nil, fmt.Errorf("mcp_server host: %w", err)
		}
		// Say so plainly if the name the agent sees is not "noop" after all.
		list, err := mh.Tools(host.ToolQuery{Agent: mcpAgent.ID})
		if err != nil {
			return nil, fmt.Errorf("mcp_server host: %w", err)
		}
		if tools := list.Tools; len(tools) != 1 || tools[0].Function.Name != "noop" {
			return nil, fmt.Errorf("mcp_server host: the agent sees %+v, want the one tool noop", tools)
		}
		// Its baseline is the go-sdk stdio server in the era the module
		// speaks to it: the stateless one, which mcpnoop offers.
		mods := mh.Modules().List()
		if i := slices.IndexFunc(mods, func(st host.PluginStatus) bool { return st.Name == "mcpnoop" }); i < 0 || mods[i].Protocol != mcpversion.Stateless {
			return nil, fmt.Errorf("mcp_server host: want the module mcpnoop speaking protocol version %s, have %+v", mcpversion.Stateless, mods)
		}
		r.add(pathHostMCP, hostCall(mh, mcpAgent.ID))
	}

	// Sessionless MCP clients behind a round-robin proxy over one and two
	// `toolhost serve` hosts sharing a PostgreSQL database.
	if err := r.addBalanced(ctx, tmp, exe, pg, want); err != nil {
		return nil, err
	}

	// Against peer gateways: npm's server-everything behind our MCP front,
	// the go-sdk gateway, supergateway and mcp-proxy, and called directly
	// over stdio.
	if slices.ContainsFunc(peerPaths, want) {
		if err := r.startPeers(ctx, tmp, exe, want); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// mcpServerBlock is an mcp_server block named name running command
// unconfined (sandbox = "off"), as the baselines' processes run.
func mcpServerBlock(name, command string) string {
	return fmt.Sprintf("mcp_server %q {\n  command = %q\n  sandbox = \"off\"\n}\n", name, command)
}

// startHost starts an in-process host for a config made of body (see
// startHost), closed with the rig and its events waited for between turns,
// with an agent of the role "bench" holding the group. Its store is SQLite
// in its data directory when dsn is "", else the PostgreSQL database dsn
// names (a store block added to body); it checks that it is.
func (r *callRig) startHost(ctx context.Context, tmp, body string, opts *host.Options, group, dsn string) (*host.Host, store.Agent, error) {
	engine := store.DriverSQLite
	if dsn != "" {
		engine = store.DriverPostgres
		body = pgStoreBlock(dsn) + body
	}
	h, err := startHost(ctx, tmp, body, opts)
	if err != nil {
		return nil, store.Agent{}, err
	}
	r.hosts = append(r.hosts, h)
	r.closers = append(r.closers, func() { _ = h.Close() })
	if got := h.Store().Engine(); got != engine {
		return nil, store.Agent{}, fmt.Errorf("the host's store is %s, want %s (TOOLHOST_STORE_DSN?)", got, engine)
	}
	agent, err := benchAgent(ctx, h, group)
	return h, agent, err
}

// pgStoreBlock is a store block putting a host on the PostgreSQL database
// dsn names.
func pgStoreBlock(dsn string) string {
	return fmt.Sprintf("store {\n  driver = \"postgres\"\n  dsn    = %q\n}\n", dsn)
}

// addAPI serves h (see serve) and adds POST /api/call through it.
func (r *callRig) addAPI(ctx context.Context, h *host.Host) error {
	base, client, err := r.serve(ctx, h)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(server.CallBody{Role: "bench", Tool: "noop", Arguments: []byte("{}")})
	r.add(pathAPI, func(ctx context.Context) error { return postCall(ctx, client, base+"/api/call", body) })
	return nil
}

// startFront starts `toolhost serve` on the config file, as a process of
// its own as the go-sdk servers are, and returns the endpoint of /mcp/bench
// and an HTTP client carrying a token of the role "bench", made through
// the server's API.
func (r *callRig) startFront(ctx context.Context, exe executables, tmp, file string) (string, *http.Client, error) {
	s, err := r.startServe(exe, tmp, file)
	if err != nil {
		return "", nil, err
	}
	token, err := s.roleToken(ctx, "bench")
	if err != nil {
		return "", nil, err
	}
	return s.base + "/mcp/bench", benchHTTPClient(token), nil
}

// startServe starts `toolhost serve` on the config file (see the function
// startServe), stopped with the rig.
func (r *callRig) startServe(exe executables, tmp, file string) (*serveProc, error) {
	s, err := startServe(exe.root, tmp, file)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, s.stop)
	return s, nil
}

// frontConfig is the config body of our front over HTTP and stdio: the
// no-op plugin unconfined, as the baselines' processes run, and the role
// "bench" holding its group.
func frontConfig(noop string) string {
	return fmt.Sprintf("plugin \"noop\" {\n  path = %q\n  sandbox = \"off\"\n}\nrole \"bench\" {\n  tool_groups = [\"noop\"]\n}\n", noop)
}

// addMCPPairs adds the MCP paths want accepts, in mcpPairs' order, each
// path one session (or, in the stateless era, one client) pinned to its era's
// version and shared by the callers. Over streamable HTTP, three processes
// each serving both eras: `toolhost serve` with the no-op plugin and the
// role "bench" (our front at /mcp/bench), `mcpnoop -http` and `mcpfront
// -http`. Over stdio, a process for each path: `toolhost mcp -role bench`
// with a host of its own (its own data directory and no-op plugin process),
// mcpnoop, and mcpfront. Each toolhost and mcpfront has a data directory of
// its own.
func (r *callRig) addMCPPairs(ctx context.Context, tmp string, exe executables, want func(string) bool) error {
	oursConfig := frontConfig(exe.noop)
	var endpoints [3]string // over HTTP, by server
	var clients [3]*http.Client
	var err error
	if wantsMCP(want, true, serverOurs) {
		file, err := writeConfig(tmp, oursConfig)
		if err != nil {
			return err
		}
		if endpoints[serverOurs], clients[serverOurs], err = r.startFront(ctx, exe, tmp, file); err != nil {
			return fmt.Errorf("toolhost serve: %w", err)
		}
	}
	if wantsMCP(want, true, serverSDK) {
		if endpoints[serverSDK], err = r.startHTTPServer(exe.mcpnoop, "-http"); err != nil {
			return fmt.Errorf("mcpnoop -http: %w", err)
		}
		clients[serverSDK] = benchHTTPClient("")
	}
	if wantsMCP(want, true, serverInProc) {
		data, err := os.MkdirTemp(tmp, "data-")
		if err != nil {
			return err
		}
		line, err := r.startHTTPServer(exe.mcpfront, "-http", "-data", data)
		endpoint, token, ok := strings.Cut(line, " ")
		if err != nil || !ok {
			return fmt.Errorf("mcpfront -http: %q, %v", line, err)
		}
		endpoints[serverInProc], clients[serverInProc] = endpoint, benchHTTPClient(token)
	}
	transport := func(overHTTP bool, s mcpServer) (mcp.Transport, error) {
		switch {
		case overHTTP:
			return &mcp.StreamableClientTransport{Endpoint: endpoints[s], HTTPClient: clients[s]}, nil
		case s == serverOurs:
			file, err := writeConfig(tmp, oursConfig)
			return stdioTransport(exec.Command(exe.toolhost, "mcp", "-role", "bench", "-config", file)), err
		case s == serverInProc:
			data, err := os.MkdirTemp(tmp, "data-")
			return stdioTransport(exec.Command(exe.mcpfront, "-data", data)), err
		}
		return stdioTransport(exec.Command(exe.mcpnoop)), nil
	}
	for _, p := range mcpPairs {
		for _, s := range []mcpServer{serverOurs, serverSDK, serverInProc} {
			path := p.path(s)
			if !want(path) {
				continue
			}
			t, err := transport(p.http, s)
			if err != nil {
				return err
			}
			if err := r.addMCP(ctx, path, t, noopIn(p.version)); err != nil {
				return err
			}
		}
	}
	return nil
}

// serve serves h with server.New on a loopback port, in this process, and
// returns its base URL and an HTTP client carrying a token of the role
// "bench", as an MCP client would: its lookup in the store is part of what
// the paths through it measure.
func (r *callRig) serve(ctx context.Context, h *host.Host) (string, *http.Client, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	handler, err := server.New(h, nil)
	if err != nil {
		lis.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	r.closers = append(r.closers, func() { _ = srv.Close() })
	token, _, err := h.Store().CreateToken(ctx, "bench", "bench", time.Time{})
	if err != nil {
		return "", nil, err
	}
	return "http://" + lis.Addr().String(), benchHTTPClient(token), nil
}

// startHTTPServer starts exe (mcpnoop, mcpfront or sdkgateway) with args
// and returns the first line it prints: where it serves; the process ends
// when the rig closes its stdin.
func (r *callRig) startHTTPServer(exe string, args ...string) (string, error) {
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	r.closers = append(r.closers, func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("no endpoint on its stdout: %w", err)
	}
	return strings.TrimSpace(line), nil
}

// addStdio adds a path calling c over stdio of the MCP server cmd runs.
func (r *callRig) addStdio(ctx context.Context, name string, cmd *exec.Cmd, c mcpCallee) error {
	return r.addMCP(ctx, name, stdioTransport(cmd), c)
}

// stdioTransport is stdio of the MCP server cmd runs, its stderr the
// bench's.
func stdioTransport(cmd *exec.Cmd) mcp.Transport {
	cmd.Stderr = os.Stderr
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}
}

// mcpCallee is what an MCP path calls: a tool with its arguments, in a
// session that the bench's client, the go-sdk's with its defaults, opens
// with opts, which pin the protocol version.
type mcpCallee struct {
	tool string
	args map[string]any
	opts *mcp.ClientSessionOptions
}

// noopIn is the no-op tool, in protocol version version.
func noopIn(version string) mcpCallee { return calleeIn("noop", map[string]any{}, version) }

// calleeIn is the tool with args, in protocol version version.
func calleeIn(tool string, args map[string]any, version string) mcpCallee {
	return mcpCallee{tool: tool, args: args, opts: &mcp.ClientSessionOptions{ProtocolVersion: version}}
}

// addMCP adds a path calling c over an MCP session on t, opened by the
// bench's client and shared by the callers, once checkEra says the session
// runs in the version c asks for.
func (r *callRig) addMCP(ctx context.Context, name string, t mcp.Transport, c mcpCallee) error {
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, t, c.opts)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	r.closers = append(r.closers, func() { _ = sess.Close() })
	if err := checkEra(sess, t, c.opts.ProtocolVersion); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	r.add(name, mcpCall(sess, c))
	return nil
}

// checkEra returns an error unless the session runs in protocol version
// want, as the server answered it: the version of its initialize result or,
// from mcpversion.Stateless on, the one server/discover agreed on (a
// client pinned to it falls back to initialize with mcpversion.Legacy when
// discover fails); and, over streamable HTTP, an Mcp-Session-Id given by
// the server before mcpversion.Stateless and none from it on.
func checkEra(sess *mcp.ClientSession, t mcp.Transport, want string) error {
	got := ""
	if init := sess.InitializeResult(); init != nil {
		got = init.ProtocolVersion
	}
	if got != want {
		return fmt.Errorf("asked for protocol version %s, the server answered %q", want, got)
	}
	if _, ok := t.(*mcp.StreamableClientTransport); ok && (sess.ID() == "") != (want >= mcpversion.Stateless) {
		return fmt.Errorf("protocol version %s over streamable HTTP with Mcp-Session-Id %q: want one before %s, none from it on", want, sess.ID(), mcpversion.Stateless)
	}
	return nil
}

// benchHTTPClient is the HTTP client of the HTTP paths: keep-alive
// connections enough for every caller, sending token as a bearer token when
// it is not "".
func benchHTTPClient(token string) *http.Client {
	var rt http.RoundTripper = &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
	if token != "" {
		rt = bearer{token: token, base: rt}
	}
	return &http.Client{Transport: rt}
}

// hostCall returns a path calling the no-op tool through h.Call as the agent.
func hostCall(h *host.Host, agentID string) func(context.Context) error {
	return hostCallAs(h, agentID, "")
}

// hostCallAs calls noop on h as the agent with the credential cred.
func hostCallAs(h *host.Host, agentID, cred string) func(context.Context) error {
	return func(ctx context.Context) error {
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "noop", Arguments: []byte("{}"),
			Context: toolhost.CallContext{AgentID: agentID, Channel: "bench", Credential: cred}})
		return checkResult(res, err)
	}
}

// benchAgent creates, on h, the role "bench" holding the group, unless
// another host on the same database made it, and an agent bound to it.
func benchAgent(ctx context.Context, h *host.Host, group string) (store.Agent, error) {
	if _, err := h.Roles().Create(ctx, host.RoleSpec{Name: "bench", ToolGroups: []string{group}}); err != nil && !errors.Is(err, store.ErrExists) {
		return store.Agent{}, err
	}
	return h.Agents().Create(ctx, "bench", store.Agent{})
}

// benchRules are the ten rules of Host.Call, 10 rules: ordinary
// conditions (on arguments the no-op tool is not given, the tool, the role
// and the agent) naming the tool, its group or every tool, none matching.
var benchRules = func() []rules.Rule {
	conds := []string{
		"has(args.command) && args.command.contains('sudo')", "has(args.path) && path.clean(args.path).startsWith('..')",
		"has(args.path) && args.path.startsWith('/etc')", "has(args.command) && args.command.matches('^rm ')", "size(args) > 100",
		"tool == 'x' && role == 'y'", "role == 'nobody'", "agent == 'nobody'",
		"has(args.url) && url.host(args.url) == 'example.com'", "has(args.path) && args.path.endsWith('.key')",
	}
	tools := [][]string{{"noop"}, {"group:noop"}, nil}
	out := make([]rules.Rule, len(conds))
	for i, c := range conds {
		out[i] = rules.Rule{Name: fmt.Sprintf("r%d", i), Tools: tools[i%len(tools)], When: c, Action: rules.Deny, Reason: "bench"}
		if i%5 == 4 {
			out[i].Action = rules.Approve
		}
	}
	return out
}()

// isPGPath reports whether a call path needs PostgreSQL (-pg-dsn).
func isPGPath(path string) bool {
	return path == pathHostPG || path == pathHostPG2 || isBalancedPath(path)
}

// byCaller returns a path that spreads the callers over calls by their
// number (see callerOf): caller i always makes calls[i % len(calls)].
func byCaller(calls ...func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error { return calls[callerOf(ctx)%len(calls)](ctx) }
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

// flush waits until every in-process host's events are written and, when
// it traces, its queued spans exported.
func (r *callRig) flush(ctx context.Context) error {
	for _, h := range r.hosts {
		if err := h.Events().Flush(ctx); err != nil {
			return err
		}
		if tp, ok := h.TracerProvider().(interface{ ForceFlush(context.Context) error }); ok {
			if err := tp.ForceFlush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *callRig) add(name string, call func(context.Context) error) {
	r.paths = append(r.paths, callPath{name: name, call: call})
}

// writeConfig writes a config file made of body, with its data in a fresh
// directory under tmp, and returns its path.
func writeConfig(tmp, body string) (string, error) {
	dir, err := os.MkdirTemp(tmp, "host-")
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, "config.hcl")
	src := fmt.Sprintf("data_dir = %q\n%s", filepath.Join(dir, "data"), body)
	return file, os.WriteFile(file, []byte(src), 0o644)
}

// startHost starts an in-process host for a config made of body (see
// writeConfig).
func startHost(ctx context.Context, tmp, body string, opts *host.Options) (*host.Host, error) {
	file, err := writeConfig(tmp, body)
	if err != nil {
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

// mcpCall returns a path calling c's tool over an MCP session.
func mcpCall(s *mcp.ClientSession, c mcpCallee) func(context.Context) error {
	return func(ctx context.Context) error {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err == nil && res.IsError {
			content, _ := json.Marshal(res.Content)
			err = fmt.Errorf("%s failed over MCP: %s", c.tool, content)
		}
		return err
	}
}

// callPlan says how many calls each path makes at each concurrency, split
// into rounds in which the paths that run at it take turns, so that each
// sees the same machine.
type callPlan struct {
	Concs     []int // of the paths but the peer ones
	PeerConcs []int // of the peer paths (isPeerPath)
	Calls     func(conc int) int
	Rounds    int
	Warmup    int
}

// concsOf returns the concurrencies path runs at: the round-robin paths
// run at those of both kinds, their throughput target being at 16 callers,
// a concurrency of the peer paths.
func (p callPlan) concsOf(path string) []int {
	switch {
	case isPeerPath(path):
		return p.PeerConcs
	case isBalancedPath(path):
		concs := slices.Concat(p.Concs, p.PeerConcs)
		slices.Sort(concs)
		return slices.Compact(concs)
	}
	return p.Concs
}

// runCalls runs the plan and returns the series, per concurrency in
// ascending order, per path that runs at it in rig order. Between two runs
// it waits, untimed, until the hosts' events are written and their spans
// exported, so one path's backlog does not slow the next.
func runCalls(ctx context.Context, r *callRig, plan callPlan, logf func(string, ...any)) ([][]*Series, error) {
	for _, p := range r.paths {
		if _, _, err := runRound(ctx, p.call, 8, plan.Warmup); err != nil {
			return nil, fmt.Errorf("%s: warm-up: %w", p.name, err)
		}
	}
	width := 0 // of the paths' names, in the log
	for _, p := range r.paths {
		width = max(width, utf8.RuneCountInString(p.name))
	}
	concs := slices.Concat(plan.Concs, plan.PeerConcs)
	slices.Sort(concs)
	var out [][]*Series
	for _, conc := range slices.Compact(concs) {
		var paths []int // of r.paths, those running at conc
		var row []*Series
		for i, p := range r.paths {
			if slices.Contains(plan.concsOf(p.name), conc) {
				paths = append(paths, i)
				row = append(row, &Series{Path: p.name, Conc: conc})
			}
		}
		if len(paths) == 0 {
			continue
		}
		n := plan.Calls(conc) / plan.Rounds
		for round := range plan.Rounds {
			for k := range paths {
				j := (k + round) % len(paths) // a different order each round
				i := paths[j]
				lat, wall, err := runRound(ctx, r.call(i), conc, n)
				if err != nil {
					return nil, fmt.Errorf("%s at c=%d: %w", r.paths[i].name, conc, err)
				}
				s := row[j]
				s.Lat, s.Calls, s.Wall = append(s.Lat, lat...), s.Calls+len(lat), s.Wall+wall
				if err := r.flush(ctx); err != nil {
					return nil, err
				}
			}
		}
		for _, s := range row {
			s.Finish()
			logf("  c=%-2d %-*s p50 %-9s p99 %-9s %8.0f calls/s", conc, width, s.Path, fmtDur(s.P(0.5)), fmtDur(s.P(0.99)), s.Rate())
		}
		out = append(out, row)
	}
	return out, nil
}
