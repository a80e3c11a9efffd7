package store

import (
	"context"
	"slices"
	"testing"
)

// TestRoleReadOnlyTools: a role's read_only survives a reopen, an update
// changes it both ways, and a config role whose read_only changed is
// reconciled (and one whose did not is left alone).
func TestRoleReadOnlyTools(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		ctx := context.Background()
		s := open(t, dir)
		r, err := s.CreateRole(ctx, Role{Name: "reader", ToolGroups: []string{"workspace"}, ReadOnlyTools: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = open(t, dir)
		if got, err := s.Role(ctx, "reader"); err != nil || !got.ReadOnlyTools {
			t.Fatalf("after reopen = %+v, %v", got, err)
		}
		r.ReadOnlyTools = false
		if err := s.UpdateRole(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Role(ctx, "reader"); got.ReadOnlyTools {
			t.Fatal("update to false kept read_only")
		}

		declared := []Role{{Name: "researcher", ToolGroups: []string{"workspace"}}}
		if changed, err := s.ReconcileConfigRoles(ctx, declared); err != nil || !slices.Equal(changed, []string{"researcher"}) {
			t.Fatalf("first = %v, %v", changed, err)
		}
		declared[0].ReadOnlyTools = true
		if changed, err := s.ReconcileConfigRoles(ctx, declared); err != nil || !slices.Equal(changed, []string{"researcher"}) {
			t.Fatalf("read_only added: changed %v, %v", changed, err)
		}
		if got, _ := s.Role(ctx, "researcher"); !got.ReadOnlyTools || got.Source != SourceConfig {
			t.Fatalf("researcher = %+v", got)
		}
		if changed, err := s.ReconcileConfigRoles(ctx, declared); err != nil || len(changed) != 0 {
			t.Fatalf("unchanged config changed %v, %v", changed, err)
		}
		roles, err := s.Roles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range roles {
			if r.ReadOnlyTools != (r.Name == "researcher") {
				t.Errorf("%s: read_only %v", r.Name, r.ReadOnlyTools)
			}
		}
	})
}

// TestRoleReadOnlyToolsMigration: the roles of a data directory made before
// migration 012 read back as not read-only, and can be made so.
func TestRoleReadOnlyToolsMigration(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		ctx := context.Background()
		s := open(t, dir)
		if _, err := s.CreateRole(ctx, Role{Name: "old", ToolGroups: []string{"workspace"}, Deny: []string{"write_file"}}); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`ALTER TABLE roles DROP COLUMN tools_read_only`, `DELETE FROM schema_migrations WHERE version = 12`} {
			if _, err := s.db.exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		s.Close()
		s = open(t, dir)
		old, err := s.Role(ctx, "old")
		if err != nil || old.ReadOnlyTools || !slices.Equal(old.Deny, []string{"write_file"}) {
			t.Fatalf("the old role after the migration = %+v, %v", old, err)
		}
		old.ReadOnlyTools = true
		if err := s.UpdateRole(ctx, old); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Role(ctx, "old"); !got.ReadOnlyTools {
			t.Fatalf("made read-only: %+v", got)
		}
		if root, err := s.Role(ctx, RootRole); err != nil || root.ReadOnlyTools {
			t.Fatalf("root = %+v, %v", root, err)
		}
	})
}
