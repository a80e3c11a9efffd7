package host_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// Embedding the host: load a config whose plugin block starts a module as a
// sandboxed subprocess, register an in-process group, list the groups, and
// call tools as an agent of a role. The plugin is the repository's
// examples/notes module, built first into the config's plugin directory
// (bin/plugins), where a deployment installs its modules.
func Example() {
	dir, err := os.MkdirTemp("", "toolhost-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	buildNotes(filepath.Join(dir, "bin", "plugins", "notes"))
	file := filepath.Join(dir, "config.hcl")
	err = os.WriteFile(file, []byte(`
		plugin "notes" {
		  path = "notes"
		}
		role "scribe" {
		  description = "Writes things down."
		  tool_groups = ["notes", "console"]
		}`), 0o644)
	if err != nil {
		panic(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		panic(err)
	}
	h, err := host.New(cfg, nil)
	if err != nil {
		panic(err)
	}
	defer h.Close()
	ctx := context.Background()
	if err := h.Start(ctx); err != nil {
		panic(err)
	}

	type printArgs struct {
		Text string `json:"text"`
	}
	console := &sdk.Group{ID: "console", Description: "The host's console.", Tools: []sdk.Tool{
		sdk.NewTool("console_print", "Print a line.", func(_ context.Context, r *sdk.Request[printArgs]) (*sdk.Result, error) {
			return sdk.Text("printed: " + r.Args.Text), nil
		}),
	}}
	if err := h.Modules().Register(ctx, console); err != nil {
		panic(err)
	}
	for _, g := range h.Modules().Groups() {
		fmt.Println(g.ID, g.Source.Kind, g.Tools)
	}

	// An agent of the scribe role sees and may call the tools of its groups.
	agent, err := h.Agents().Create(ctx, "scribe", store.Agent{})
	if err != nil {
		panic(err)
	}
	list, _ := h.Tools(host.ToolQuery{Agent: agent.ID})
	fmt.Println(len(list.Tools), "tools")

	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "add_note", Arguments: []byte(`{"title": "groceries", "body": "eggs"}`),
		Context: toolhost.CallContext{AgentID: agent.ID}})
	fmt.Println(res.Stdout, err)

	_, err = h.Call(ctx, &toolhost.CallRequest{Tool: "rm_rf", Context: toolhost.CallContext{AgentID: agent.ID}})
	fmt.Println(toolhost.CodeOf(err))
	// Output:
	// console runtime [console_print]
	// notes plugin [add_note get_note search_notes]
	// 4 tools
	// saved groceries <nil>
	// unknown_tool
}

// buildNotes builds the examples/notes module into path.
func buildNotes(path string) {
	out, err := exec.Command("go", "build", "-o", path, "github.com/toolhost/toolhost/examples/notes").CombinedOutput()
	if err != nil {
		panic(fmt.Sprintf("build examples/notes: %v\n%s", err, out))
	}
}
