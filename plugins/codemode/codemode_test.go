package codemode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/plugins/codemode"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/sdk"
)

// service serves the tools of a group in-process, as a host would list
// and call them, recording the requests it was sent.
type service struct {
	group  *sdk.Group
	bounds rules.CodeBounds // over the defaults
	mu     sync.Mutex
	sent   []toolhost.CallRequest
}

func (s *service) Tools(host.ToolQuery) (host.ToolList, error) {
	spec, err := s.group.Describe(context.Background(), &toolhost.DescribeRequest{})
	if err != nil {
		return host.ToolList{}, err
	}
	out := host.ToolList{Meta: map[string]host.ToolMeta{}}
	for _, t := range spec.Tools {
		out.Tools = append(out.Tools, host.ToolDefinition{Type: "function", Function: host.Function{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
		out.Meta[t.Name] = host.ToolMeta{Group: spec.ID}
	}
	return out, nil
}

func (s *service) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	s.mu.Lock()
	s.sent = append(s.sent, *req)
	s.mu.Unlock()
	return s.group.Call(ctx, req)
}

func (s *service) CodeBounds(string) rules.CodeBounds {
	return s.bounds.Over(rules.DefaultCodeBounds())
}

type pathArgs struct {
	Path string `json:"path"`
}

type stat struct {
	Size int `json:"size"`
}

func files() *sdk.Group {
	return &sdk.Group{ID: "files", Tools: []sdk.Tool{
		sdk.NewTool("cat", "Print a file.", func(_ context.Context, r *sdk.Request[pathArgs]) (*sdk.Result, error) {
			if r.Args.Path == "missing" {
				return sdk.Fail(sdk.Text("partial"), sdk.CodeToolExec, "no such file"), nil
			}
			return sdk.Text("contents of " + r.Args.Path), nil
		}),
		sdk.NewStructuredTool("stat", "Stat a file.", func(_ context.Context, r *sdk.Request[pathArgs]) (stat, error) {
			return stat{Size: len(r.Args.Path)}, nil
		}),
	}}
}

// run runs src through the code group as agent_1's call script-1.
func run(t testing.TB, svc *service, src string) *toolhost.Result {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"script": src})
	res, err := codemode.Group(svc).Call(context.Background(), &toolhost.CallRequest{Tool: "run_script", Arguments: args,
		Context: toolhost.CallContext{CallID: "script-1", AgentID: "agent_1", Role: "r", Credential: "token/r/1"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestRunScript(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		stdout    string        // of a script that succeeds, or what a failed one printed
		code      toolhost.Code // of one that fails
		msg       string
	}{
		{"text and structured content", `result = [cat(path = "a"), stat(path = "abc")]`, `{"result":["contents of a",{"size":3}]}`, "", ""},
		{"a failed call as a value", `r = cat(path = "missing")` + "\nresult = [failed(r), r]", `{"result":[true,{"error":{"code":"tool_exec","message":"no such file"},"output":"partial"}]}`, "", ""},
		{"failed on other values", `result = [failed({}), failed("error"), failed({"error": 1})]`, `{"result":[false,false,false]}`, "", ""},
		{"printed only", `print("hi")`, `{"printed":"hi\n"}`, "", ""},
		{"nothing", `x = 1`, `{}`, "", ""},
		{"call by name", `result = call("stat", path = "ab")["size"]`, `{"result":2}`, "", ""},
		{"json", `result = json.decode(json.encode({"a": [1, 2]}))`, `{"result":{"a":[1,2]}}`, "", ""},
		{"a syntax error", `result = (`, "", toolhost.CodeValidation, "code: script:1:"},
		{"an error while it runs", "print(\"before\")\nresult = 1 // 0", "before\n", toolhost.CodeToolExec, "floored division by zero"},
		{"arguments by position", `result = cat("a")`, "", toolhost.CodeToolExec, "cat: takes its arguments by name"},
		{"a result that is not JSON", "def f():\n  pass\nresult = f", "", toolhost.CodeValidation, "code: result: "},
		{"parallel's items", `result = parallel([("cat",)])`, "", toolhost.CodeToolExec, "parallel: item 0: want a pair"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, &service{group: files()}, tt.src)
			switch {
			case tt.code == "" && (!res.OK || res.Stdout != tt.stdout):
				t.Errorf("%+v %q, want %s", res.Error, res.Stdout, tt.stdout)
			case tt.code != "" && (res.OK || res.Error.Code != tt.code || !strings.Contains(res.Error.Message, tt.msg) || res.Stdout != tt.stdout):
				t.Errorf("%+v %q, want %s %q and %q", res.Error, res.Stdout, tt.code, tt.msg, tt.stdout)
			}
		})
	}
}

// TestInnerCallsAreTheCallers: a script's calls carry its caller's
// context, a new call id each, and its call id as their parent.
func TestInnerCallsAreTheCallers(t *testing.T) {
	svc := &service{group: files()}
	if res := run(t, svc, `result = parallel([(cat, {"path": "a"}), ("stat", {"path": "b"})])`); !res.OK {
		t.Fatalf("%+v", res.Error)
	}
	if len(svc.sent) != 2 {
		t.Fatalf("sent %d calls", len(svc.sent))
	}
	for _, req := range svc.sent {
		cc := req.Context
		if cc.CallID != "" || cc.ParentID != "script-1" || cc.AgentID != "agent_1" || cc.Role != "r" || cc.Credential != "token/r/1" {
			t.Errorf("%s: context %+v", req.Tool, cc)
		}
	}
}

func TestResultKeepsMarkup(t *testing.T) {
	res := run(t, &service{group: files()}, `result = "<a href='x'>&</a>"`)
	if !res.OK || res.Stdout != `{"result":"<a href='x'>&</a>"}` {
		t.Errorf("%+v %s", res.Error, res.Stdout)
	}
}

// TestMemoryBound: a script that allocates more than its memory bound,
// in one step or in a few, fails naming the bound, and the memory is not
// the host's: this process's peak resident set barely grows.
func TestMemoryBound(t *testing.T) {
	svc := &service{group: files(), bounds: rules.CodeBounds{Memory: 64 << 20, Steps: 1 << 40}}
	for _, tt := range []struct{ name, src string }{
		{"one step", `x = [0] * 40000000`},
		{"join", "s = \"x\" * 1000000\nt = \",\".join([s] * 1000)"},
		{"a builtin", `x = list(range(40000000))`},
		{"doubling", "s = \"x\" * 1024\nfor i in range(30):\n  s = s + s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := peakRSS(t)
			res := run(t, svc, tt.src)
			if res.OK || res.Error.Code != toolhost.CodePolicy || res.Error.Message != "code: memory: the script needed more than 64MiB" {
				t.Fatalf("%+v", res.Error)
			}
			if grown := peakRSS(t) - before; grown > 100<<20 {
				t.Errorf("this process's peak RSS grew by %d MiB", grown>>20)
			}
		})
	}
	// The runner that ran out of memory took nothing with it.
	if res := run(t, svc, `result = cat(path = "a")`); !res.OK || res.Stdout != `{"result":"contents of a"}` {
		t.Errorf("%+v %s", res.Error, res.Stdout)
	}
}

