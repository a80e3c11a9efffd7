package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/toolhost/toolhost/rules"
)

// TestRoleCode: a role's code bounds survive a reopen, an update replaces
// them, and a config role whose bounds changed is reconciled; on both
// engines.
func TestRoleCode(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		ctx := context.Background()
		s := open(t, dir)
		code := rules.CodeBounds{Steps: 10, Timeout: time.Second, Memory: 1 << 20, Calls: 3, Output: 100, Parallel: 2}
		r, err := s.CreateRole(ctx, Role{Name: "scripter", Code: code})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = open(t, dir)
		if got, err := s.Role(ctx, "scripter"); err != nil || got.Code != code {
			t.Fatalf("after reopen = %+v, %v", got.Code, err)
		}
		r.Code = rules.CodeBounds{Calls: 7}
		if err := s.UpdateRole(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Role(ctx, "scripter"); got.Code != r.Code {
			t.Fatalf("after update = %+v", got.Code)
		}
		if got, _ := s.Role(ctx, RootRole); got.Code != (rules.CodeBounds{}) {
			t.Errorf("root's code bounds: %+v", got.Code)
		}
		declared := []Role{{Name: "ops"}}
		if _, err := s.ReconcileConfigRoles(ctx, declared); err != nil {
			t.Fatal(err)
		}
		declared[0].Code = code
		if changed, err := s.ReconcileConfigRoles(ctx, declared); err != nil || !slices.Equal(changed, []string{"ops"}) {
			t.Fatalf("code block added: changed %v, %v", changed, err)
		}
		if got, _ := s.Role(ctx, "ops"); got.Code != code {
			t.Errorf("ops = %+v", got.Code)
		}
	})
}
