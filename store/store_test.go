package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/toolhost/toolhost/internal/proctest"
)

func TestOpenCreatesRootAndIsIdempotent(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		ctx := context.Background()
		for range 2 {
			s := open(t, dir)
			root, err := s.Role(ctx, RootRole)
			if err != nil || root.ID != RootRoleID || !slices.Equal(root.ToolGroups, []string{"org_management"}) {
				t.Fatalf("root role = %+v, %v", root, err)
			}
			if ro, why := root.ReadOnly(); !ro || why == "" {
				t.Fatal("root role is editable")
			}
			a, err := s.Agent(ctx, RootAgentID)
			if err != nil || a.RoleID != RootRoleID {
				t.Fatalf("root agent = %+v, %v", a, err)
			}
			roles, _ := s.Roles(ctx)
			if len(roles) != 1 {
				t.Fatalf("roles = %+v", roles)
			}
			s.Close()
		}
	})
}

func TestRoleCRUD(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		r, err := s.CreateRole(ctx, Role{Name: "dev", Description: "d", Prompt: "p", ToolGroups: []string{"workspace"}, Allow: []string{"notes"}, CreatedBy: "test"})
		if err != nil || r.ID == "" || r.Source != SourceStore || r.Status != "active" || r.CreatedAt.IsZero() {
			t.Fatalf("create = %+v, %v", r, err)
		}
		if _, err := s.CreateRole(ctx, Role{Name: "dev"}); !errors.Is(err, ErrExists) {
			t.Fatalf("duplicate name: %v", err)
		}
		r.ToolGroups, r.Deny = nil, []string{"run_command"}
		if err := s.UpdateRole(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := s.Role(ctx, r.ID)
		if err != nil || got.ToolGroups != nil || !slices.Equal(got.Deny, []string{"run_command"}) || got.Name != "dev" {
			t.Fatalf("after update = %+v, %v", got, err)
		}
		a, err := s.CreateAgent(ctx, Agent{RoleID: r.ID, ParentID: RootAgentID})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteRole(ctx, "dev"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Role(ctx, "dev"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted role: %v", err)
		}
		if _, err := s.Agent(ctx, a.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("agent of a deleted role: %v", err)
		}
		if err := s.DeleteRole(ctx, "dev"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v", err)
		}
	})
}

func TestReconcileConfigRoles(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		if _, err := s.CreateRole(ctx, Role{Name: "taken", Description: "stored"}); err != nil {
			t.Fatal(err)
		}
		changed, err := s.ReconcileConfigRoles(ctx, []Role{{Name: "a", ToolGroups: []string{}}, {Name: "taken", Description: "declared"}})
		if err != nil || !slices.Equal(changed, []string{"a", "taken"}) {
			t.Fatalf("first = %v, %v", changed, err)
		}
		a, _ := s.Role(ctx, "a")
		if a.Source != SourceConfig || a.ToolGroups == nil || len(a.ToolGroups) != 0 {
			t.Fatalf("a = %+v", a)
		}
		if taken, _ := s.Role(ctx, "taken"); taken.Source != SourceConfig || taken.Description != "declared" {
			t.Fatalf("taken = %+v", taken)
		}
		if changed, err := s.ReconcileConfigRoles(ctx, []Role{{Name: "a", ToolGroups: []string{}}, {Name: "taken", Description: "declared"}}); err != nil || len(changed) != 0 {
			t.Fatalf("unchanged config changed %v, %v", changed, err)
		}
		changed, err = s.ReconcileConfigRoles(ctx, []Role{{Name: "a", ToolGroups: []string{"workspace"}}})
		if err != nil || !slices.Contains(changed, "a") || !slices.Contains(changed, "taken") {
			t.Fatalf("second = %v, %v", changed, err)
		}
		if got, _ := s.Role(ctx, "a"); got.ID != a.ID || !slices.Equal(got.ToolGroups, []string{"workspace"}) {
			t.Fatalf("updated a = %+v (was %s)", got, a.ID)
		}
		if _, err := s.Role(ctx, "taken"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("undeclared config role kept: %v", err)
		}
		if _, err := s.Role(ctx, RootRole); err != nil {
			t.Fatal("reconcile removed the root role")
		}
	})
}

// A role's tool groups, saved and read back after the
// database is closed and opened again, are the same: nil stays "not
// configured", an empty list stays empty, order is kept.
func TestPropertyToolGroupsPersist(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		genGroups := rapid.OneOf(
			rapid.Just([]string(nil)),
			rapid.SliceOfDistinct(rapid.SampledFrom([]string{"workspace", "command", "chrome", "notes", "network", "artifact"}), rapid.ID[string]),
		)
		n := 0
		rapid.Check(t, func(rt *rapid.T) {
			ctx := context.Background()
			s := open(t, dir)
			n++
			name := fmt.Sprintf("role-%d", n)
			r, err := s.CreateRole(ctx, Role{Name: name, ToolGroups: genGroups.Draw(rt, "created")})
			if err != nil {
				rt.Fatal(err)
			}
			if rapid.Bool().Draw(rt, "edit") {
				r.ToolGroups = genGroups.Draw(rt, "edited")
				if err := s.UpdateRole(ctx, r); err != nil {
					rt.Fatal(err)
				}
			}
			s.Close()
			s = open(t, dir)
			defer s.Close()
			got, err := s.Role(ctx, name)
			if err != nil {
				rt.Fatal(err)
			}
			if (got.ToolGroups == nil) != (r.ToolGroups == nil) || !slices.Equal(got.ToolGroups, r.ToolGroups) {
				rt.Fatalf("saved %#v, read back %#v", r.ToolGroups, got.ToolGroups)
			}
		})
	})
}

