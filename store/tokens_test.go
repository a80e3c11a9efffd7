package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/proctest"
)

func TestTokens(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		s := open(t, dir)
		ctx := context.Background()
		dev, err := s.CreateRole(ctx, Role{Name: "developer"})
		if err != nil {
			t.Fatal(err)
		}
		secret, tok, err := s.CreateToken(ctx, "cursor", "developer", time.Time{})
		if err != nil || !strings.HasPrefix(secret, tokenPrefix) || len(secret) != len(tokenPrefix)+43 || tok.RoleID != dev.ID || tok.Role != "developer" {
			t.Fatalf("CreateToken = %q %+v %v", secret, tok, err)
		}
		// Only the hash is on disk: the secret is nowhere in the database files.
		for _, name := range []string{fileName, fileName + "-wal"} {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && strings.Contains(string(b), secret) {
				t.Fatalf("%s holds the secret", name)
			}
		}
		now := time.Now()
		if got, err := s.LookupToken(ctx, secret, now); err != nil || got.Name != "cursor" || got.RoleID != dev.ID {
			t.Fatalf("LookupToken = %+v %v", got, err)
		}
		if _, err := s.LookupToken(ctx, secret+"x", now); !errors.Is(err, ErrNotFound) {
			t.Errorf("a wrong secret: %v", err)
		}
		byID, named, err := s.CreateToken(ctx, "", dev.ID, now.Add(time.Hour))
		if err != nil || !strings.HasPrefix(named.Name, "developer-") || byID == secret {
			t.Fatalf("a token named for its role = %+v %v", named, err)
		}
		if _, err := s.LookupToken(ctx, byID, now.Add(2*time.Hour)); !errors.Is(err, ErrExpired) {
			t.Errorf("past its expiry: %v", err)
		}
		for _, bad := range []struct {
			name, role string
			want       error
		}{
			{"cursor", "developer", ErrExists},
			{"a b", "developer", ErrInvalid},
			{"-x", "developer", ErrInvalid},
			{"x", "nosuch", ErrNotFound},
		} {
			if _, _, err := s.CreateToken(ctx, bad.name, bad.role, time.Time{}); !errors.Is(err, bad.want) {
				t.Errorf("CreateToken(%q, %q) = %v, want %v", bad.name, bad.role, err, bad.want)
			}
		}
		if err := s.TouchToken(ctx, "cursor", now); err != nil {
			t.Fatal(err)
		}
		list, err := s.Tokens(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "cursor" || list[0].LastUsedAt.IsZero() || !list[1].LastUsedAt.IsZero() {
			t.Fatalf("Tokens = %+v %v", list, err)
		}
		if err := s.RevokeToken(ctx, "cursor"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LookupToken(ctx, secret, now); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoked: %v", err)
		}
		if err := s.RevokeToken(ctx, "cursor"); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoked twice: %v", err)
		}
		// A token dies with its role: a new role of the same name does not
		// inherit it.
		if err := s.DeleteRole(ctx, "developer"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateRole(ctx, Role{Name: "developer"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LookupToken(ctx, byID, now); !errors.Is(err, ErrNotFound) {
			t.Errorf("the deleted role's token: %v", err)
		}
	})
}

func TestPrivateDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := open(t, dir)
	if _, err := s.CreateRole(context.Background(), Role{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, s.path, s.path + "-wal", s.path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, readable by others", p, fi.Mode())
		}
	}

	// An older data directory, open to everyone, is tightened; a link is
	// left as it is, and so is its target outside.
	old := t.TempDir()
	outside := filepath.Join(t.TempDir(), "elsewhere")
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{ // parents first
		{filepath.Join(old, "outputs"), 0o755 | os.ModeDir},
		{filepath.Join(old, "outputs", "c.log"), 0o644},
		{filepath.Join(old, "toolhost.db"), 0o666},
		{filepath.Join(old, "run.sh"), 0o755},
		{outside, 0o644},
	} {
		var err error
		if f.mode.IsDir() {
			err = os.Mkdir(f.path, 0o700)
		} else {
			err = os.WriteFile(f.path, []byte("x"), 0o600)
		}
		if err == nil {
			err = os.Chmod(f.path, f.mode.Perm())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(old, "link")); err != nil {
		t.Fatal(err)
	}
	changed, err := Tighten(old)
	if err != nil || len(changed) != 5 {
		t.Fatalf("Tighten = %v %v, want 5 paths", changed, err)
	}
	for path, want := range map[string]os.FileMode{
		old: 0o700, filepath.Join(old, "outputs"): 0o700, filepath.Join(old, "outputs", "c.log"): 0o600,
		filepath.Join(old, "toolhost.db"): 0o600, filepath.Join(old, "run.sh"): 0o700, outside: 0o644,
	} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	if again, err := Tighten(old); err != nil || len(again) != 0 {
		t.Errorf("a second Tighten changed %v %v", again, err)
	}
	if none, err := Tighten(filepath.Join(old, "missing")); err != nil || none != nil {
		t.Errorf("a missing directory: %v %v", none, err)
	}
}

// TestTokenRevokedAcrossProcesses: a token cached by one store (a server) is
// refused as soon as another store on the same directory (a CLI) revokes it
// or deletes its role.
func TestTokenRevokedAcrossProcesses(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		server, cli := open(t, dir), open(t, dir)
		ctx := context.Background()
		now := time.Now()
		if _, err := cli.CreateRole(ctx, Role{Name: "developer"}); err != nil {
			t.Fatal(err)
		}
		a, _, err := cli.CreateToken(ctx, "a", "developer", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := cli.CreateToken(ctx, "b", "developer", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second lookups come from the cache
			for _, secret := range []string{a, b} {
				if _, err := server.LookupToken(ctx, secret, now); err != nil {
					t.Fatal(err)
				}
			}
		}
		// On SQLite a revocation holds everywhere once it returns; on
		// PostgreSQL once its notification reaches the other host (nothing
		// polls, so only the notification can bring it).
		refused := func(secret, what string) {
			t.Helper()
			for deadline := time.Now().Add(proctest.Patience); ; time.Sleep(5 * time.Millisecond) {
				_, err := server.LookupToken(ctx, secret, now)
				if errors.Is(err, ErrNotFound) {
					return
				}
				if server.Engine() == DriverSQLite || time.Now().After(deadline) {
					t.Fatalf("%s by another store: %v", what, err)
				}
			}
		}
		if err := cli.RevokeToken(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		refused(a, "revoked")
		if _, err := server.LookupToken(ctx, b, now); err != nil {
			t.Fatalf("the other token: %v", err)
		}
		if err := cli.DeleteRole(ctx, "developer"); err != nil {
			t.Fatal(err)
		}
		refused(b, "its role deleted")
	})
}

// TestMetricsTokens: a metrics token has no role, opens nothing but
// /metrics (the server's part), is listed and revoked like the others, and
// outlives any role.
func TestMetricsTokens(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		if _, err := s.CreateRole(ctx, Role{Name: "developer"}); err != nil {
			t.Fatal(err)
		}
		secret, tok, err := s.CreateMetricsToken(ctx, "", time.Time{})
		if err != nil || !strings.HasPrefix(tok.Name, "metrics-") || tok.Scope != ScopeMetrics || tok.RoleID != "" || tok.Role != "" {
			t.Fatalf("CreateMetricsToken = %+v %v", tok, err)
		}
		if _, _, err := s.CreateMetricsToken(ctx, tok.Name, time.Time{}); !errors.Is(err, ErrExists) {
			t.Errorf("the same name again: %v", err)
		}
		if _, _, err := s.CreateMetricsToken(ctx, "a b", time.Time{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("a bad name: %v", err)
		}
		if _, role, err := s.CreateToken(ctx, "dev", "developer", time.Time{}); err != nil || role.Scope != ScopeRole {
			t.Fatalf("a role token = %+v %v", role, err)
		}
		if err := s.DeleteRole(ctx, "developer"); err != nil {
			t.Fatal(err)
		}
		got, err := s.LookupToken(ctx, secret, time.Now())
		if err != nil || got.Scope != ScopeMetrics || got.Name != tok.Name || got.RoleID != "" {
			t.Fatalf("LookupToken after a role was deleted = %+v %v", got, err)
		}
		if list, err := s.Tokens(ctx); err != nil || len(list) != 1 || list[0].Name != tok.Name || list[0].Scope != ScopeMetrics {
			t.Fatalf("Tokens = %+v %v", list, err)
		}
		if err := s.RevokeToken(ctx, tok.Name); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LookupToken(ctx, secret, time.Now()); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoked: %v", err)
		}
	})
}

