package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/redact"
	"github.com/toolhost/toolhost/store"
)

// probe is an in-process group whose tools report what the executor gave them.
type probe struct {
	calls    atomic.Int32
	running  atomic.Int32
	maxConc  atomic.Int32
	lastArgs atomic.Value // json.RawMessage
	ended    chan error   // the block tool's ctx error
	late     atomic.Value // toolhost.Progress: the progress tool's, kept past its call
}

func (p *probe) Describe(context.Context, *toolhost.DescribeRequest) (*toolhost.GroupSpec, error) {
	return nil, errors.New("not used")
}
func (p *probe) Configure(context.Context, *toolhost.ConfigureRequest) error { return nil }

func (p *probe) Call(ctx context.Context, req *toolhost.CallRequest) (*toolhost.Result, error) {
	p.calls.Add(1)
	n := p.running.Add(1)
	defer p.running.Add(-1)
	for m := p.maxConc.Load(); n > m && !p.maxConc.CompareAndSwap(m, n); m = p.maxConc.Load() {
	}
	p.lastArgs.Store(req.Arguments)
	res := &toolhost.Result{OK: true}
	switch req.Tool {
	case "echo", "guarded":
		res.Stdout = string(req.Arguments)
	case "slow":
		time.Sleep(20 * time.Millisecond)
	case "block":
		<-ctx.Done()
		p.ended <- ctx.Err()
		return nil, ctx.Err()
	case "whoami":
		res.Stdout = req.Context.AgentID
	case "lines", "tail":
		var b strings.Builder
		for i := range 3000 {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		res.Stdout = b.String()
	case "leak":
		res.Stdout = "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789\nok"
		res.Meta = map[string]any{"token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"}
	case "fail": // with n bytes more of message
		var n struct{ N int }
		_ = json.Unmarshal(req.Arguments, &n)
		return toolhost.ErrorResult(toolhost.Errorf(toolhost.CodeToolExec, "it broke%s", strings.Repeat("x", n.N))), nil
	case "structured": // structured content of the size asked, with short text
		var n struct{ N int }
		_ = json.Unmarshal(req.Arguments, &n)
		res.Stdout = "short"
		res.Meta = map[string]any{toolhost.MetaStructuredContent: map[string]any{"data": strings.Repeat("x", n.N)}}
	case "flood": // n bytes of numbered lines streamed to stdout, a secret in each MiB, and a line of stderr
		var n struct{ N int }
		_ = json.Unmarshal(req.Arguments, &n)
		out := toolhost.OutputFrom(ctx)
		if out == nil {
			return toolhost.ErrorResult(toolhost.Errorf(toolhost.CodeInternal, "no output to stream to")), nil
		}
		_ = out(true, []byte("starting\n"))
		for b := floodLines(n.N); len(b) > 0; {
			k := min(len(b), 64<<10)
			_ = out(false, b[:k])
			b = b[k:]
		}
		res.Stdout = "done\n"
	case "progress": // a flood of long reports carrying a secret
		if report := toolhost.ProgressFrom(ctx); report != nil {
			for i := range 1000 {
				report(float64(i+1), 1000, strings.Repeat("x", 4000)+" OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789")
			}
			p.late.Store(report)
		}
	}
	return res, nil
}

const probeSchema = `{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"}},"additionalProperties":false}`

// probeHost starts a host with the probe registered as group "probe".
func probeHost(t testing.TB, cfg *config.Config, opts *Options) (*Host, *probe) {
	t.Helper()
	if cfg == nil {
		cfg = &config.Config{}
	}
	if cfg.Limits == (config.Limits{}) {
		cfg.Limits = config.Limits{Timeout: 10 * time.Second, MaxOutputLines: 2000, MaxOutputBytes: 51200}
	}
	if cfg.Executor.IdempotencyWindow == 0 {
		cfg.Executor = config.Executor{Mode: "sequential", MaxParallel: 4, Approver: "approve", ApprovalTimeout: time.Minute, IdempotencyWindow: time.Hour}
	}
	h := runHost(t, cfg, opts)
	p := &probe{ended: make(chan error, 1)}
	spec := toolhost.GroupSpec{ID: "probe", Description: "probe"}
	for _, name := range []string{"echo", "slow", "block", "lines", "leak", "fail", "progress", "structured"} {
		spec.Tools = append(spec.Tools, toolhost.ToolSpec{Name: name, Description: name, InputSchema: []byte(probeSchema)})
	}
	spec.Tools = append(spec.Tools,
		toolhost.ToolSpec{Name: "guarded", Description: "needs approval", InputSchema: []byte(probeSchema), RequiresApproval: true},
		toolhost.ToolSpec{Name: "whoami", Description: "needs an agent", InputSchema: []byte(probeSchema), NeedsAgent: true},
		toolhost.ToolSpec{Name: "tail", Description: "command-like output", InputSchema: []byte(probeSchema), OutputTail: true},
		toolhost.ToolSpec{Name: "flood", Description: "streamed output", InputSchema: []byte(probeSchema), OutputTail: true},
	)
	if err := h.register(&Group{Spec: spec, Kind: SourceRuntime, SourceName: "probe", Provider: p}); err != nil {
		t.Fatal(err)
	}
	return h, p
}

func do(h *Host, tool, args, callID string) (*toolhost.Result, error) {
	return h.Call(context.Background(), &toolhost.CallRequest{Tool: tool, Arguments: []byte(args), Context: toolhost.CallContext{CallID: callID}})
}

func TestValidationNamesFieldAndRule(t *testing.T) {
	h, p := probeHost(t, nil, nil)
	for args, want := range map[string]string{
		`{"text": 3}`:             `field text: type: 3 has type "integer", want "string"`,
		`{"text": "a", "n": "x"}`: `field n: type: x has type "string", want "integer"`,
		`{"colour": "blue"}`:      `unexpected additional properties ["colour"]`,
		`[1]`:                     `arguments must be a JSON object`,
		`{"text": `:               `arguments are not JSON`,
	} {
		_, err := do(h, "echo", args, "")
		if !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want validation containing %q", args, err, want)
		}
	}
	if p.calls.Load() != 0 {
		t.Fatalf("invalid calls reached the tool %d times", p.calls.Load())
	}
}

