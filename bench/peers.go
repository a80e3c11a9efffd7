package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/mcp/mcpversion"
)

// peerPaths are the paths against peer MCP gateways, in the report's order:
// npm's server-everything (its stdio server) behind our MCP front as an
// mcp_server group and behind the floor, a gateway of the go-sdk alone
// (bench/sdkgateway), in each client era (gatewayEras); behind supergateway
// and behind mcp-proxy, each serving streamable HTTP on a loopback port,
// and the server called directly over stdio, in the 2025 era (peerCallee).
// Each calls the server's echo tool.
var peerPaths = []string{pathPeerOurs25, pathFloor25, pathPeerOurs26, pathFloor26, pathSupergateway, pathMCPProxy, pathEverything}

// isPeerPath reports whether a call path is one of peerPaths.
func isPeerPath(path string) bool { return slices.Contains(peerPaths, path) }

// peerGateways are the peers' paths, whose faster (p50) and better
// (calls/s) one our front is held against in each era.
var peerGateways = []string{pathSupergateway, pathMCPProxy}

// gatewayEra is one client era of the gateway paths: our front and the
// floor, each called in protocol version version.
type gatewayEra struct{ ours, floor, version string }

// gatewayEras are the eras our front and the floor are called in, in the
// report's order.
var gatewayEras = []gatewayEra{
	{pathPeerOurs25, pathFloor25, mcpversion.Legacy},
	{pathPeerOurs26, pathFloor26, mcpversion.Stateless},
}

// floorOf is the floor a peer path is held against in section 9's tables:
// the floor in the path's era, that of peerCallee for the peers and the
// direct stdio path.
func floorOf(path string) string {
	version := peerCallee.opts.ProtocolVersion
	for _, e := range gatewayEras {
		if path == e.ours || path == e.floor {
			version = e.version
		}
	}
	i := slices.IndexFunc(gatewayEras, func(e gatewayEra) bool { return e.version == version })
	return gatewayEras[i].floor
}

// The npm packages of the peer paths, in the tests' npm cache directory
// (mcptest.NPMDir), where scripts/test installs them.
const (
	npmEverything   = "@modelcontextprotocol/server-everything"
	npmSupergateway = "supergateway"
	npmMCPProxy     = "mcp-proxy"
)

// echoIn is what the peer paths call: server-everything's echo tool, one
// of its cheapest, in protocol version version.
func echoIn(version string) mcpCallee {
	return calleeIn("echo", map[string]any{"message": "ok"}, version)
}

// peerCallee is what the peers and the direct stdio path call: echo in
// sessions of mcpversion.Legacy whatever the client's newest.
// server-everything (TypeScript SDK 1.x) speaks no newer one, and with
// mcpversion.Stateless, mcp-proxy would answer in per-request sessions of
// its own and supergateway would start a server process for each request:
// neither would measure the gateway it is. Our front and the floor, which
// serve the stateless era themselves over a session with the server, are
// called in both (gatewayEras).
var peerCallee = echoIn(mcpversion.Legacy)

// loopbackShim is a module node preloads (--import) into supergateway, which
// has no option for the address it listens on and would listen on every
// interface: a server told to listen on a port alone listens on 127.0.0.1.
const loopbackShim = `import net from 'node:net';
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  return listen.apply(this, args);
};
`

// gateway is a peer gateway: how the bench runs it, with node.
type gateway struct {
	path, pkg, bin string
	args           func(server, port string) []string // its arguments to serve the stdio server on 127.0.0.1:port at /mcp
	ready          string                             // a path that answers 200 once it serves
	loopbackShim   bool                               // node preloads loopbackShim
}

// gateways are the peer gateways. supergateway runs stateful (one server
// process per session, where stateless starts one per request), without
// logging each message (its default logs every one on stdout), and
// through a shell (its --stdio is a command line); mcp-proxy with its
// defaults but the streamable HTTP endpoint alone.
var gateways = []gateway{
	{path: pathSupergateway, pkg: npmSupergateway, bin: "supergateway", args: func(server, port string) []string {
		return []string{"--stdio", shellQuote(server), "--outputTransport", "streamableHttp", "--stateful",
			"--port", port, "--healthEndpoint", "/healthz", "--logLevel", "none"}
	}, ready: "/healthz", loopbackShim: true},
	{path: pathMCPProxy, pkg: npmMCPProxy, bin: "mcp-proxy", args: func(server, port string) []string {
		return []string{"--host", "127.0.0.1", "--port", port, "--server", "stream", "--", server}
	}, ready: "/ping"},
}