// peakRSS is this process's peak resident set size (VmHWM), in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// BenchmarkRunScript is the latency of a trivial script making one inner
// call.
func BenchmarkRunScript(b *testing.B) {
	svc := &service{group: files()}
	for b.Loop() {
		if res := run(b, svc, `result = cat(path = "a")`); !res.OK {
			b.Fatalf("%+v", res.Error)
		}
	}
}

// TestDeepValues: a value nested deeper than 64 levels fails the script
// with the bound's error, where it would leave the script (its result) or
// be written or read recursively (str, repr, print, json), never
// recursing through it nor dropping it silently.
func TestDeepValues(t *testing.T) {
	nest := func(n int) string { return fmt.Sprintf("x = []\nfor i in range(%d):\n    x = [x]\n", n) }
	for _, tt := range []struct {
		name, src string
		msg       string // of the error; "" when the script succeeds
	}{
		{"a result at the bound", nest(63) + "result = x", ""},
		{"a deep result", nest(2000) + "result = x", "code: output: the result nests 2001 levels, more than 64"},
		{"a very deep result", nest(10000) + "result = x", "code: output: the result nests 10001 levels, more than 64"},
		{"a result in a dict", nest(100) + `result = {"a": x}`, "code: output: the result nests 102 levels, more than 64"},
		{"deep JSON decoded", `x = json.decode("[" * 100000 + "]" * 100000)` + "\nresult = 1", "code: depth: json.decode's input nests 100000 levels, more than 64"},
		{"deep JSON as the result", `result = json.decode("[" * 100000 + "]" * 100000)`, "code: depth: json.decode's input nests 100000 levels"},
		{"JSON at the bound", `result = len(json.decode("[" * 64 + "]" * 64))`, ""},
		{"json.encode", nest(100000) + "y = json.encode(x)", "code: depth: json.encode's argument nests 100001 levels, more than 64"},
		{"str", nest(100000) + "y = str(x)", "code: depth: str's argument nests 100001 levels"},
		{"repr", nest(100000) + "y = repr((x, 1))", "code: depth: repr's argument nests 100002 levels"},
		{"print", nest(100000) + "print(1, x)", "code: depth: print's argument nests 100001 levels"},
		{"a tuple and a slice of it", "x = ()\nfor i in range(100):\n    x = (1, x)\nresult = (x[:1], x)", "code: output: the result nests 102 levels, more than 64"},
		{"print of a value that holds itself", "x = [1]\nx.append(x)\nprint(x)\nresult = len(x)", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, &service{group: files()}, tt.src)
			switch {
			case tt.msg == "" && !res.OK:
				t.Errorf("%+v", res.Error)
			case tt.msg != "" && (res.OK || res.Error.Code != toolhost.CodePolicy || !strings.Contains(res.Error.Message, tt.msg)):
				t.Errorf("%+v %.200q, want policy %q", res.Error, res.Stdout, tt.msg)
			}
		})
	}
}