func TestApprovers(t *testing.T) {
	t.Run("deny", func(t *testing.T) {
		h, p := probeHost(t, nil, &Options{Approver: AlwaysDeny{Reason: "not today"}})
		_, err := do(h, "guarded", `{}`, "")
		if !errors.Is(err, toolhost.ErrApprovalDenied) || !strings.Contains(err.Error(), "not today") {
			t.Fatalf("err = %v", err)
		}
		if res, err := do(h, "echo", `{}`, ""); err != nil || !res.OK || p.calls.Load() != 1 {
			t.Fatalf("a tool without approval: %+v, %v", res, err)
		}
	})
	t.Run("queue", func(t *testing.T) {
		q := newApprovalQueue(time.Minute)
		h, p := probeHost(t, nil, &Options{Approver: q})
		decide := func(d Decision, args string) (*toolhost.Result, error) {
			type out struct {
				res *toolhost.Result
				err error
			}
			done := make(chan out, 1)
			go func() {
				res, err := do(h, "guarded", args, "")
				done <- out{res, err}
			}()
			proctest.Eventually(t, "the call is pending", func() bool { return len(q.Pending()) == 1 })
			pend := q.Pending()[0]
			if pend.Tool != "guarded" || pend.Group != "probe" || string(pend.Arguments) != args {
				t.Fatalf("pending = %+v", pend)
			}
			if err := q.Decide(pend.ID, d); err != nil {
				t.Fatal(err)
			}
			if err := q.Decide(pend.ID, d); !errors.Is(err, toolhost.ErrValidation) {
				t.Fatalf("deciding twice: %v", err)
			}
			o := <-done
			return o.res, o.err
		}
		if res, err := decide(Decision{Kind: Approve}, `{"text":"a"}`); err != nil || res.Stdout != `{"text":"a"}` {
			t.Fatalf("approved: %+v, %v", res, err)
		}
		if res, err := decide(Decision{Kind: Modify, Arguments: json.RawMessage(`{"text":"b"}`)}, `{"text":"a"}`); err != nil || res.Stdout != `{"text":"b"}` {
			t.Fatalf("modified: %+v, %v", res, err)
		}
		if _, err := decide(Decision{Kind: Modify, Arguments: json.RawMessage(`{"text":1}`)}, `{"text":"a"}`); !errors.Is(err, toolhost.ErrValidation) {
			t.Fatalf("modified to invalid arguments: %v", err)
		}
		if _, err := decide(Decision{Kind: Deny, Reason: "looks risky"}, `{}`); !errors.Is(err, toolhost.ErrApprovalDenied) || !strings.Contains(err.Error(), "looks risky") {
			t.Fatalf("denied: %v", err)
		}
		if p.calls.Load() != 2 {
			t.Fatalf("the tool ran %d times, want 2", p.calls.Load())
		}
		if err := q.Decide("nope", Decision{Kind: "maybe"}); !errors.Is(err, toolhost.ErrValidation) {
			t.Fatalf("bad decision: %v", err)
		}
	})
	t.Run("queue timeout denies", func(t *testing.T) {
		h, _ := probeHost(t, nil, &Options{Approver: newApprovalQueue(50 * time.Millisecond)})
		if _, err := do(h, "guarded", `{}`, ""); !errors.Is(err, toolhost.ErrApprovalDenied) || !strings.Contains(err.Error(), "no decision within 50ms") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestIdempotency(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{DataDir: dir}
	h, p := probeHost(t, cfg, nil)
	first, err := do(h, "echo", `{"text":"x","n":1}`, "call-1")
	if err != nil || first.Meta["replayed"] != nil {
		t.Fatalf("first: %+v, %v", first, err)
	}
	again, err := do(h, "echo", `{"n":1, "text":"x"}`, "call-1") // same arguments, other key order
	if err != nil || again.Stdout != first.Stdout || again.Meta["replayed"] != true || p.calls.Load() != 1 {
		t.Fatalf("repeat: %+v, %v (tool ran %d times)", again, err, p.calls.Load())
	}
	if _, err := do(h, "echo", `{"text":"y"}`, "call-1"); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("same id, other arguments: %v", err)
	}
	// The audit log tells the replay from the run: only the second
	// completion is marked, naming the call that ran; the refused third is
	// no replay.
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ended, _ := h.Events().List(context.Background(), store.EventFilter{Call: "call-1", Type: "tool_call."})
	var marks []string
	for _, e := range ended {
		if e.Type != store.EventCallStarted {
			marks = append(marks, fmt.Sprintf("%s %v %v", e.Type, e.Payload["replayed"], e.Payload["replay_of"]))
		}
	}
	if want := []string{"tool_call.completed <nil> <nil>", "tool_call.completed true call-1", "tool_call.failed <nil> <nil>"}; !slices.Equal(marks, want) {
		t.Fatalf("terminal events of call-1: %q, want %q", marks, want)
	}
	// Concurrent duplicates run once.
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if res, err := do(h, "slow", `{}`, "call-2"); err != nil || !res.OK {
				t.Errorf("duplicate: %+v, %v", res, err)
			}
		})
	}
	wg.Wait()
	if p.calls.Load() != 2 {
		t.Fatalf("the tool ran %d times, want 2", p.calls.Load())
	}
	// A call that could not be carried out is not stored: a retry runs.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Call(ctx, &toolhost.CallRequest{Tool: "block", Context: toolhost.CallContext{CallID: "call-3"}}); !errors.Is(err, toolhost.ErrCancelled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// After a restart, the stored result is replayed.
	h2, p2 := probeHost(t, cfg, nil)
	if res, err := do(h2, "echo", `{"text":"x","n":1}`, "call-1"); err != nil || res.Stdout != first.Stdout || res.Meta["replayed"] != true || p2.calls.Load() != 0 {
		t.Fatalf("after restart: %+v, %v (ran %d)", res, err, p2.calls.Load())
	}
	go func() { <-p2.ended }()
	if res, err := do(h2, "echo", `{}`, "call-3"); err != nil || res.Meta["replayed"] != nil || p2.calls.Load() != 1 {
		t.Fatalf("retry of a failed call: %+v, %v", res, err)
	}
}