// TestChangesSeesOtherConnections: a second Store on the same file (as a CLI
// beside a server) commits; the first one's watch notices.
func TestChangesSeesOtherConnections(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		ctx := context.Background()
		a, b := open(t, dir), open(t, dir)
		w, err := a.Changes(ctx, 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := b.CreateRole(ctx, Role{Name: "from-cli"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.C:
		case <-time.After(proctest.Patience):
			t.Fatal("a commit by another store went unnoticed")
		}
		if _, err := a.Role(ctx, "from-cli"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCallResults(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		ctx := context.Background()
		s := open(t, dir)
		old := time.Now().Add(-2 * time.Hour)
		if err := s.SaveCallResult(ctx, CallResult{CallID: "c1", ArgsHash: "h1", Result: []byte(`{"ok":true}`), Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveCallResult(ctx, CallResult{CallID: "c1", ArgsHash: "other", Result: []byte(`{}`), Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveCallResult(ctx, CallResult{CallID: "old", ArgsHash: "h", Result: []byte(`{}`), Created: old}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = open(t, dir)
		r, err := s.CallResult(ctx, "c1", time.Now().Add(-time.Hour))
		if err != nil || r.ArgsHash != "h1" || string(r.Result) != `{"ok":true}` {
			t.Fatalf("c1 = %+v, %v", r, err)
		}
		if _, err := s.CallResult(ctx, "old", time.Now().Add(-time.Hour)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("result outside the window: %v", err)
		}
		if n, err := s.PruneCallResults(ctx, time.Now().Add(-time.Hour)); err != nil || n != 1 {
			t.Fatalf("pruned %d, %v", n, err)
		}
	})
}

// TestClaimCall: a call id is claimed once; others see the claim pending,
// then its result; a released claim, a claim older than stale, and a
// result past the window may be claimed again; a stale claim of other
// arguments is not taken over.
func TestClaimCall(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		a, b := open(t, dir), open(t, dir)
		ctx := context.Background()
		past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		claim := func(s *Store, id, hash string, notBefore, stale time.Time) (bool, CallResult) {
			t.Helper()
			ok, r, err := s.ClaimCall(ctx, id, hash, notBefore, stale)
			if err != nil {
				t.Fatal(err)
			}
			return ok, r
		}
		if ok, _ := claim(a, "c", "h", past, past); !ok {
			t.Fatal("a fresh id was not claimed")
		}
		if ok, r := claim(b, "c", "h", past, past); ok || r.Result != nil || r.ArgsHash != "h" {
			t.Fatalf("a claimed id: claimed %v, %+v; want it pending", ok, r)
		}
		if ok, r := claim(b, "c", "other", past, future); ok || r.ArgsHash != "h" {
			t.Fatalf("a stale claim of other arguments was taken over (%v, %+v)", ok, r)
		}
		if ok, _ := claim(b, "c", "h", past, future); !ok {
			t.Fatal("a stale claim was not taken over")
		}
		if err := b.SaveCallResult(ctx, CallResult{CallID: "c", ArgsHash: "h", Result: []byte(`{"ok":true}`), Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if ok, r := claim(a, "c", "h", past, future); ok || string(r.Result) != `{"ok":true}` {
			t.Fatalf("a saved result: claimed %v, %+v", ok, r)
		}
		if ok, _ := claim(a, "c", "h", future, past); !ok {
			t.Fatal("a result past the window was not claimed again")
		}
		if err := a.ReleaseCall(ctx, "c"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := claim(b, "c", "h2", past, past); !ok {
			t.Fatal("a released id was not claimed again")
		}
	})
}

// TestArtifactsInTheDatabase: an artifact put with its bytes keeps them
// beside its index, for every store on the database; an id already
// indexed is refused, keeping the first entry and its bytes.
func TestArtifactsInTheDatabase(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		a, b := open(t, dir), open(t, dir)
		ctx := context.Background()
		data := []byte{0, 1, 2, 0xff}
		if _, _, err := a.PutArtifact(ctx, "h", Artifact{ID: "id1", Name: "first", Size: 4}, data, noQuotas, noPlace); err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.PutArtifact(ctx, "h", Artifact{ID: "id1", Name: "second", Size: 4}, []byte("xxxx"), noQuotas, noPlace); err == nil {
			t.Fatal("a second put of an id was kept")
		}
		if got, err := b.ArtifactData(ctx, "id1", ""); err != nil || !slices.Equal(got, data) {
			t.Fatalf("the bytes read through another store: %v, %v", got, err)
		}
		if got, err := b.Artifact(ctx, "id1", ""); err != nil || got.Name != "first" {
			t.Fatalf("the entry read through another store: %+v, %v", got, err)
		}
		if _, _, err := a.PutArtifact(ctx, "h", Artifact{ID: "id2", Size: 1}, nil, noQuotas, noPlace); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ArtifactData(ctx, "id2", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bytes kept in files, read from the database: %v", err)
		}
	})
}
