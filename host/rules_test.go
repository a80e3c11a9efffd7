package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/rules"
	"github.com/toolhost/toolhost/store"
)

// rulesHost starts a host on the real test plugin (a subprocess), with an
// approver that approves every call, and a role "dev" of the rules.
func rulesHost(t *testing.T, rs ...rules.Rule) *Host { return rulesHostWith(t, "approve", rs...) }

// rulesHostWith is rulesHost with the approver named ("approve", "queue").
func rulesHostWith(t *testing.T, approver string, rs ...rules.Rule) *Host {
	t.Helper()
	cfg := &config.Config{Limits: config.Limits{Timeout: 10 * time.Second}, Plugins: []config.Plugin{testPlugin("good", "good", nil)},
		Executor: config.Executor{Mode: "sequential", MaxParallel: 4, Approver: approver, ApprovalTimeout: time.Minute, IdempotencyWindow: time.Hour}}
	h := runHost(t, cfg, testOptions(t))
	if _, err := h.Roles().Create(context.Background(), RoleSpec{Name: "dev", ToolGroups: []string{"testgroup"}, Rules: rs}); err != nil {
		t.Fatal(err)
	}
	return h
}

func roleCall(h *Host, ctx context.Context, tool, args string) (*toolhost.Result, error) {
	return h.Call(ctx, &toolhost.CallRequest{Tool: tool, Arguments: []byte(args), Context: toolhost.CallContext{Role: "dev"}})
}