// TestHostileCallIDsAreRefused: a call id a caller chooses goes into the
// audit events, the stored results and the plugin's request, so one with a
// NUL, another control character (a forged line in a log), invalid UTF-8,
// a megabyte of text or a secret (which the id's refusal does not repeat)
// is refused with validation, naming call_id, before anything runs; the
// refusal is audited under an id the host chose.
func TestHostileCallIDsAreRefused(t *testing.T) {
	h, p := probeHost(t, nil, nil)
	for id, want := range map[string]string{
		"x\x00y":                   "a control character (U+0000) at byte 1",
		"ok\ntool_call.completed":  "a control character (U+000A) at byte 2",
		"\xff":                     "not valid UTF-8",
		strings.Repeat("a", 1<<20): "1048576 bytes; at most 256",
		secretToolName:             "holds what looks like a secret",
	} {
		_, err := do(h, "echo", `{"text":"x"}`, id)
		if !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "call_id: "+want) || strings.Contains(err.Error(), "sk-") {
			t.Errorf("call id %.20q: %v; want validation %q", id, err, want)
		}
	}
	if n := p.calls.Load(); n != 0 {
		t.Fatalf("the tool ran %d times", n)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, _ := h.Events().List(context.Background(), store.EventFilter{Type: "tool_call.", Limit: 100})
	if len(evs) != 10 {
		t.Fatalf("%d events, want a started and a failed for each of the 5 calls", len(evs))
	}
	for _, e := range evs {
		if !strings.HasPrefix(e.CallID, "call_") || len(e.CallID) > 64 {
			t.Fatalf("event %s under call id %.40q, want one the host chose", e.Type, e.CallID)
		}
	}
	// A printable id of any script, at the limit, is fine.
	if _, err := do(h, "echo", `{"text":"x"}`, "调用-"+strings.Repeat("é", 124)+"x"); err != nil {
		t.Fatalf("a printable id: %v", err)
	}
}

