package codemode

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/rules"
)

// echo serves every call with its arguments as text.
type echo struct{}

func (echo) Tools(host.ToolQuery) (host.ToolList, error) { return host.ToolList{}, nil }

func (echo) Call(_ context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	return &toolhost.Result{OK: true, Stdout: string(req.Arguments)}, nil
}

func (echo) CodeBounds(string) rules.CodeBounds { return rules.DefaultCodeBounds() }

// discard is a runner's stdin that keeps nothing.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

// TestHostTrustsNoRunner: what a runner sends is checked again by the
// host, whatever the runner's own checks: a runner that lies about its
// calls, its tools, its output or its errors fails the script.
func TestHostTrustsNoRunner(t *testing.T) {
	bounds := rules.CodeBounds{Calls: 2, Output: 100, Parallel: 1}.Over(rules.DefaultCodeBounds())
	call := `{"id":1,"tool":"cat","args":{}}` + "\n"
	for _, tt := range []struct {
		name, lines string
		code        toolhost.Code
		msg         string
	}{
		{"more calls than the bound", strings.Repeat(call, 3), toolhost.CodePolicy, "code: calls: the script made more than 2 tool calls"},
		{"a tool not the caller's", `{"id":1,"tool":"rm","args":{}}` + "\n", toolhost.CodeInternal, `a call of "rm", not one of the caller's tools`},
		{"arguments not an object", `{"id":1,"tool":"cat","args":[1]}` + "\n", toolhost.CodeInternal, "arguments are not an object"},
		{"printed past the output bound", strings.Repeat(`{"print":"0123456789"}`+"\n", 10), toolhost.CodePolicy, "code: output: the script printed more than 100 bytes"},
		{"a result past the output bound", `{"end":true,"result":"` + strings.Repeat("x", 100) + `"}` + "\n", toolhost.CodePolicy, "code: output: the script returned 113 bytes, more than 100"},
		{"a result that is not JSON", `{"end":true,"result":nope}` + "\n", toolhost.CodeInternal, "a line that is not a message"},
		{"an error of a code a script has not", `{"end":true,"error":{"code":"approval_denied","message":"x"}}` + "\n", toolhost.CodeInternal, `an error of code "approval_denied"`},
		{"a line past every bound", strings.Repeat("x", bounds.Output+maxArgs+5000) + "\n", toolhost.CodeInternal, "a line longer than"},
		{"not a message", "{}\n", toolhost.CodeInternal, "neither a call, a print nor the end"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &proc{svc: echo{}, bounds: bounds, ctx: context.Background(), tools: map[string]bool{"cat": true},
				sem: make(chan struct{}, 1), stdin: discard{}, stdout: bufio.NewReader(strings.NewReader(tt.lines))}
			res := h.serve()
			h.wg.Wait()
			if res.OK || res.Error.Code != tt.code || !strings.Contains(res.Error.Message, tt.msg) {
				t.Errorf("%+v, want %s %q", res.Error, tt.code, tt.msg)
			}
		})
	}
}

// gauge serves every call after a while, recording how many ran at once.
type gauge struct {
	echo
	mu        sync.Mutex
	now, most int
}

func (g *gauge) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	return g.echo.Call(ctx, req)
}

// TestHostHoldsTheParallelBound: a runner that asks for more calls at
// once than the parallel bound gets them one at a time.
func TestHostHoldsTheParallelBound(t *testing.T) {
	g := &gauge{}
	bounds := rules.CodeBounds{Parallel: 1}.Over(rules.DefaultCodeBounds())
	var lines strings.Builder
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&lines, `{"id":%d,"tool":"cat","args":{}}`+"\n", i)
	}
	lines.WriteString(`{"end":true}` + "\n")
	h := &proc{svc: g, bounds: bounds, ctx: context.Background(), tools: map[string]bool{"cat": true},
		sem: make(chan struct{}, 1), stdin: discard{}, stdout: bufio.NewReader(strings.NewReader(lines.String()))}
	if res := h.serve(); !res.OK {
		t.Fatalf("%+v", res.Error)
	}
	h.wg.Wait()
	if g.most != 1 {
		t.Errorf("%d calls ran at once, want 1", g.most)
	}
}
