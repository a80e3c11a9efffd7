package sdk_test

import (
	"context"
	"fmt"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/sdk"
)

// AddArgs are the arguments of the example's add tool.
type AddArgs struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

// A group with one typed tool. In a plugin's main, pass it to sdk.Serve; here
// it is called in-process, as sdktest.New or an embedding host would.
func Example() {
	calc := &sdk.Group{
		ID:          "calc",
		Description: "Arithmetic.",
		Tools: []sdk.Tool{
			sdk.NewTool("add", "Add two numbers.", func(_ context.Context, req *sdk.Request[AddArgs]) (*sdk.Result, error) {
				return sdk.Text(fmt.Sprint(req.Args.A + req.Args.B)), nil
			}),
		},
	}
	ctx := context.Background()
	spec, _ := calc.Describe(ctx, &toolhost.DescribeRequest{})
	fmt.Println(spec.Tools[0].Name, string(spec.Tools[0].InputSchema))

	res, _ := calc.Call(ctx, &toolhost.CallRequest{Tool: "add", Arguments: []byte(`{"a": 2, "b": 40}`)})
	fmt.Println(res.OK, res.Stdout)

	res, _ = calc.Call(ctx, &toolhost.CallRequest{Tool: "add", Arguments: []byte(`{"a": 2}`)})
	fmt.Println(res.OK, res.Error.Code)
	// Output:
	// add {"type":"object","properties":{"a":{"type":"number","description":"the first addend"},"b":{"type":"number","description":"the second addend"}},"required":["a","b"],"additionalProperties":false}
	// true 42
	// false validation
}