// TestLongToolNamesAreCut: a caller naming a tool with a megabyte of text
// gets unknown_tool, and neither the error nor the audit events carry the
// megabyte: each such call would otherwise store it three times over.
func TestLongToolNamesAreCut(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	ctx := context.Background()
	name := "echo" + strings.Repeat("\u00e9", 1<<19) // 1 MiB + 4 bytes
	_, err := h.Call(ctx, &toolhost.CallRequest{Tool: name, Arguments: []byte(`{}`)})
	if !errors.Is(err, toolhost.ErrUnknownTool) || len(err.Error()) > 200 || !strings.Contains(err.Error(), "(1048580 bytes)") {
		t.Fatalf("a 1 MiB tool name: %.300v; want unknown_tool naming its first bytes and its length", err)
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, _ := h.Events().List(ctx, store.EventFilter{Type: "tool_call.", Limit: 10})
	if len(evs) != 2 {
		t.Fatalf("%d events, want a started and a failed", len(evs))
	}
	for _, e := range evs {
		if b, _ := json.Marshal(e); len(b) > 1000 || !utf8.ValidString(e.Tool) || !strings.HasPrefix(e.Tool, "echo\u00e9") {
			t.Fatalf("event %s: %d bytes, tool %.80q", e.Type, len(b), e.Tool)
		}
	}
	// A name at the limit is a name like any other.
	if got := cutToolName(strings.Repeat("a", maxToolNameShown)); got != strings.Repeat("a", maxToolNameShown) {
		t.Fatalf("cutToolName cut a 64-byte name: %q", got)
	}
}

// secretToolName is a caller's secret sent where a tool's name (or a call
// id) goes.
const secretToolName = "sk-WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW"

// TestSecretToolNamesAreRedacted: a caller sending a secret as a tool's
// name gets unknown_tool naming it redacted, and the call's events keep it
// redacted too (their tool and payload), as they do one longer than any
// tool's name, cut after its redaction.
func TestSecretToolNamesAreRedacted(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	ctx := context.Background()
	for _, name := range []string{secretToolName, secretToolName + strings.Repeat("W", 200)} {
		_, err := h.Call(ctx, &toolhost.CallRequest{Tool: name, Arguments: []byte(`{}`)})
		if !errors.Is(err, toolhost.ErrUnknownTool) || strings.Contains(err.Error(), "sk-") || !strings.Contains(err.Error(), "REDACTED") {
			t.Fatalf("a secret as a tool's name: %v; want unknown_tool naming it redacted", err)
		}
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, _ := h.Events().List(ctx, store.EventFilter{Type: "tool_call.", Limit: 10})
	if len(evs) != 4 {
		t.Fatalf("%d events, want a started and a failed for each of the 2 calls", len(evs))
	}
	for _, e := range evs {
		if b, _ := json.Marshal(e); strings.Contains(string(b), "WWWWWWWW") || !strings.Contains(e.Tool, "REDACTED") {
			t.Fatalf("event %s keeps the secret: %s", e.Type, b)
		}
	}
}

// TestCallIDsAreTheRolesOwn: a role repeating a call id another role (or an
// operator) used gets a validation error, not the other's stored result.
func TestCallIDsAreTheRolesOwn(t *testing.T) {
	h, p := probeHost(t, nil, nil)
	ctx := context.Background()
	for _, name := range []string{"alice", "mallory"} {
		if _, err := h.Roles().Create(ctx, RoleSpec{Name: name, ToolGroups: []string{"probe"}}); err != nil {
			t.Fatal(err)
		}
	}
	asWith := func(role, cred, id string) (*toolhost.Result, error) {
		return h.Call(ctx, &toolhost.CallRequest{Tool: "echo", Arguments: []byte(`{"text":"secret"}`), Context: toolhost.CallContext{CallID: id, Role: role, Credential: cred}})
	}
	as := func(role, id string) (*toolhost.Result, error) { return asWith(role, "token/"+role+"/1", id) }
	first, err := as("alice", "c-1")
	if err != nil || !first.OK {
		t.Fatalf("alice: %+v, %v", first, err)
	}
	for _, role := range []string{"mallory", ""} {
		if res, err := as(role, "c-1"); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "already used") {
			t.Errorf("role %q repeating alice's call id: %+v, %v; want validation", role, res, err)
		}
	}
	// Another token of alice's role: the same call, not her result.
	if res, err := asWith("alice", "token/alice-2/2", "c-1"); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "already used") {
		t.Errorf("another token of alice's role repeating her call id: %+v, %v; want validation", res, err)
	}
	if res, err := as("alice", "c-1"); err != nil || res.Meta["replayed"] != true || p.calls.Load() != 1 {
		t.Fatalf("alice repeating her own: %+v, %v (ran %d)", res, err, p.calls.Load())
	}
}

