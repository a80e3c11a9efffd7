package store

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/toolhost/toolhost/rules"
)

// TestRoleRules: a role's rules and limits survive a reopen in their
// order, an update replaces them, a config role whose rules changed is
// reconciled (one whose did not is left alone), and an approval keeps the
// rule that asked for it; on both engines.
func TestRoleRules(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		ctx := context.Background()
		s := open(t, dir)
		rs := []rules.Rule{
			{Name: "no_sudo", Tools: []string{"run_command"}, When: "args.command.contains('sudo')", Action: rules.Deny, Reason: "no sudo here"},
			{Name: "src_only", Tools: []string{"write_file", "group:workspace"}, When: "!path.clean(args.path).startsWith('src/')", Action: rules.Approve},
		}
		ls := []rules.Limit{{Target: "run_command", Calls: 5, Per: time.Minute}, {Target: "*", Calls: 100, Per: time.Hour}}
		r, err := s.CreateRole(ctx, Role{Name: "dev", Rules: rs, Limits: ls})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = open(t, dir)
		got, err := s.Role(ctx, "dev")
		if err != nil || !reflect.DeepEqual(got.Rules, rs) || !reflect.DeepEqual(got.Limits, ls) {
			t.Fatalf("after reopen = %+v, %+v, %v", got.Rules, got.Limits, err)
		}
		r.Rules, r.Limits = rs[1:], nil
		if err := s.UpdateRole(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Role(ctx, "dev"); !reflect.DeepEqual(got.Rules, rs[1:]) || len(got.Limits) != 0 {
			t.Fatalf("after update = %+v, %+v", got.Rules, got.Limits)
		}

		declared := []Role{{Name: "ops", Rules: rs[:1]}}
		if changed, err := s.ReconcileConfigRoles(ctx, declared); err != nil || !slices.Equal(changed, []string{"ops"}) {
			t.Fatalf("first = %v, %v", changed, err)
		}
		if changed, err := s.ReconcileConfigRoles(ctx, declared); err != nil || len(changed) != 0 {
			t.Fatalf("unchanged config changed %v, %v", changed, err)
		}
		declared[0].Limits = ls[:1]
		if changed, err := s.ReconcileConfigRoles(ctx, declared); err != nil || !slices.Equal(changed, []string{"ops"}) {
			t.Fatalf("limit added: changed %v, %v", changed, err)
		}
		if got, _ := s.Role(ctx, "ops"); !reflect.DeepEqual(got.Limits, ls[:1]) || !reflect.DeepEqual(got.Rules, rs[:1]) {
			t.Fatalf("ops = %+v", got)
		}

		now := time.Now()
		a := Approval{ID: "appr_rule", Tool: "write_file", Group: "workspace", Arguments: []byte(`{}`), Requested: now, Deadline: now.Add(time.Hour),
			Rule: "src_only", RuleReason: "outside src"}
		if err := s.CreateApproval(ctx, a); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Approval(ctx, a.ID); err != nil || got.Rule != a.Rule || got.RuleReason != a.RuleReason {
			t.Fatalf("approval = %+v, %v", got, err)
		}
	})
}