// startPeers adds the peer paths want accepts. Our front serves
// server-everything as `toolhost serve` does, a process of its own as each
// peer is (an mcp_server block, unconfined as the peers run it; see
// startFront), the role's token on every request; the floor is
// bench/sdkgateway running the same executable; one process of each serves
// both eras. The gateways (see gateways) are run by the same node as
// server-everything.
func (r *callRig) startPeers(ctx context.Context, tmp string, exe executables, want func(string) bool) error {
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("the peer paths run npm packages: %w", err)
	}
	everything, err := npmBin(npmEverything, "mcp-server-everything")
	if err != nil {
		return err
	}
	var about []string
	for _, pkg := range []string{npmSupergateway, npmMCPProxy, npmEverything} {
		about = append(about, pkg+" "+npmVersion(pkg))
	}
	out, _ := exec.Command(node, "--version").Output()
	r.peers = strings.Join(about, ", ") + " on Node.js " + strings.TrimSpace(string(out))

	wants := func(of func(gatewayEra) string) bool {
		return slices.ContainsFunc(gatewayEras, func(e gatewayEra) bool { return want(of(e)) })
	}
	var ours, floor string // endpoints
	var oursClient *http.Client
	if wants(func(e gatewayEra) string { return e.ours }) {
		file, err := writeConfig(tmp, mcpServerBlock("everything", everything)+"role \"bench\" {\n  tool_groups = [\"everything\"]\n}\n")
		if err != nil {
			return err
		}
		if ours, oursClient, err = r.startFront(ctx, exe, tmp, file); err != nil {
			return fmt.Errorf("toolhost serve with server-everything: %w", err)
		}
	}
	if wants(func(e gatewayEra) string { return e.floor }) {
		if floor, err = r.startHTTPServer(exe.sdkgateway, everything); err != nil {
			return fmt.Errorf("sdkgateway: %w", err)
		}
	}
	for _, e := range gatewayEras {
		if want(e.ours) {
			if err := r.addMCP(ctx, e.ours, &mcp.StreamableClientTransport{Endpoint: ours, HTTPClient: oursClient}, echoIn(e.version)); err != nil {
				return err
			}
		}
		if want(e.floor) {
			if err := r.addMCP(ctx, e.floor, &mcp.StreamableClientTransport{Endpoint: floor, HTTPClient: benchHTTPClient("")}, echoIn(e.version)); err != nil {
				return err
			}
		}
	}

	for _, g := range gateways {
		if !want(g.path) {
			continue
		}
		bin, err := npmBin(g.pkg, g.bin)
		if err != nil {
			return err
		}
		addr, err := freePort()
		if err != nil {
			return err
		}
		_, port, _ := net.SplitHostPort(addr)
		base := "http://" + addr
		var preload []string
		if g.loopbackShim {
			shim := filepath.Join(tmp, "loopback.mjs")
			if err := os.WriteFile(shim, []byte(loopbackShim), 0o644); err != nil {
				return err
			}
			preload = []string{"--import", shim}
		}
		cmd := exec.Command(node, slices.Concat(preload, []string{bin}, g.args(everything, port))...)
		if err := r.startGateway(cmd, base+g.ready); err != nil {
			return fmt.Errorf("%s: %w", g.path, err)
		}
		if err := r.addMCP(ctx, g.path, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: benchHTTPClient("")}, peerCallee); err != nil {
			return err
		}
	}

	if want(pathEverything) {
		return r.addStdio(ctx, pathEverything, exec.Command(everything), peerCallee)
	}
	return nil
}

// startGateway starts cmd, a gateway serving MCP over streamable HTTP on a
// loopback port, and polls ready every 5 ms until it answers 200; the rig
// stops it when it closes. Its stdout, where the gateways log, is dropped.
func (r *callRig) startGateway(cmd *exec.Cmd, ready string) error {
	cmd.Stderr = os.Stderr
	p, err := startProcess(cmd)
	if err != nil {
		return err
	}
	r.closers = append(r.closers, p.stop)
	return p.pollOK(&http.Client{Timeout: time.Second}, ready, 5*time.Millisecond, time.Minute)
}

// npmBin is the executable bin of the npm package pkg in the npm cache
// directory, or an error saying how to install it.
func npmBin(pkg, bin string) (string, error) {
	path := filepath.Join(mcptest.NPMDir(), "node_modules", ".bin", bin)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is not installed in %s; scripts/test installs it: %w", pkg, mcptest.NPMDir(), err)
	}
	return path, nil
}

// npmVersion is the version of the npm package pkg in the npm cache
// directory, "?" when its package.json says none.
func npmVersion(pkg string) string {
	var meta struct{ Version string }
	data, err := os.ReadFile(filepath.Join(mcptest.NPMDir(), "node_modules", pkg, "package.json"))
	if err != nil || json.Unmarshal(data, &meta) != nil || meta.Version == "" {
		return "?"
	}
	return meta.Version
}

// shellQuote quotes s as one word for sh: supergateway runs its --stdio
// command through a shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
