package host

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/pgtest"
)

// minPropertyRuns is the least number of runs of each rapid property (the
// design's floor; the heaviest properties run in parallel, t.Parallel).
const minPropertyRuns = 100

// TestMain either serves a test plugin, when this binary was re-executed as
// one (see testplugin_test.go), or runs the tests with enough property runs,
// stopping the PostgreSQL cluster of the cross-host tests after.
func TestMain(m *testing.M) {
	if name := os.Getenv(testPluginEnv); name != "" {
		serveTestPlugin(name)
		os.Exit(0)
	}
	if os.Getenv(mcptest.ContentServerEnv) != "" {
		mcptest.ServeContent()
	}
	if behaviour := os.Getenv(testMCPEnv); behaviour != "" {
		serveTestMCP(behaviour)
		os.Exit(0)
	}
	if pidFile := os.Getenv(testHostEnv); pidFile != "" {
		runTestHost(pidFile)
	}
	flag.Parse()
	want := minPropertyRuns
	if testing.Short() {
		want *= 5 // rapid runs a fifth of its checks under -short
	}
	if f := flag.Lookup("rapid.checks"); f != nil {
		if n, _ := strconv.Atoi(f.Value.String()); n < want {
			_ = f.Value.Set(strconv.Itoa(want))
		}
	}
	pgtest.Main(m)
}

// toolsFor is every tool an agent's role may call ([ToolQuery.Unloaded]).
func toolsFor(h *Host, agentID string) ([]ToolDefinition, error) {
	list, err := h.Tools(ToolQuery{Agent: agentID, Unloaded: true})
	return list.Tools, err
}

// offeredTo is what an agent is offered ([ToolQuery.Agent]).
func offeredTo(h *Host, agentID string) ([]ToolDefinition, error) {
	list, err := h.Tools(ToolQuery{Agent: agentID})
	return list.Tools, err
}

// roleTools is a role's list, with its token counts.
func roleTools(h *Host, role string) (ToolList, error) {
	return h.Tools(ToolQuery{Role: role, Tokens: true})
}

// metaOf says where a registered tool comes from.
func metaOf(h *Host, tool string) (ToolMeta, bool) {
	g, spec, ok := h.mgr.lookup(tool)
	if !ok {
		return ToolMeta{}, false
	}
	return toolMeta(g, spec), true
}