func TestIdempotencyWindow(t *testing.T) {
	cfg := &config.Config{Executor: config.Executor{Approver: "approve", IdempotencyWindow: time.Nanosecond}}
	h, p := probeHost(t, cfg, nil)
	do(h, "echo", `{}`, "old")
	proctest.Eventually(t, "the result is saved", func() bool {
		_, saving := h.flights.m.Load("old") // in memory until saved
		_, err := h.store.CallResult(context.Background(), "old", time.Time{})
		return err == nil && !saving
	})
	if res, err := do(h, "echo", `{}`, "old"); err != nil || res.Meta["replayed"] != nil || p.calls.Load() != 2 {
		t.Fatalf("a call id past the window: %+v, %v (ran %d)", res, err, p.calls.Load())
	}
	proctest.Eventually(t, "the second result is saved", func() bool { _, saving := h.flights.m.Load("old"); return !saving })
	h.pruneCallResults(context.Background())
	if _, err := h.store.CallResult(context.Background(), "old", time.Time{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a result past the window was not pruned: %v", err)
	}
}

func TestNeedsAgent(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	if _, err := do(h, "whoami", `{}`, ""); !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), "needs the calling agent") {
		t.Fatalf("without an agent: %v", err)
	}
	agent, err := h.Agents().Create(context.Background(), store.RootRole, store.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Roles().Create(context.Background(), RoleSpec{Name: "any"}); err != nil {
		t.Fatal(err)
	}
	agent, _ = h.Agents().Create(context.Background(), "any", store.Agent{})
	res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "whoami", Context: toolhost.CallContext{AgentID: agent.ID}})
	if err != nil || res.Stdout != agent.ID {
		t.Fatalf("with an agent: %+v, %v", res, err)
	}
}

func TestOutputLimits(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	res, err := do(h, "lines", `{}`, "")
	if err != nil || !res.TruncatedLines || !strings.HasPrefix(res.Stdout, "line 0\n") || strings.Count(res.Stdout, "\n") != 2000 {
		t.Fatalf("head: truncated=%v, %d lines, %v", res.TruncatedLines, strings.Count(res.Stdout, "\n"), err)
	}
	if res.Meta["full_output"] != nil {
		t.Fatal("a read's full output was saved")
	}
	res, err = do(h, "tail", `{}`, "tail-1")
	if err != nil || !res.TruncatedLines || !strings.HasSuffix(res.Stdout, "line 2999\n") || !res.TruncatedBytes == (len(res.Stdout) > 51200) {
		t.Fatalf("tail: %v, %d bytes, %v", res.TruncatedLines, len(res.Stdout), err)
	}
	path, _ := res.Meta["full_output"].(string)
	full, err := os.ReadFile(path)
	if err != nil || strings.Count(string(full), "\n") != 3000 || !strings.HasPrefix(string(full), "line 0\n") {
		t.Fatalf("full output at %q: %d lines, %v", path, strings.Count(string(full), "\n"), err)
	}
}

// floodLines is n bytes of numbered lines, each MiB starting with a secret.
func floodLines(n int) []byte {
	b := make([]byte, 0, n+64)
	for i := 0; len(b) < n; i++ {
		if len(b)%(1<<20) < 16 {
			b = append(b, "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"...)
		}
		b = fmt.Appendf(b, "line %d\n", i)
	}
	return b[:n]
}

// TestStreamedOutput: a tool that keeps its output's end streams it, and
// the host keeps in memory only what the result's limits need: the result
// is the end of the output, and the saved output the last 8 MiB of stdout
// (then stderr), redacted, whether the spool's file filled or not; no
// spool file is left.
func TestStreamedOutput(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	for _, n := range []int{100 << 10, 3 << 20, 10 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			res, err := do(h, "flood", fmt.Sprintf(`{"n": %d}`, n), fmt.Sprint("flood-", n))
			if err != nil {
				t.Fatal(err)
			}
			want := string(floodLines(n)) + "done\n"
			if !res.TruncatedLines || len(res.Stdout) > 51200 || !strings.HasSuffix(want, res.Stdout) || res.Stderr != "starting\n" {
				t.Errorf("result: truncated lines %v, %d bytes of stdout, a suffix %v, stderr %q", res.TruncatedLines, len(res.Stdout), strings.HasSuffix(want, res.Stdout), res.Stderr)
			}
			path, _ := res.Meta["full_output"].(string)
			full, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("full output at %q: %v (meta %v)", path, err, res.Meta)
			}
			want, _ = redact.String(want[max(0, len(want)-maxSavedStream):])
			if string(full) != want+"\n--- stderr ---\nstarting\n" {
				t.Errorf("the saved output has %d bytes, starting %.40q; want %d bytes, starting %.40q", len(full), full, len(want), want)
			}
			if res.Meta["redacted"] != true || strings.Contains(string(full), "ghp_") {
				t.Errorf("the secret is not redacted: meta %v", res.Meta)
			}
			if left, _ := filepath.Glob(filepath.Join(h.store.Dir(), "outputs", tmpPrefix+"*")); len(left) > 0 {
				t.Errorf("files left: %v", left)
			}
		})
	}
}

