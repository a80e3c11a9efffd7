package sdktest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/sdk/sdktest"
)

// GreetArgs are the arguments of the greet tool.
type GreetArgs struct {
	Name string `json:"name" jsonschema:"whom to greet"`
}

// greeter is the module's group: its greeting comes from the plugin block's
// config { greeting = "..." }.
func greeter() *sdk.Group {
	greeting := "Hello"
	return &sdk.Group{
		ID:          "greeter",
		Description: "Greetings.",
		OnConfigure: func(_ context.Context, req *sdk.ConfigureRequest) error {
			var c struct {
				Greeting string `json:"greeting"`
			}
			if err := sdk.DecodeConfig(req, &c); err != nil {
				return err
			}
			if c.Greeting != "" {
				greeting = c.Greeting
			}
			return nil
		},
		Tools: []sdk.Tool{
			sdk.NewTool("greet", "Greet someone.", func(_ context.Context, r *sdk.Request[GreetArgs]) (*sdk.Result, error) {
				return sdk.Text(greeting + ", " + r.Args.Name), nil
			}),
		},
	}
}

// testGreet is what the module's func TestGreet(t *testing.T) holds: the
// group served over gRPC as a host would serve it, configured as a plugin
// block would configure it, each result checked with OK or Fails.
func testGreet(t testing.TB) {
	p := sdktest.New(t, greeter(), &sdktest.Options{Config: map[string]any{"greeting": "Bonjour"}})
	fmt.Println(p.Spec.ID, p.Spec.Tools[0].Name)
	if got := sdktest.OK(t, p.Call("greet", map[string]any{"name": "Ada"})); got != "Bonjour, Ada" {
		t.Fatalf("greet = %q", got)
	}
	fmt.Println(sdktest.Fails(t, p.Call("greet", map[string]any{}), sdk.CodeValidation))
}

// A module's test runs its group with New and checks what its tools return.
// The whole file is the example: testGreet is the test, and standIn lets it
// run here, outside go test.
func ExampleNew() {
	t := &standIn{}
	defer t.cleanup()
	testGreet(t) // go test passes the test's *testing.T
	// Output:
	// greeter greet
	// arguments: validating root: required: missing properties: ["name"]
}

// standIn is a testing.TB for running testGreet outside go test.
type standIn struct {
	testing.TB
	cleanups []func()
}

func (t *standIn) Helper()                           {}
func (t *standIn) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *standIn) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (t *standIn) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
