package host_test

import (
	"context"
	"fmt"
	"os"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// Embedding the host: load a config (its plugin and builtin blocks start as
// subprocesses), register an in-process group, list the groups and call a tool.
func Example() {
	dataDir, _ := os.MkdirTemp("", "toolhost-example-")
	defer os.RemoveAll(dataDir)
	src := fmt.Sprintf(`
		data_dir = %q
		limits { timeout = "5s" }
		role "scribe" {
		  description = "Writes things down."
		  tool_groups = ["console"]
		}`, dataDir)
	cfg, err := config.Parse([]byte(src), "config.hcl", nil)
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
	if err := h.RegisterGroup(ctx, console); err != nil {
		panic(err)
	}
	for _, g := range h.Groups() {
		fmt.Println(g.ID, g.Source.Kind, g.Tools)
	}

	// An agent of the scribe role sees and may call only the console group.
	agent, err := h.CreateAgent(ctx, "scribe", store.Agent{})
	if err != nil {
		panic(err)
	}
	tools, _ := h.ToolsFor(agent.ID)
	fmt.Println(len(tools), tools[0].Function.Name)

	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "console_print", Arguments: []byte(`{"text":"hi"}`),
		Context: toolhost.CallContext{AgentID: agent.ID}})
	fmt.Println(res.Stdout, err)

	_, err = h.Call(ctx, &toolhost.CallRequest{Tool: "rm_rf", Context: toolhost.CallContext{AgentID: agent.ID}})
	fmt.Println(toolhost.CodeOf(err))
	// Output:
	// console runtime [console_print]
	// 1 console_print
	// printed: hi <nil>
	// unknown_tool
}
