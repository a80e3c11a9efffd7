package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// noPlace is a Placer with no files to place.
func noPlace([]Eviction) error { return nil }

// noQuotas bounds nothing.
var noQuotas = Quotas{Host: -1, Role: -1}

// keys are the kinds and keys of evictions, in order.
func keys(ev []Eviction) []string {
	var out []string
	for _, e := range ev {
		out = append(out, e.Kind+":"+e.Key+"@"+e.Quota)
	}
	return out
}

// TestQuotasEvictOldestOutputsFirst: keeping an item past a quota evicts the
// oldest items in that quota's scope, saved outputs before artifacts, the
// role's quota before the host's; an item larger than a quota is refused;
// another host's outputs are never evicted, nor counted.
func TestQuotasEvictOldestOutputsFirst(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		s := open(t, t.TempDir())
		ctx := context.Background()
		q := Quotas{Host: 100, Role: 60}
		out := func(host, key, role string, size int64) []Eviction {
			t.Helper()
			ev, err := s.KeepOutput(ctx, Item{Kind: KindOutput, Host: host, Key: key, Role: role, Size: size}, q, noPlace)
			if err != nil {
				t.Fatal(err)
			}
			return ev
		}
		art := func(id, role string, size int64) []Eviction {
			t.Helper()
			_, ev, err := s.PutArtifact(ctx, "h1", Artifact{ID: id, Role: role, Size: size}, nil, q, noPlace)
			if err != nil {
				t.Fatal(err)
			}
			return ev
		}
		if ev := art("a1", "dev", 20); ev != nil {
			t.Fatalf("evicted %v", keys(ev))
		}
		out("h1", "o1", "dev", 20)
		out("h1", "o2", "dev", 20)
		out("h2", "other", "ops", 50) // another host's: neither counted nor evicted by h1
		// dev holds 60 on h1: 10 more evicts dev's oldest output, not the older artifact.
		if got := keys(out("h1", "o3", "dev", 10)); !slices.Equal(got, []string{"output:o1@role"}) {
			t.Fatalf("role quota evicted %v", got)
		}
		// dev holds a1 20, o2 20, o3 10: 25 more needs 15, which o2 frees.
		// Then 45 more needs 40: o3 and o4 (outputs first) free 35, then
		// the artifact.
		if got := keys(out("h1", "o4", "dev", 25)); !slices.Equal(got, []string{"output:o2@role"}) {
			t.Fatalf("role quota evicted %v", got)
		}
		if got := keys(art("a2", "dev", 45)); !slices.Equal(got, []string{"output:o3@role", "output:o4@role", "artifact:a1@role"}) {
			t.Fatalf("role quota evicted %v", got)
		}
		if _, err := s.Artifact(ctx, "a1", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an evicted artifact: %v", err)
		}
		if _, err := s.Evicted(ctx, "a1", ""); err != nil {
			t.Fatalf("the eviction of a1 is not remembered: %v", err)
		}
		if _, err := s.Evicted(ctx, "a2", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a kept artifact is said evicted: %v", err)
		}
		// The host's quota evicts the host's oldest saved outputs, any
		// role's, then the keeper's own artifacts, never another role's.
		// ops holds 50 more (95 in all on h1); 56 for qa would need dev's
		// artifact after ops's output: refused, and nothing evicted.
		out("h1", "p1", "ops", 50)
		if _, err := s.KeepOutput(ctx, Item{Kind: KindOutput, Host: "h1", Key: "p2", Role: "qa", Size: 56}, q, noPlace); !errors.Is(err, ErrQuotaFull) {
			t.Fatalf("an output only another role's artifact would make room for: %v", err)
		}
		usage := func(want Usage) {
			t.Helper()
			if u, err := s.StorageUsage(ctx, "h1"); err != nil || u != want {
				t.Fatalf("usage %+v, %v; want %+v", u, err, want)
			}
		}
		usage(Usage{Outputs: 50, Artifacts: 45})
		art("q1", "qa", 5) // 100 on h1
		if got := keys(out("h1", "p2", "qa", 50)); !slices.Equal(got, []string{"output:p1@host"}) {
			t.Fatalf("host quota evicted %v", got)
		}
		if got := keys(art("q2", "qa", 5)); !slices.Equal(got, []string{"output:p2@host"}) {
			t.Fatalf("host quota evicted %v", got)
		}
		if got := keys(art("q3", "qa", 50)); !slices.Equal(got, []string{"artifact:q1@host"}) { // not dev's older a2
			t.Fatalf("host quota evicted %v", got)
		}
		usage(Usage{Artifacts: 100})
		if u, _ := s.StorageUsage(ctx, "h2"); u.Outputs != 50 {
			t.Fatalf("h2's outputs: %+v", u)
		}
		// Larger than a quota by itself: refused, nothing evicted.
		if _, err := s.KeepOutput(ctx, Item{Kind: KindOutput, Host: "h1", Key: "big", Role: "dev", Size: 61}, q, noPlace); !errors.Is(err, ErrOverQuota) {
			t.Fatalf("an output over the role quota: %v", err)
		}
		if _, _, err := s.PutArtifact(ctx, "h1", Artifact{ID: "big", Role: "x", Size: 101}, nil, Quotas{Host: 100, Role: -1}, noPlace); !errors.Is(err, ErrOverQuota) {
			t.Fatalf("an artifact over the host quota: %v", err)
		}
		usage(Usage{Artifacts: 100})
		// dev's output evicts dev's artifact; the same key again replaces
		// the output.
		if got := keys(out("h1", "d1", "dev", 5)); !slices.Equal(got, []string{"artifact:a2@host"}) {
			t.Fatalf("host quota evicted %v", got)
		}
		if got := keys(out("h1", "d1", "dev", 7)); len(got) != 0 {
			t.Fatalf("a replaced output evicted %v", got)
		}
		usage(Usage{Outputs: 7, Artifacts: 55})
		// By role, as the role quota counts them: h1's saved outputs and
		// every artifact (not h2's outputs), most first, as many as asked.
		if got, err := s.StorageByRole(ctx, "h1", 10); err != nil || !slices.Equal(got, []RoleBytes{{"qa", 55}, {"dev", 7}}) {
			t.Fatalf("by role %+v, %v", got, err)
		}
		if got, err := s.StorageByRole(ctx, "h1", 1); err != nil || !slices.Equal(got, []RoleBytes{{"qa", 55}}) {
			t.Fatalf("the first role %+v, %v", got, err)
		}
	})
}