// TestTokenScopesMigration: the role tokens of a data directory made before
// token scopes keep working, as role tokens, and still die with their role.
func TestTokenScopesMigration(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		ctx := context.Background()
		s := open(t, dir)
		if _, err := s.CreateRole(ctx, Role{Name: "developer"}); err != nil {
			t.Fatal(err)
		}
		secret, _, err := s.CreateToken(ctx, "cursor", "developer", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		// Back to the tokens table of migration 005, its row kept.
		old, err := migrations.ReadFile("migrations/" + s.Engine() + "/005_tokens.sql")
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`ALTER TABLE tokens RENAME TO tokens_new`, `DROP INDEX tokens_role`, string(old),
			`INSERT INTO tokens SELECT name, role_id, hash, created_at, last_used_at, expires_at FROM tokens_new`,
			`DROP TABLE tokens_new`, `DELETE FROM schema_migrations WHERE version = 7`} {
			if _, err := s.db.exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = open(t, dir)
		if got, err := s.LookupToken(ctx, secret, time.Now()); err != nil || got.Scope != ScopeRole || got.Role != "developer" {
			t.Fatalf("the old token after the migration = %+v %v", got, err)
		}
		if err := s.DeleteRole(ctx, "developer"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LookupToken(ctx, secret, time.Now()); !errors.Is(err, ErrNotFound) {
			t.Errorf("its role deleted: %v", err)
		}
	})
}