// TestCallIDIsNeverAPath: a caller-chosen call id that reads as a path
// names a file inside data_dir/outputs like any other id; nothing is
// written where the path points (before, "../escaped" wrote
// data_dir/escaped.log, and "../../../../tmp/x/pwned" /tmp/x/pwned.log).
func TestCallIDIsNeverAPath(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	outputs := filepath.Join(h.store.Dir(), "outputs")
	for _, id := range []string{"../escaped", "../../escaped-further", "/abs/escaped", "a/../../escaped-inside", "..", ".", "x/", "ok-id"} {
		t.Run(id, func(t *testing.T) {
			res, err := do(h, "tail", `{}`, id)
			if err != nil {
				t.Fatal(err)
			}
			path, _ := res.Meta["full_output"].(string)
			if filepath.Dir(path) != outputs || !regexp.MustCompile(`^[0-9a-f]{32}\.log$`).MatchString(filepath.Base(path)) {
				t.Fatalf("saved at %q, want a hashed name in %s", path, outputs)
			}
			if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("saved output %s: %v", path, err)
			}
			if where := filepath.Join(outputs, id+".log"); filepath.Dir(where) != outputs {
				if _, err := os.Lstat(where); err == nil {
					t.Fatalf("the id %q wrote %s", id, where)
				}
			}
		})
	}
}

// FuzzOutputName: whatever the call id, its output's file is one hashed
// name directly in the outputs directory.
func FuzzOutputName(f *testing.F) {
	for _, id := range []string{"", "..", "../../../../tmp/x/pwned", "/etc/passwd", "a\x00b", "call_0123"} {
		f.Add(id)
	}
	name := regexp.MustCompile(`^[0-9a-f]{32}\.log$`)
	f.Fuzz(func(t *testing.T, id string) {
		dir := "/data/outputs"
		if p := filepath.Join(dir, outputName(id)); filepath.Dir(p) != dir || !name.MatchString(filepath.Base(p)) {
			t.Fatalf("id %q: output at %q", id, p)
		}
	})
}

// TestStructuredContentIsHeldToTheByteLimit: a module's structured content
// past the byte limit is dropped, as its text would be cut; within it, it
// is kept.
func TestStructuredContentIsHeldToTheByteLimit(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	for n, kept := range map[int]bool{100: true, 60000: false} {
		res, err := do(h, "structured", fmt.Sprintf(`{"n": %d}`, n), "")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := res.Meta[toolhost.MetaStructuredContent]; ok != kept || res.TruncatedBytes == kept || (res.Meta[toolhost.MetaStructuredContentCut] == true) == kept {
			t.Errorf("%d bytes: structured content kept %v, truncated %v; want kept %v", n, ok, res.TruncatedBytes, kept)
		}
	}
}

func TestRedaction(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	res, err := do(h, "leak", `{"text":"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`, "leak-1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, "sk-proj") || !strings.Contains(res.Stdout, "***REDACTED***") || res.Meta["redacted"] != true ||
		res.Meta["token"] != "***REDACTED***" {
		t.Fatalf("result = %+v", res)
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, _ := h.Events().List(context.Background(), store.EventFilter{Call: "leak-1"})
	for _, e := range events {
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "wJalrXUtnFEMI") || strings.Contains(string(b), "sk-proj") {
			t.Fatalf("event leaks a secret: %s", b)
		}
	}
	if len(events) != 2 || events[0].Payload["redacted"] != true || events[1].Payload["redacted"] != true {
		t.Fatalf("events = %+v", events)
	}
}

// TestProgressIsBoundedRedactedAndRecorded: a module's progress reaches
// the caller thinned to one report per 50 ms (and the final one), each
// message redacted and cut to 1 KiB, recorded as tool_call.progress events,
// and nothing after the call returned. The attack: a module floods the
// caller's stream (an MCP client, the event log) with large reports that
// carry a secret, and keeps reporting after its call.
func TestProgressIsBoundedRedactedAndRecorded(t *testing.T) {
	h, p := probeHost(t, nil, nil)
	var got []string
	ctx := toolhost.WithProgress(context.Background(), func(done, total float64, msg string) { got = append(got, msg) })
	if _, err := h.Call(ctx, &toolhost.CallRequest{Tool: "progress", Arguments: []byte(`{}`), Context: toolhost.CallContext{CallID: "progress-1"}}); err != nil {
		t.Fatal(err)
	}
	p.late.Load().(toolhost.Progress)(1, 0, "after the call")
	if len(got) == 0 || len(got) > 100 {
		t.Fatalf("%d of 1000 reports passed on, want a few", len(got))
	}
	for _, msg := range got {
		if len(msg) > maxProgressMessage || strings.Contains(msg, "sk-proj") || !strings.Contains(msg, "REDACTED") || msg == "after the call" {
			t.Fatalf("report passed on: %d bytes, %.80q…", len(msg), msg[max(0, len(msg)-80):])
		}
	}
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, _ := h.Events().List(context.Background(), store.EventFilter{Call: "progress-1", Type: store.EventCallProgress})
	if len(events) != len(got) || events[0].Payload["redacted"] != true || events[len(events)-1].Payload["progress"] != 1000.0 {
		t.Fatalf("%d progress events for %d reports: %+v", len(events), len(got), events)
	}
}

func TestEventsOfCalls(t *testing.T) {
	h, p := probeHost(t, nil, nil)
	do(h, "echo", `{"text":"hi"}`, "ok-1")
	do(h, "fail", `{}`, "fail-1")
	do(h, "echo", `{"text":1}`, "invalid-1")
	do(h, "nope", `{}`, "unknown-1")
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"ok-1": "", "fail-1": "tool_exec", "invalid-1": "validation", "unknown-1": "validation"} {
		events, err := h.Events().List(context.Background(), store.EventFilter{Call: id})
		if err != nil || len(events) != 2 || events[0].Type != store.EventCallStarted {
			t.Fatalf("%s: events %+v, %v", id, events, err)
		}
		end := events[1]
		switch {
		case want == "" && (end.Type != store.EventCallCompleted || end.Group != "probe" || end.Payload["latency_ms"] == nil):
			t.Errorf("%s: %+v", id, end)
		case want != "" && (end.Type != store.EventCallFailed || end.Payload["error_class"] != want || end.Payload["error"] == ""):
			t.Errorf("%s: %+v", id, end)
		}
	}
	started, _ := h.Events().List(context.Background(), store.EventFilter{Call: "ok-1", Type: store.EventCallStarted})
	if started[0].Payload["arguments"] != `{"text":"hi"}` {
		t.Fatalf("started = %+v", started[0])
	}
	_ = p
}

