package host_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// Register a group that runs inside the embedding program: no process and no
// config block. It is listed and called like a plugin's group.
func ExampleModules_Register() {
	h := startHost(&config.Config{})
	defer h.Close()
	ctx := context.Background()

	type zoneArgs struct {
		Zone string `json:"zone" jsonschema:"an IANA time zone, such as Europe/Paris"`
	}
	clock := &sdk.Group{ID: "clock", Description: "Time zones.", Tools: []sdk.Tool{
		sdk.NewTool("zone_known", "Say whether a time zone is known.", func(_ context.Context, r *sdk.Request[zoneArgs]) (*sdk.Result, error) {
			return sdk.Text(fmt.Sprint(r.Args.Zone == "Europe/Paris")), nil
		}, sdk.ReadOnly()),
	}}
	if err := h.Modules().Register(ctx, clock); err != nil {
		panic(err)
	}
	for _, g := range h.Modules().Groups() {
		fmt.Println(g.ID, g.Source.Kind, g.Tools)
	}

	// No agent and no role: the caller is the operator, who may call any tool.
	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "zone_known", Arguments: []byte(`{"zone": "Europe/Paris"}`)})
	fmt.Println(res.Stdout, err)
	// Output:
	// clock runtime [zone_known]
	// true <nil>
}

// What an agent sees is its role's tools: Tools gives the definitions to put
// in the agent's model request, and a call of any other tool fails with
// tool_not_available.
func ExampleHost_Tools() {
	h := startHost(&config.Config{Roles: []config.Role{{Name: "reader", ToolGroups: []string{"files"}}}})
	defer h.Close()
	ctx := context.Background()
	ok := func(context.Context, *sdk.Request[struct{}]) (*sdk.Result, error) { return sdk.Text("ok"), nil }
	for _, g := range []*sdk.Group{
		{ID: "files", Description: "Files.", Tools: []sdk.Tool{sdk.NewTool("list_files", "List files.", ok)}},
		{ID: "shell", Description: "Commands.", Tools: []sdk.Tool{sdk.NewTool("run_shell", "Run a command.", ok)}},
	} {
		if err := h.Modules().Register(ctx, g); err != nil {
			panic(err)
		}
	}

	agent, err := h.Agents().Create(ctx, "reader", store.Agent{})
	if err != nil {
		panic(err)
	}
	list, err := h.Tools(host.ToolQuery{Agent: agent.ID})
	if err != nil {
		panic(err)
	}
	for _, t := range list.Tools {
		fmt.Println(t.Type, t.Function.Name, string(t.Function.Parameters))
	}

	_, err = h.Call(ctx, &toolhost.CallRequest{Tool: "run_shell", Context: toolhost.CallContext{AgentID: agent.ID}})
	fmt.Println(errors.Is(err, toolhost.ErrToolNotAvailable))
	// Output:
	// function list_files {"type":"object","additionalProperties":false}
	// true
}

// Call cuts a tool's output to the limits (the config's limits {}, or its
// group's), and says so in the result. A tool declared with sdk.KeepTail,
// such as a command whose last lines say how it ended, keeps its end.
func ExampleHost_Call_outputLimits() {
	h := startHost(&config.Config{Limits: config.Limits{MaxOutputLines: 3}})
	defer h.Close()
	ctx := context.Background()

	type buildArgs struct {
		Steps int `json:"steps"`
	}
	build := sdk.NewTool("build", "Run the build.", func(_ context.Context, r *sdk.Request[buildArgs]) (*sdk.Result, error) {
		var out strings.Builder
		for i := 1; i <= r.Args.Steps; i++ {
			fmt.Fprintf(&out, "step %d ok\n", i)
		}
		out.WriteString("build failed: step 6 missing\n")
		return sdk.Text(out.String()), nil
	}, sdk.KeepTail())
	if err := h.Modules().Register(ctx, &sdk.Group{ID: "builder", Description: "Builds.", Tools: []sdk.Tool{build}}); err != nil {
		panic(err)
	}

	res, err := h.Call(ctx, &toolhost.CallRequest{Tool: "build", Arguments: []byte(`{"steps": 5}`)})
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Stdout)
	fmt.Println("lines cut:", res.TruncatedLines)
	// Output:
	// step 4 ok
	// step 5 ok
	// build failed: step 6 missing
	// lines cut: true
}

// startHost makes and starts a host from a config built in code; with no
// data_dir its store lives in a temporary directory that Close removes.
func startHost(cfg *config.Config) *host.Host {
	h, err := host.New(cfg, nil)
	if err != nil {
		panic(err)
	}
	if err := h.Start(context.Background()); err != nil {
		h.Close()
		panic(err)
	}
	return h
}
