package store

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestArtifactsBelongToRoles: an artifact is read by the role that owns it
// and by the roles it shared it with, and by no other, whose read is
// refused as for an id that names nothing; only its owner shares it, all
// or nothing; the same bytes in two roles are two entries, and one role's
// quota evicts its own alone, telling the eviction to the roles that could
// read it and to no other.
func TestArtifactsBelongToRoles(t *testing.T) {
	const a, b, c = "role_a", "role_b", "role_c"
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		put := func(id, roleID string, data string, q Quotas) []Eviction {
			t.Helper()
			_, ev, err := s.PutArtifact(ctx, "h", Artifact{ID: id, Role: roleID + "-name", RoleID: roleID, Size: int64(len(data))}, []byte(data), q, noPlace)
			if err != nil {
				t.Fatal(err)
			}
			return ev
		}
		reads := func(id, roleID string) bool {
			t.Helper()
			_, err := s.Artifact(ctx, id, roleID)
			_, derr := s.ArtifactData(ctx, id, roleID)
			if (err == nil) != (derr == nil) || (err != nil && !errors.Is(err, ErrNotFound)) || (derr != nil && !errors.Is(derr, ErrNotFound)) {
				t.Fatalf("%s read by %s: entry %v, bytes %v", id, roleID, err, derr)
			}
			return err == nil
		}
		put("xa", a, "the same bytes", noQuotas)
		put("xb", b, "the same bytes", noQuotas) // b's own entry, not a's
		for _, tt := range []struct {
			id, role string
			want     bool
		}{{"xa", a, true}, {"xa", b, false}, {"xa", c, false}, {"xa", "", false}, {"xb", b, true}, {"xb", a, false}, {"nothing", a, false}} {
			if got := reads(tt.id, tt.role); got != tt.want {
				t.Errorf("%s read by %s: %v, want %v", tt.id, tt.role, got, tt.want)
			}
		}

		// Only the owner shares, all or nothing, and a share is not the
		// reader's to share on.
		for _, tt := range []struct {
			owner string
			ids   []string
		}{{b, []string{"xa"}}, {a, []string{"xa", "nothing"}}, {a, []string{"xa", "xb"}}} {
			if err := s.ShareArtifacts(ctx, tt.owner, tt.ids, []string{c}); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s shares %v: %v, want not found", tt.owner, tt.ids, err)
			}
		}
		if reads("xa", c) || reads("xb", c) {
			t.Fatal("a refused share was kept")
		}
		if err := s.ShareArtifacts(ctx, a, []string{"xa"}, []string{b, a, b}); err != nil {
			t.Fatal(err)
		}
		if !reads("xa", b) || reads("xa", c) || reads("xb", a) {
			t.Fatal("sharing xa with b let the wrong roles read")
		}
		if err := s.ShareArtifacts(ctx, b, []string{"xa"}, []string{c}); !errors.Is(err, ErrNotFound) || reads("xa", c) {
			t.Fatalf("b shared a's artifact on: %v", err)
		}
		if err := s.ShareArtifacts(ctx, a, []string{"xa"}, make([]string, maxShares+1)); err == nil {
			t.Fatal("a share with more roles than the bound")
		}

		// a fills its quota: its own oldest goes, b's copy stays; the
		// eviction is told to a and to b (shared), not to c.
		q := Quotas{Host: -1, Role: 20}
		if got := keys(put("ya", a, "0123456789", q)); !slices.Equal(got, []string{"artifact:xa@role"}) {
			t.Fatalf("a's quota evicted %v", got)
		}
		if !reads("xb", b) || reads("xa", b) {
			t.Fatal("b's copy after a's eviction")
		}
		for _, tt := range []struct {
			role string
			want bool
		}{{a, true}, {b, true}, {c, false}, {"", false}} {
			if _, err := s.Evicted(ctx, "xa", tt.role); (err == nil) != tt.want || (err != nil && !errors.Is(err, ErrNotFound)) {
				t.Errorf("the eviction of xa told to %s: %v, want %v", tt.role, err, tt.want)
			}
		}
		var shares int
		if err := s.db.queryRow(ctx, `SELECT count(*) FROM artifact_shares`).Scan(&shares); err != nil || shares != 0 {
			t.Fatalf("%d shares of evicted artifacts left, %v", shares, err)
		}
	})
}

// TestArtifactOwnersMigration: an artifact stored before migration 018
// belongs to the role of its name, read by no other; one of a role since
// deleted, or of none, belongs to the operator (no role).
func TestArtifactOwnersMigration(t *testing.T) {
	engineOptions(t, func(t *testing.T, o Options) {
		ctx := context.Background()
		dir := t.TempDir()
		old, err := openUpTo(ctx, dir, o, 17)
		if err != nil {
			t.Fatal(err)
		}
		// The role as that schema has it: CreateRole writes today's columns.
		dev := Role{ID: "role_dev", Name: "dev"}
		if _, err := old.db.exec(ctx, `INSERT INTO roles (id, name, created_at, source) VALUES (?, ?, ?, 'store')`, dev.ID, dev.Name, now()); err != nil {
			t.Fatal(err)
		}
		for _, row := range [][]any{{"old-dev", "dev"}, {"old-gone", "gone"}} {
			if _, err := old.db.exec(ctx, `INSERT INTO artifacts (id, size, role, created_at) VALUES (?, 1, ?, ?)`, row[0], row[1], now()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := old.db.exec(ctx, `INSERT INTO evicted_artifacts (id, evicted_at) VALUES ('old-evicted', ?)`, now()); err != nil {
			t.Fatal(err)
		}
		old.Close()
		s := openWith(t, dir, o)
		for _, r := range []struct {
			id, role string
			want     bool
		}{{"old-dev", dev.ID, true}, {"old-dev", "", false}, {"old-gone", "", true}, {"old-gone", dev.ID, false}} {
			if _, err := s.Artifact(ctx, r.id, r.role); (err == nil) != r.want {
				t.Errorf("%s read by %q after the migration: %v, want %v", r.id, r.role, err, r.want)
			}
		}
	})
}
