package host_test

import (
	"context"
	"fmt"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
)

// Embedding the host: load a config (its plugin and builtin blocks start as
// subprocesses), register an in-process group, list the groups and call a tool.
func Example() {
	cfg, err := config.Parse([]byte(`limits { timeout = "5s" }`), "config.hcl", nil)
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

	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "console_print", Arguments: []byte(`{"text":"hi"}`)})
	fmt.Println(res.Stdout, err)

	_, err = h.Call(ctx, &toolhost.CallRequest{Tool: "rm_rf"})
	fmt.Println(toolhost.CodeOf(err))
	// Output:
	// console runtime [console_print]
	// printed: hi <nil>
	// unknown_tool
}