// TestEventKeepsLongErrorsCut: the error message a tool_call.failed
// event records is cut at 4 KiB, as arguments are, and marked so.
func TestEventKeepsLongErrorsCut(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	do(h, "fail", `{"n":1000000}`, "long-1")
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	events, err := h.Events().List(context.Background(), store.EventFilter{Call: "long-1", Type: store.EventCallFailed})
	if err != nil || len(events) != 1 {
		t.Fatalf("%d events, %v", len(events), err)
	}
	if msg, _ := events[0].Payload["error"].(string); len(msg) != 4<<10 || !strings.HasPrefix(msg, "it brokex") || events[0].Payload["error_truncated"] != true {
		t.Errorf("error of %d bytes, truncated %v", len(msg), events[0].Payload["error_truncated"])
	}
}

// TestCloseEndsCallsInFlight: a call running when the host closes ends
// (cancelled), and its terminal event is written before Close returns.
func TestCloseEndsCallsInFlight(t *testing.T) {
	cfg := &config.Config{DataDir: t.TempDir()}
	h, p := probeHost(t, cfg, nil)
	done := make(chan error, 1)
	go func() {
		_, err := do(h, "block", `{}`, "inflight-1")
		done <- err
	}()
	proctest.Eventually(t, "the call runs", func() bool { return p.running.Load() == 1 })
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, toolhost.ErrCancelled) || !strings.Contains(err.Error(), "closing") {
		t.Fatalf("call in flight: %v", err)
	}
	if _, err := do(h, "echo", `{}`, ""); !errors.Is(err, toolhost.ErrCancelled) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("call after Close: %v", err)
	}
	st, err := store.Open(context.Background(), cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events, _ := st.Events(context.Background(), store.EventFilter{Call: "inflight-1"})
	if len(events) != 2 || events[1].Type != store.EventCallFailed || events[1].Payload["error_class"] != "cancelled" {
		t.Fatalf("events = %+v", events)
	}
}

