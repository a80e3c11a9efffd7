package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/internal/mcp/mcptest"
	"github.com/toolhost/toolhost/internal/proctest"
)

// tsConfig is the config of TestTypeScriptClient's serve (after newServe's
// listen line): the workspace and command modules, edit_file's title and
// hints overridden by the operator, and the developer role with a prompt.
const tsConfig = `
data_dir   = "data"
plugin_dir = %q
builtin "workspace" {
  config {}
  tool "edit_file" {
    title       = "Edit a file (e2e)"
    destructive = false
    idempotent  = true
  }
}
builtin "command" {
  config {}
}
role "developer" {
  prompt      = "You are the e2e developer: read, edit and run."
  tool_groups = ["workspace", "command"]
}
`

// TestTypeScriptClient drives the MCP front with the official TypeScript
// SDK's client (e2e/tsclient/client.mjs, run by node) over streamable HTTP
// (a real `toolhost serve`, the role's bearer token) and over stdio
// (`toolhost mcp -role`): the instructions are the role's prompt, titles and
// hints arrive with the config's overrides, structuredContent validates
// against the outputSchema, run_command's lines come as progress
// notifications, and the client's cancellation stops the command on the
// machine.
func TestTypeScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (scripts/test installs nodejs): %v", err)
	}
	mcptest.NPMPackage(t, "@modelcontextprotocol/sdk")
	mcptest.NPMPackage(t, "ajv")
	mcptest.NPMPackage(t, "ajv-formats")
	script, err := filepath.Abs(filepath.Join("tsclient", "client.mjs"))
	if err != nil {
		t.Fatal(err)
	}

	srv := newServe(t, fmt.Sprintf(tsConfig, pluginDir))
	srv.start()
	token := srv.roleToken("developer", "ts-client", "")
	prompt := rolePrompt(t, srv.cfg, "developer")

	for _, tr := range []struct {
		name string
		args []string // the script's
		env  []string
	}{
		{"http", []string{"http", srv.base + "/mcp/developer"}, []string{"TOOLHOST_TOKEN=" + token}},
		{"stdio", []string{"stdio", srv.bin, "mcp", "-role", "developer", "-config", srv.cfg}, nil},
	} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			c := startNodeClient(t, "the TypeScript client", node, srv.dir, tr.env, append([]string{script}, tr.args...)...)
			var hello struct {
				Instructions  string
				ServerVersion struct{ Name, Version string }
			}
			if err := json.Unmarshal(c.hello, &hello); err != nil {
				t.Fatalf("the client's hello %s: %v", c.hello, err)
			}
			t.Run("instructions", func(t *testing.T) {
				if hello.Instructions != prompt {
					t.Errorf("instructions:\n%s\nwant the role's prompt (Host.RolePrompt):\n%s", hello.Instructions, prompt)
				}
				if v := hello.ServerVersion; v.Name != "toolhost" || v.Version == "" {
					t.Errorf("serverInfo %+v, want toolhost and its version", v)
				}
			})
			var tools struct{ Tools []tsTool }
			c.ask(t, map[string]any{"op": "tools"}, &tools)
			listed := map[string]tsTool{}
			for _, tool := range tools.Tools {
				listed[tool.Name] = tool
			}
			t.Run("annotations", func(t *testing.T) { checkTSAnnotations(t, listed) })
			t.Run("structured", func(t *testing.T) { checkTSStructured(t, c, listed, srv.dir) })
			t.Run("progress", func(t *testing.T) { checkTSProgress(t, c) })
			t.Run("cancel", func(t *testing.T) { checkTSCancel(t, c) })
		})
	}
}