// TestRulesDecide: the first matching rule decides: deny refuses with
// policy naming the rule and its reason; approve asks the approver with
// the rule in the approval; allow ends the evaluation (a later deny does
// not apply); a tool denied whatever its arguments is not listed and its
// call is refused naming the rule; a tool denied for some arguments is
// listed and says what is refused; the rule is in the call's events.
func TestRulesDecide(t *testing.T) {
	h := rulesHostWith(t, "queue",
		rules.Rule{Name: "no_sudo", Tools: []string{"echo"}, When: "args.text.contains('sudo')", Action: rules.Deny, Reason: "no sudo here"},
		rules.Rule{Name: "src_only", Tools: []string{"echo"}, When: "!path.clean(args.text).startsWith('src/')", Action: rules.Approve, Reason: "outside src"},
		rules.Rule{Name: "never_noop", Tools: []string{"noop"}, Action: rules.Deny, Reason: "noop is pointless"},
		rules.Rule{Name: "logs_ok", Tools: []string{"log"}, Action: rules.Allow},
		rules.Rule{Name: "no_logs", Tools: []string{"group:testgroup"}, When: "tool == 'log'", Action: rules.Deny},
	)
	ctx := context.Background()
	defs, err := roleTools(h, "dev")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs.Tools {
		names = append(names, d.Function.Name)
		if d.Function.Name == "echo" && (!strings.Contains(d.Function.Description, "Refused when args.text.contains('sudo'): no sudo here") ||
			!strings.Contains(d.Function.Description, "Needs approval when !path.clean(args.text).startsWith('src/'): outside src")) {
			t.Errorf("echo's description = %q", d.Function.Description)
		}
	}
	if slices.Contains(names, "noop") || !slices.Contains(names, "echo") || !slices.Contains(names, "log") {
		t.Fatalf("listed %v: want echo and log, not noop", names)
	}

	_, err = roleCall(h, ctx, "echo", `{"text":"sudo ls"}`)
	if !errors.Is(err, toolhost.ErrPolicy) || !strings.Contains(err.Error(), `rule "no_sudo"`) || !strings.Contains(err.Error(), "no sudo here") {
		t.Fatalf("sudo: %v", err)
	}
	if res, err := roleCall(h, ctx, "echo", `{"text":"src/a"}`); err != nil || res.Stdout != "src/a" {
		t.Fatalf("src/a = %+v, %v", res, err)
	}
	if _, err := roleCall(h, ctx, "noop", `{}`); !errors.Is(err, toolhost.ErrPolicy) || !strings.Contains(err.Error(), `rule "never_noop"`) || !strings.Contains(err.Error(), "noop is pointless") {
		t.Fatalf("noop: %v", err)
	}
	if res, err := roleCall(h, ctx, "log", `{"text":"x"}`); err != nil || !res.OK {
		t.Fatalf("log after an allow = %+v, %v", res, err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := h.Call(ctx, &toolhost.CallRequest{Tool: "echo", Arguments: []byte(`{"text":"src/../etc/passwd"}`),
			Context: toolhost.CallContext{Role: "dev", CallID: "escapes-src"}})
		done <- err
	}()
	p := pendingOn(t, h)
	if p.Rule != "src_only" || p.RuleReason != "outside src" || p.Tool != "echo" {
		t.Fatalf("approval = %+v", p)
	}
	if err := h.Approvals().Decide(p.ID, Decision{Kind: Deny, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, toolhost.ErrApprovalDenied) || !strings.Contains(err.Error(), `sent for approval by rule "src_only" of role "dev", denied: no`) {
		t.Fatalf("denied approval: %v", err)
	}
	// An approval that ends without a decision (its caller gone) names the
	// rule too.
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := h.Call(cctx, &toolhost.CallRequest{Tool: "echo", Arguments: []byte(`{"text":"/etc"}`),
			Context: toolhost.CallContext{Role: "dev"}})
		done <- err
	}()
	pendingOn(t, h)
	cancel()
	if err := <-done; !errors.Is(err, toolhost.ErrCancelled) || !strings.Contains(err.Error(), `sent for approval by rule "src_only" of role "dev", failed: `) {
		t.Fatalf("cancelled approval: %v", err)
	}
	if err := h.Events().Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, _ := h.Events().List(ctx, store.EventFilter{Call: "escapes-src", Type: store.EventCallFailed})
	if len(evs) != 1 || evs[0].Payload["rule"] != "src_only" || evs[0].Payload["rule_action"] != "approve" {
		t.Fatalf("events = %+v", evs)
	}
	evs, _ = h.Events().List(ctx, store.EventFilter{Tool: "noop", Type: store.EventCallFailed})
	if len(evs) != 1 || evs[0].Payload["rule"] != "never_noop" || evs[0].Payload["code"] != "policy" {
		t.Fatalf("noop's events = %+v", evs)
	}
}

// TestRulesValidation: a role whose rule does not compile, or whose rules
// or limits are otherwise invalid, is refused with validation naming the
// rule and the field, whether created or updated; the role is unchanged.
func TestRulesValidation(t *testing.T) {
	h := rulesHost(t, rules.Rule{Name: "ok", When: "true", Action: rules.Allow})
	ctx := context.Background()
	tests := []struct {
		name   string
		rules  []rules.Rule
		limits []rules.Limit
		want   string
	}{
		{"syntax", []rules.Rule{{Name: "bad", When: "args.x ==", Action: rules.Deny}}, nil, `rules[0] "bad": when: line 1, column 10`},
		{"unknown variable", []rules.Rule{{Name: "a", Action: rules.Deny}, {Name: "b", When: "user == 'x'", Action: rules.Deny}}, nil, `rules[1] "b": when: line 1, column 1 of the expression: undeclared reference to 'user'`},
		{"not a bool", []rules.Rule{{Name: "c", When: "'yes'", Action: rules.Deny}}, nil, `rules[0] "c": when: the result is a string`},
		{"action", []rules.Rule{{Name: "d", Action: "refuse"}}, nil, `rules[0] "d": action:`},
		{"duplicate", []rules.Rule{{Name: "e", Action: rules.Deny}, {Name: "e", Action: rules.Allow}}, nil, `rules[1] "e": name:`},
		{"tool", []rules.Rule{{Name: "f", Tools: []string{"Bad Tool"}, Action: rules.Deny}}, nil, `rules[0] "f": tools:`},
		{"limit target", nil, []rules.Limit{{Target: "group:", Calls: 1, Per: time.Second}}, `limits[0]: target:`},
		{"limit calls", nil, []rules.Limit{{Target: "*", Calls: 0, Per: time.Second}}, `limits[0]: calls:`},
		{"limit per", nil, []rules.Limit{{Target: "echo", Calls: 1}}, `limits[0]: per:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.Roles().Create(ctx, RoleSpec{Name: "new", Rules: tt.rules, Limits: tt.limits})
			if !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("create: %v; want validation with %q", err, tt.want)
			}
			_, err = h.Roles().Update(ctx, "dev", RoleUpdate{Rules: &tt.rules, Limits: &tt.limits})
			if !errors.Is(err, toolhost.ErrValidation) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("update: %v; want validation with %q", err, tt.want)
			}
			if r, _ := h.Roles().Get("dev"); len(r.Rules) != 1 || r.Rules[0].Name != "ok" {
				t.Fatalf("the role changed: %+v", r.Rules)
			}
			if _, err := h.Roles().Get("new"); err == nil {
				t.Fatal("the refused role exists")
			}
		})
	}
}

// BenchmarkRules calls echo (a real plugin) through a role with 10 rules
// that apply to it and do not match, so that all are evaluated, and
// through a role without rules, in turn; it reports both p50 and p99 and
// the ratios (target: p50 ≤ 1.05, one caller).
func BenchmarkRules(b *testing.B) {
	h := startHost(b, testPlugin("bench", "good", nil))
	ctx := context.Background()
	conds := []string{
		"args.text.contains('sudo')", "args.text.startsWith('/etc')", "path.clean(args.text).startsWith('..')",
		"args.text.matches('^rm ')", "size(args.text) > 10000", "tool == 'x' && args.text == ''", "role == 'nobody'",
		"agent == 'nobody'", "args.text.endsWith('.key')", "args.text.contains('$(')",
	}
	var rs []rules.Rule
	for i, c := range conds {
		rs = append(rs, rules.Rule{Name: fmt.Sprintf("r%d", i), Tools: []string{"echo"}, When: c, Action: rules.Deny})
	}
	for name, rs := range map[string][]rules.Rule{"none": nil, "ten": rs} {
		if _, err := h.Roles().Create(ctx, RoleSpec{Name: name, ToolGroups: []string{"testgroup"}, Rules: rs}); err != nil {
			b.Fatal(err)
		}
	}
	call := func(role string) func() error {
		req := &toolhost.CallRequest{Tool: "echo", Arguments: []byte(`{"text":"hello world"}`), Context: toolhost.CallContext{Role: role}}
		return func() error {
			res, err := h.Call(ctx, req)
			if err == nil && !res.OK {
				b.Fatalf("echo failed: %+v", res.Error)
			}
			return err
		}
	}
	b.Run("latency", func(b *testing.B) { benchPairAs(b, "no-rules", "ten-rules", call("none"), call("ten")) })
}