func TestCallBatch(t *testing.T) {
	h, p := probeHost(t, nil, nil)
	var reqs []*toolhost.CallRequest
	for i := range 12 {
		reqs = append(reqs, &toolhost.CallRequest{Tool: "echo", Arguments: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	reqs = append(reqs, &toolhost.CallRequest{Tool: "nope"})
	for _, mode := range []string{"sequential", "concurrent"} {
		p.maxConc.Store(0)
		out := h.CallBatch(context.Background(), reqs, &BatchOptions{Mode: mode, MaxParallel: 3})
		for i, r := range out[:12] {
			if r.Err != nil || r.Result.Stdout != fmt.Sprintf(`{"n":%d}`, i) {
				t.Fatalf("%s: result %d = %+v, %v", mode, i, r.Result, r.Err)
			}
		}
		if !errors.Is(out[12].Err, toolhost.ErrUnknownTool) {
			t.Fatalf("%s: last = %v", mode, out[12].Err)
		}
		if m := p.maxConc.Load(); (mode == "sequential" && m != 1) || m > 3 {
			t.Fatalf("%s: %d calls at once", mode, m)
		}
	}
}

// TestGroupLimits: a plugin block's limits cut its output, over the global ones.
func TestGroupLimits(t *testing.T) {
	pl := testPlugin("good", "good", nil)
	pl.Limits = config.Limits{MaxOutputLines: 2, MaxOutputBytes: 5}
	h := startHost(t, pl)
	h.cfg.Limits.MaxOutputLines, h.cfg.Limits.MaxOutputBytes = 2000, 51200
	res, err := callTool(t, h, "echo", map[string]any{"text": "a\nb\nc\nd"})
	if err != nil || res.Stdout != "a\nb\n" || !res.TruncatedLines || res.TruncatedBytes {
		t.Fatalf("lines: %+v, %v", res, err)
	}
	res, err = callTool(t, h, "echo", map[string]any{"text": "abcdefgh"})
	if err != nil || res.Stdout != "abcde" || !res.TruncatedBytes {
		t.Fatalf("bytes: %+v, %v", res, err)
	}
}

// TestToolConfigTimeout: a tool block's timeout bounds the plugin's call.
func TestToolConfigTimeout(t *testing.T) {
	pl := testPlugin("good", "good", nil)
	pl.Tools = map[string]config.ToolSettings{"sleep": {Timeout: 100 * time.Millisecond}, "echo": {RequiresApproval: true}}
	h := startHost(t, pl)
	if _, err := callTool(t, h, "sleep", map[string]any{"ms": 60000}); !errors.Is(err, toolhost.ErrTimeout) || !strings.Contains(err.Error(), "after 100ms") {
		t.Fatalf("sleep: %v", err)
	}
	h.approver = AlwaysDeny{Reason: "config says so"}
	if _, err := callTool(t, h, "echo", map[string]any{"text": "x"}); !errors.Is(err, toolhost.ErrApprovalDenied) {
		t.Fatalf("echo: %v", err)
	}
}

// lateTimer is a context whose deadline has passed while its timer has yet
// to fire: a loaded host's state, when the answer comes first.
type lateTimer struct {
	context.Context
	deadline time.Time
}

func (c lateTimer) Deadline() (time.Time, bool) { return c.deadline, true }

// TestAnswerAfterDeadlineIsTimeout: a call whose deadline passed before its
// group answered is a timeout, also while its ctx's timer has yet to fire
// (the call returned the answer, with no error, before). A plugin's ctx
// ends by its own timer, on the caller's deadline, so under load its
// answer, a result with ok false, came first.
func TestAnswerAfterDeadlineIsTimeout(t *testing.T) {
	h, _ := probeHost(t, nil, nil)
	for _, tc := range []struct {
		tool, when string
		left       time.Duration // until the deadline; slow takes 20ms
	}{{"echo", "before", -time.Millisecond}, {"slow", "during", time.Millisecond}} {
		ctx := lateTimer{context.Background(), time.Now().Add(tc.left)}
		res, err := h.Call(ctx, &toolhost.CallRequest{Tool: tc.tool, Arguments: []byte(`{}`)})
		if !errors.Is(err, toolhost.ErrTimeout) || res != nil {
			t.Errorf("deadline passed %s dispatch: res = %+v, err = %v, want timeout", tc.when, res, err)
		}
	}
	res, err := h.Call(lateTimer{context.Background(), time.Now().Add(time.Hour)}, &toolhost.CallRequest{Tool: "echo", Arguments: []byte(`{}`)})
	if err != nil || !res.OK {
		t.Fatalf("answered in time: res = %+v, err = %v", res, err)
	}
}

// TestLateBy: the deadline or the timeout that passed first decides.
func TestLateBy(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, tc := range []struct {
		deadline, due time.Time
		want          late
	}{
		{time.Time{}, time.Time{}, inTime},
		{at(time.Second), at(time.Second), inTime},
		{at(-time.Second), time.Time{}, pastDeadline},
		{at(-time.Second), at(time.Second), pastDeadline},
		{at(-time.Second), at(-2 * time.Second), pastTimeout},
		{at(-2 * time.Second), at(-time.Second), pastDeadline},
		{time.Time{}, now, pastTimeout},
		{at(time.Second), at(-time.Second), pastTimeout},
	} {
		ctx := context.Background()
		if !tc.deadline.IsZero() {
			ctx = lateTimer{ctx, tc.deadline}
		}
		if got := lateBy(ctx, now, tc.due); got != tc.want {
			t.Errorf("deadline %v, due %v: %v, want %v", tc.deadline.Sub(now), tc.due.Sub(now), got, tc.want)
		}
	}
}

// TestCallIDsSortByTime: the ids the host chooses are unique and sort in
// the order they were made, a millisecond apart or more (so the events'
// index of call ids grows at its end), with 80 random bits each.
func TestCallIDsSortByTime(t *testing.T) {
	seen := map[string]bool{}
	var last string
	for round := range 5 {
		var batch []string
		for range 2000 {
			id := newCallID()
			if seen[id] || len(id) != len("call_")+32 || !strings.HasPrefix(id, "call_") {
				t.Fatalf("id %q: repeated or malformed", id)
			}
			seen[id] = true
			batch = append(batch, id)
		}
		if first := slices.Min(batch); round > 0 && first <= last {
			t.Fatalf("round %d: id %q sorts before %q, made a millisecond earlier", round, first, last)
		}
		last = slices.Max(batch)
		time.Sleep(2 * time.Millisecond)
	}
}
