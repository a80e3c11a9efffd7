package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// TestInspectorCLI runs the MCP Inspector's command-line mode
// (@modelcontextprotocol/inspector 2.12.0, `inspector --cli`) against a real
// `toolhost serve` over streamable HTTP (the role's token in --header,
// through a proxy that records the exchanges) and against `toolhost mcp
// -role` over stdio (through tee, which records the messages), in each
// --protocol-era: modern (pinned to 2026-07-28) and auto must reach the
// stateless 2026-07-28 era, legacy the 2025-11-25 session era. In each, a
// run lists the role's tools and another calls run_command.
func TestInspectorCLI(t *testing.T) {
	node := npmNode(t)
	inspector := mcptest.NPMPackage(t, "@modelcontextprotocol/inspector") + "/clients/launcher/build/index.js"
	srv := newServe(t, fmt.Sprintf(erasConfig, pluginDir))
	srv.start()
	token := srv.roleToken("developer", "inspector", "")
	home := t.TempDir() // the Inspector's catalog and settings, not the operator's

	for _, tr := range []string{"http", "stdio"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			for _, era := range []string{"modern", "auto", "legacy"} {
				t.Run(era, func(t *testing.T) {
					// run runs the Inspector with a method's flags; it returns its
					// stdout, and the wire: the proxy's exchanges or the stdio runs.
					run := func(t *testing.T, method ...string) (string, func() string) {
						args := []string{inspector, "--cli", "--protocol-era", era}
						var wire func() string
						var check func(t *testing.T)
						switch tr {
						case "http":
							proxy := newWireProxy(t, srv.base+"/mcp/developer", "")
							args = append(args, "--transport", "http", "--server-url", proxy.URL,
								"--header", "Authorization: Bearer "+token)
							args = append(args, method...)
							wire = func() string { return exchangesString(proxy.recorded(0)) }
							check = func(t *testing.T) { checkEraHTTP(t, era, proxy.recorded(0)) }
						case "stdio":
							argv, dir := stdioTee(t, srv.bin, "mcp", "-role", "developer", "-config", srv.cfg)
							args = append(args, "--cwd", srv.dir)
							args = append(append(args, method...), "--")
							args = append(args, argv...)
							wire = func() string { return stdioString(stdioMessages(t, dir)) }
							check = func(t *testing.T) { checkEraStdio(t, era, stdioMessages(t, dir)) }
						}
						cmd := exec.Command(node, args...)
						cmd.Dir = srv.dir
						cmd.Env = append(cmd.Environ(), "HOME="+home)
						var stdout, stderr bytes.Buffer
						cmd.Stdout, cmd.Stderr = &stdout, &stderr
						start := time.Now()
						if err := runWithin(cmd, proctest.Patience); err != nil {
							t.Fatalf("inspector %s: %v after %s\nstdout: %s\nstderr: %s\n%s", strings.Join(method, " "), err,
								time.Since(start).Round(time.Millisecond), clip(stdout.String(), 4000), clip(stderr.String(), 4000), wire())
						}
						t.Run("era", check)
						return stdout.String(), wire
					}

					t.Run("list", func(t *testing.T) {
						out, wire := run(t, "--method", "tools/list")
						var listed struct{ Tools []struct{ Name string } }
						if err := json.Unmarshal([]byte(out), &listed); err != nil {
							t.Fatalf("tools/list printed %s: %v", clip(out, 2000), err)
						}
						var names []string
						for _, tool := range listed.Tools {
							names = append(names, tool.Name)
						}
						if slices.Sort(names); !slices.Equal(names, developerTools) {
							t.Errorf("tools %q, want %q\n%s", names, developerTools, wire())
						}
					})
					t.Run("call", func(t *testing.T) {
						marker := proctest.Marker()
						out, wire := run(t, "--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "command=echo inspected "+marker)
						var res struct {
							Content []struct{ Type, Text string }
							IsError bool
						}
						if err := json.Unmarshal([]byte(out), &res); err != nil {
							t.Fatalf("tools/call printed %s: %v", clip(out, 2000), err)
						}
						if res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "inspected "+marker) {
							t.Errorf("run_command: %+v\n%s", res, wire())
						}
					})
				})
			}
		})
	}
}