// TestTimeoutDuringACall: a script whose time is up while a call of it
// runs fails with the timeout, though the call returned its own timeout
// error (which the script could return as its result) at the deadline,
// its own timer, as a plugin's, having fired before the script's.
func TestTimeoutDuringACall(t *testing.T) {
	g := &sdk.Group{ID: "slow", Tools: []sdk.Tool{
		sdk.NewTool("wait", "Wait until the call's deadline.", func(ctx context.Context, _ *sdk.Request[struct{}]) (*sdk.Result, error) {
			dl, _ := ctx.Deadline()
			<-time.After(time.Until(dl)) // the plugin's own timer
			return sdk.Fail(&sdk.Result{}, sdk.CodeTimeout, "the command timed out"), nil
		}),
	}}
	for i := range 5 {
		res := run(t, &service{group: g, bounds: rules.CodeBounds{Timeout: time.Second}}, "r = wait()\nresult = r")
		if res.OK || res.Error.Code != toolhost.CodeTimeout || res.Error.Message != "code: timeout: the script ran longer than 1s" {
			t.Fatalf("run %d: %+v %s", i, res.Error, res.Stdout)
		}
	}
}

// TestTimeoutBeforeTheRunner: a time so short that it is up before the
// script's runner has started fails the script with the timeout, as a
// longer one does, not as the host's own error.
func TestTimeoutBeforeTheRunner(t *testing.T) {
	res := run(t, &service{group: &sdk.Group{ID: "none"}, bounds: rules.CodeBounds{Timeout: time.Nanosecond}}, "result = 1")
	if res.OK || res.Error.Code != toolhost.CodeTimeout || res.Error.Message != "code: timeout: the script ran longer than 1ns" {
		t.Fatalf("%+v %s", res.Error, res.Stdout)
	}
}

// TestLongErrors: a script's error message, its own or Starlark's naming
// a value of it, is cut to the output bound, saying so.
func TestLongErrors(t *testing.T) {
	const bound = 4096
	for _, src := range []string{
		`fail("a" * 1000000)`,
		`x = {}["a" * 1000000]`,
		`x = int("a" * 1000000)`,
		`x = getattr(1, "a" * 1000000)`,
		"def f(n):\n    fail(\"a\" * n)\nf(1000000)",
	} {
		res := run(t, &service{group: files(), bounds: rules.CodeBounds{Output: bound}}, src)
		if res.OK || res.Error.Code != toolhost.CodeToolExec || len(res.Error.Message) > bound+200 ||
			!strings.HasSuffix(res.Error.Message, "more than the output bound of 4096)") {
			t.Errorf("%s: %d bytes: %.100s … %.200s", src, len(res.Error.Message), res.Error.Message, res.Error.Message[max(0, len(res.Error.Message)-200):])
		}
	}
}

// TestOutputBoundAfterRedaction: the output bound holds for the text as
// the host returns it, redacted, which can be longer than the script's.
func TestOutputBoundAfterRedaction(t *testing.T) {
	svc := &service{group: files(), bounds: rules.CodeBounds{Output: 4096}}
	res := run(t, svc, `result = ["K_KEY=a"] * 400`)
	if res.OK || res.Error.Code != toolhost.CodePolicy || !strings.Contains(res.Error.Message, "code: output: the script returned") {
		t.Errorf("%+v, %d bytes", res.Error, len(res.Stdout))
	}
	if res := run(t, svc, `result = ["K_KEY=a"] * 100`); !res.OK {
		t.Errorf("%+v", res.Error)
	}
}