// TestStorageAccountingSurvivesReopen: the index is the accounting, so a
// store opened again counts what was kept, and a placer's error keeps
// nothing and evicts nothing.
func TestStorageAccountingSurvivesReopen(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		dir := t.TempDir()
		ctx := context.Background()
		s := open(t, dir)
		q := Quotas{Host: 1000, Role: 1000}
		for i := range 3 {
			if _, err := s.KeepOutput(ctx, Item{Host: "h", Key: fmt.Sprint("o", i), Role: "dev", Size: 300}, q, noPlace); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := s.PutArtifact(ctx, "h", Artifact{ID: "a", Role: "dev", Size: 50}, []byte("x"), q, noPlace); err != nil {
			t.Fatal(err)
		}
		failed := errors.New("disk full")
		if _, err := s.KeepOutput(ctx, Item{Host: "h", Key: "o9", Role: "dev", Size: 300}, q, func([]Eviction) error { return failed }); !errors.Is(err, failed) {
			t.Fatalf("a placer's error: %v", err)
		}
		s.Close()
		s = open(t, dir)
		if u, err := s.StorageUsage(ctx, "h"); err != nil || u != (Usage{Outputs: 900, Artifacts: 50}) {
			t.Fatalf("usage after reopening: %+v, %v", u, err)
		}
		ev, err := s.KeepOutput(ctx, Item{Host: "h", Key: "o3", Role: "dev", Size: 100}, q, noPlace)
		if got := keys(ev); err != nil || !slices.Equal(got, []string{"output:o0@role"}) {
			t.Fatalf("after reopening, evicted %v, %v", got, err)
		}
	})
}

