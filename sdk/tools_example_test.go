package sdk_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/sdk"
)

// A tool whose output is a typed value: MCP clients get it as structured
// content checked against the tool's output schema, models read it as JSON.
func ExampleNewStructuredTool() {
	type countArgs struct {
		Text string `json:"text" jsonschema:"the text to count"`
	}
	type WordCount struct {
		Words int `json:"words" jsonschema:"how many words the text has"`
		Lines int `json:"lines" jsonschema:"how many lines"`
	}
	count := sdk.NewStructuredTool("count_words", "Count the words and lines of a text.",
		func(_ context.Context, r *sdk.Request[countArgs]) (WordCount, error) {
			return WordCount{Words: len(strings.Fields(r.Args.Text)), Lines: strings.Count(r.Args.Text, "\n") + 1}, nil
		}, sdk.ReadOnly())
	g := &sdk.Group{ID: "text", Description: "Text utilities.", Tools: []sdk.Tool{count}}

	fmt.Println(string(count.Spec().OutputSchema))
	res, _ := g.Call(context.Background(), &toolhost.CallRequest{Tool: "count_words", Arguments: []byte(`{"text": "one two\nthree"}`)})
	fmt.Println(res.Stdout)
	fmt.Println(res.Meta[toolhost.MetaStructuredContent])
	// Output:
	// {"type":"object","properties":{"words":{"type":"integer","description":"how many words the text has"},"lines":{"type":"integer","description":"how many lines"}},"required":["words","lines"],"additionalProperties":false}
	// {
	//   "words": 3,
	//   "lines": 2
	// }
	// map[lines:2 words:3]
}

// A handler fails its call by returning an error: one made with Errorf
// carries its code, any other error fails the call with tool_exec. The
// caller gets a Result with OK false, not a Go error.
func ExampleErrorf() {
	type divArgs struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	g := &sdk.Group{ID: "calc", Description: "Arithmetic.", Tools: []sdk.Tool{
		sdk.NewTool("divide", "Divide a by b.", func(_ context.Context, r *sdk.Request[divArgs]) (*sdk.Result, error) {
			if r.Args.B == 0 {
				return nil, sdk.Errorf(sdk.CodeValidation, "b: must not be 0")
			}
			return sdk.Text(fmt.Sprint(r.Args.A / r.Args.B)), nil
		}),
	}}

	res, err := g.Call(context.Background(), &toolhost.CallRequest{Tool: "divide", Arguments: []byte(`{"a": 1, "b": 0}`)})
	fmt.Println(res.OK, res.Error.Code, res.Error.Message, err)
	// Output:
	// false validation b: must not be 0 <nil>
}

// A long tool reports how far it is with Progress; the host passes the
// reports on to callers that asked for them (an MCP client's progress
// token, the agent runtime), here a function put in the call's context.
func ExampleRequest_Progress() {
	type fetchArgs struct {
		URLs []string `json:"urls"`
	}
	g := &sdk.Group{ID: "fetch", Description: "Fetching.", Tools: []sdk.Tool{
		sdk.NewTool("fetch_all", "Fetch every URL.", func(_ context.Context, r *sdk.Request[fetchArgs]) (*sdk.Result, error) {
			for i, u := range r.Args.URLs {
				// ... fetch u ...
				r.Progress(float64(i+1), float64(len(r.Args.URLs)), "fetched "+u)
			}
			return sdk.Text(fmt.Sprint(len(r.Args.URLs), " fetched")), nil
		}),
	}}

	ctx := toolhost.WithProgress(context.Background(), func(done, total float64, message string) {
		fmt.Printf("%v/%v %s\n", done, total, message)
	})
	res, _ := g.Call(ctx, &toolhost.CallRequest{Tool: "fetch_all", Arguments: []byte(`{"urls": ["a.example", "b.example"]}`)})
	fmt.Println(res.Stdout)
	// Output:
	// 1/2 fetched a.example
	// 2/2 fetched b.example
	// 2 fetched
}