// rolePrompt is Host.RolePrompt of role with the config file's modules and
// roles, from a host of its own (its own data directory).
func rolePrompt(t *testing.T, file, role string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(src, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	h, err := host.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, err := h.Roles().Prompt(role)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tsTool is a tool as the TypeScript client lists it.
type tsTool struct {
	Name         string
	Title        string
	Annotations  map[string]any
	OutputSchema json.RawMessage
}

// hint is the tool's hint as a client reads it: the value sent, or the
// specification's default when absent (destructive and open-world true,
// read-only and idempotent false).
func (tool tsTool) hint(name string) bool {
	if v, ok := tool.Annotations[name].(bool); ok {
		return v
	}
	return name == "destructiveHint" || name == "openWorldHint"
}

// checkTSAnnotations: the first-party modules' hints and the config's
// override of edit_file arrive as the client reads them.
func checkTSAnnotations(t *testing.T, listed map[string]tsTool) {
	for _, c := range []struct {
		tool  string
		title string          // "": whatever the module says
		hints map[string]bool // the hints that must read so
	}{
		{"read_file", "", map[string]bool{"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false}},
		{"get_workspace_info", "", map[string]bool{"readOnlyHint": true, "openWorldHint": false}},
		{"write_file", "", map[string]bool{"readOnlyHint": false, "destructiveHint": true}},
		{"run_command", "", map[string]bool{"readOnlyHint": false, "destructiveHint": true}},
		// The config's tool block, over the module's sdk.Destructive().
		{"edit_file", "Edit a file (e2e)", map[string]bool{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true}},
	} {
		tool, ok := listed[c.tool]
		if !ok {
			t.Errorf("%s is not listed", c.tool)
			continue
		}
		if c.title != "" && tool.Title != c.title {
			t.Errorf("%s: title %q, want %q", c.tool, tool.Title, c.title)
		}
		for hint, want := range c.hints {
			if got := tool.hint(hint); got != want {
				t.Errorf("%s: %s reads %v, want %v (annotations %v)", c.tool, hint, got, want, tool.Annotations)
			}
		}
	}
}

// tsCall is the script's answer to a call: the result, what the SDK threw
// (its own check of structuredContent included), the progress notifications
// received, and ajv's verdict on structuredContent.
type tsCall struct {
	Result *struct {
		Content []struct {
			Type, Text string
		}
		StructuredContent json.RawMessage
		IsError           bool
	}
	SDKError string `json:"sdkError"`
	Progress []struct {
		Progress, Total float64
		Message         string
		At              float64 // ms since the call began
	}
	Ajv *struct {
		Valid     bool
		Errors    string
		Draft2020 bool
	}
	Errors    []string // the SDK's onerror while the call ran
	CallError string   `json:"callError"`
}

// text joins the result's text content.
func (c tsCall) text() string {
	var texts []string
	if c.Result != nil {
		for _, part := range c.Result.Content {
			texts = append(texts, part.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// checkTSStructured: get_workspace_info declares an outputSchema, and its
// result's structuredContent passes the SDK's validation and ajv's, with the
// same JSON as text.
func checkTSStructured(t *testing.T, c *nodeClient, listed map[string]tsTool, root string) {
	if len(listed["get_workspace_info"].OutputSchema) == 0 {
		t.Error("get_workspace_info has no outputSchema")
	}
	var res tsCall
	c.ask(t, map[string]any{"op": "call", "name": "get_workspace_info"}, &res)
	switch {
	case res.SDKError != "":
		t.Fatalf("the SDK's callTool threw: %s", res.SDKError)
	case res.Result.IsError:
		t.Fatalf("isError: %s", res.text())
	case len(res.Result.StructuredContent) == 0 || string(res.Result.StructuredContent) == "null":
		t.Fatalf("no structuredContent; text %s", res.text())
	case res.Ajv == nil:
		t.Fatal("the script did not validate structuredContent (no outputSchema listed)")
	case !res.Ajv.Valid:
		t.Errorf("ajv: structuredContent %s does not match the outputSchema %s: %s",
			res.Result.StructuredContent, listed["get_workspace_info"].OutputSchema, res.Ajv.Errors)
	}
	if !strings.Contains(string(res.Result.StructuredContent), root) {
		t.Errorf("structuredContent %s lacks the workspace root %s", res.Result.StructuredContent, root)
	}
	var structured, text any
	_ = json.Unmarshal(res.Result.StructuredContent, &structured)
	if err := json.Unmarshal([]byte(res.text()), &text); err != nil || !reflect.DeepEqual(structured, text) {
		t.Errorf("the text content %q is not the JSON of structuredContent %s (%v)", res.text(), res.Result.StructuredContent, err)
	}
}

// checkTSProgress: a run_command printing three lines with sleeps between
// them, called with a progress token, sends at least three progress
// notifications, increasing, whose messages carry the lines.
//
// The command sleeps after its last line too, long enough for a client on a
// busy machine to read that line's notification before the response: the
// SDK (1.32.2) handles a notification a microtask later than a response
// read in the same chunk, and so drops a progress notification written
// just before the response (it logs "unknown token"), which no server can
// avoid.
func checkTSProgress(t *testing.T, c *nodeClient) {
	var res tsCall
	c.ask(t, map[string]any{"op": "call", "name": "run_command", "progress": true,
		"arguments": map[string]any{"command": "echo one; sleep 0.4; echo two; sleep 0.4; echo three; sleep 1.5"}}, &res)
	if res.SDKError != "" || res.Result.IsError || res.text() != "one\ntwo\nthree\n" {
		t.Fatalf("run_command: %q (thrown: %s)", res.text(), res.SDKError)
	}
	if len(res.Progress) < 3 {
		t.Errorf("%d progress notifications, want at least 3: %+v (the SDK's errors: %q)", len(res.Progress), res.Progress, res.Errors)
	}
	var messages []string
	for i, p := range res.Progress {
		if i > 0 && p.Progress <= res.Progress[i-1].Progress {
			t.Errorf("progress did not increase: %+v", res.Progress)
		}
		messages = append(messages, p.Message)
	}
	for _, line := range []string{"one", "two", "three"} {
		if !strings.Contains(strings.Join(messages, "\n"), line) {
			t.Errorf("no progress message carries %q: %q", line, messages)
		}
	}
}

// checkTSCancel: a run_command sleeping for long, aborted by the client
// (notifications/cancelled), no longer runs on the machine a few seconds
// later, while the session goes on. The sleep runs in the command sandbox's
// pid namespace, so it is found by its marker in /proc.
func checkTSCancel(t *testing.T, c *nodeClient) {
	marker := proctest.Marker()
	c.ask(t, map[string]any{"op": "start", "id": "sleeper", "name": "run_command",
		"arguments": map[string]any{"command": "sleep " + marker, "timeout_seconds": 600}}, nil)
	for deadline := time.Now().Add(proctest.Patience); proctest.Running("sleep", marker) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			var res tsCall
			c.ask(t, map[string]any{"op": "abort", "id": "sleeper"}, &res)
			t.Fatalf("sleep %s did not start in %s: %q %s", marker, proctest.Patience, res.text(), res.CallError)
		}
	}
	var res tsCall
	c.ask(t, map[string]any{"op": "abort", "id": "sleeper"}, &res)
	if res.CallError == "" {
		t.Errorf("the aborted call ended with a result: %q", res.text())
	}
	aborted := time.Now()
	proctest.Eventually(t, "the cancelled call's sleep is gone", func() bool { return proctest.Running("sleep", marker) == 0 })
	t.Logf("sleep gone %s after the abort", time.Since(aborted).Round(time.Millisecond))
	c.ask(t, map[string]any{"op": "ping"}, nil)
}