// TestStorageQuotaProperty: whatever items many keepers keep at once, the
// bytes counted never pass a quota, and equal what is kept: the index and
// the files the placers made and removed agree.
func TestStorageQuotaProperty(t *testing.T) {
	engines(t, func(t *testing.T, open opener) {
		rapid.Check(t, func(rt *rapid.T) {
			s := open(t, t.TempDir())
			rt.Cleanup(func() { s.Close() }) // not at the test's end: a hundred runs would hold a hundred pools
			ctx := context.Background()
			roles := []string{"dev", "ops", "qa"}
			q := Quotas{Host: rapid.Int64Range(1, 400).Draw(rt, "host"), Role: rapid.Int64Range(1, 200).Draw(rt, "role")}
			type op struct {
				artifact bool
				role     string
				size     int64
			}
			var ops [][]op
			for range rapid.IntRange(1, 4).Draw(rt, "keepers") {
				ops = append(ops, rapid.SliceOfN(rapid.Custom(func(t *rapid.T) op {
					return op{rapid.Bool().Draw(t, "artifact"), rapid.SampledFrom(roles).Draw(t, "who"), rapid.Int64Range(1, 120).Draw(t, "size")}
				}), 1, 8).Draw(rt, "ops"))
			}
			var mu sync.Mutex
			disk := map[string]Item{} // what the placers hold
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for k, list := range ops {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i, o := range list {
						it := Item{Kind: KindOutput, Host: "h", Key: fmt.Sprintf("k%d-%d", k, i), Role: o.role, Size: o.size}
						if o.artifact {
							it.Kind = KindArtifact
						}
						place := func(ev []Eviction) error {
							mu.Lock()
							defer mu.Unlock()
							disk[it.Key] = it
							for _, e := range ev {
								if _, ok := disk[e.Key]; !ok {
									return fmt.Errorf("evicted %s, which is not held", e.Key)
								}
								if e.Kind == KindArtifact && e.Role != o.role {
									return fmt.Errorf("%s's item evicted %s's artifact %s", o.role, e.Role, e.Key)
								}
								delete(disk, e.Key)
							}
							return nil
						}
						var err error
						if o.artifact {
							_, _, err = s.PutArtifact(ctx, "h", Artifact{ID: it.Key, Role: o.role, Size: o.size}, nil, q, place)
						} else {
							_, err = s.KeepOutput(ctx, it, q, place)
						}
						if err != nil && !(errors.Is(err, ErrOverQuota) && (o.size > q.Role || o.size > q.Host)) && !errors.Is(err, ErrQuotaFull) {
							errs <- err
							return
						}
						if u, err := s.StorageUsage(ctx, "h"); err != nil || u.Outputs+u.Artifacts > q.Host {
							errs <- fmt.Errorf("usage %+v passes the host quota %d (%v)", u, q.Host, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				rt.Fatal(err)
			}
			u, err := s.StorageUsage(ctx, "h")
			if err != nil {
				rt.Fatal(err)
			}
			outputs, err := s.SavedOutputs(ctx, "h")
			if err != nil {
				rt.Fatal(err)
			}
			var held, heldOutputs int64
			byRole := map[string]int64{}
			for _, it := range disk {
				held += it.Size
				byRole[it.Role] += it.Size
				if it.Kind == KindOutput {
					heldOutputs += it.Size
				}
			}
			var indexed int64
			for _, it := range outputs {
				indexed += it.Size
				if disk[it.Key].Kind != KindOutput {
					rt.Fatalf("output %s is indexed, not held", it.Key)
				}
			}
			if u.Outputs+u.Artifacts != held || u.Outputs != indexed || indexed != heldOutputs {
				rt.Fatalf("usage %+v, indexed outputs %d; held %d (outputs %d)", u, indexed, held, heldOutputs)
			}
			if held > q.Host {
				rt.Fatalf("%d bytes held, host quota %d", held, q.Host)
			}
			for _, r := range slices.Sorted(maps.Keys(byRole)) {
				if byRole[r] > q.Role {
					rt.Fatalf("role %s holds %d bytes, quota %d", r, byRole[r], q.Role)
				}
			}
		})
	})
}
