package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/internal/pgtest"
	"github.com/toolhost/toolhost/internal/proctest"
	"github.com/toolhost/toolhost/sdk"
	"github.com/toolhost/toolhost/store"
)

// bigOutputGroup is the test plugin "bigoutput": a tool whose output, n
// bytes of its tag repeated, is cut and kept whole as a command's is.
func bigOutputGroup() *sdk.Group {
	type bigArgs struct {
		N   int    `json:"n"`
		Tag string `json:"tag"`
	}
	return &sdk.Group{ID: "bigout", Description: "big outputs", Tools: []sdk.Tool{
		sdk.NewTool("big", "Print n bytes.", func(_ context.Context, r *sdk.Request[bigArgs]) (*sdk.Result, error) {
			tag := r.Args.Tag + "\n"
			return sdk.Text(strings.Repeat(tag, r.Args.N/len(tag)+1)[:r.Args.N]), nil
		}, sdk.KeepTail()),
	}}
}

// storageEngines runs f on each engine: open gives a host's options for
// its data directory dir, the same store each time dir is opened again
// (SQLite: the host opens it from cfg.DataDir; PostgreSQL: a store on one
// fresh database per test, which the hosts of several dirs share).
func storageEngines(t *testing.T, f func(t *testing.T, open func(t *testing.T, dir string) *Options)) {
	t.Run(store.DriverSQLite, func(t *testing.T) { f(t, func(*testing.T, string) *Options { return nil }) })
	t.Run(store.DriverPostgres, func(t *testing.T) {
		dsn := pgtest.Start(t)
		f(t, func(t *testing.T, dir string) *Options {
			st, err := store.OpenWith(context.Background(), dir, store.Options{Driver: store.DriverPostgres, DSN: dsn})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return &Options{Store: st}
		})
	})
}

// quotaHost runs a host on dir with the bigoutput plugin and the quotas,
// and an agent of each role named.
func quotaHost(t *testing.T, dir string, opts *Options, q, roleQ int64, roles ...string) (*Host, map[string]string) {
	t.Helper()
	cfg := &config.Config{DataDir: dir, Plugins: []config.Plugin{testPlugin("bigoutput", "bigoutput", nil)},
		Store: config.Store{Quota: q, RoleQuota: roleQ}}
	cfg.Limits = config.Limits{Timeout: proctest.Patience, MaxOutputLines: 2000, MaxOutputBytes: 51200}
	h := runHost(t, cfg, opts)
	agents := map[string]string{}
	for _, r := range roles {
		if _, err := h.Roles().Create(context.Background(), RoleSpec{Name: r}); err != nil && !errors.Is(err, store.ErrExists) {
			t.Fatal(err)
		}
		a, err := h.Agents().Create(context.Background(), r, store.Agent{})
		if err != nil {
			t.Fatal(err)
		}
		agents[r] = a.ID
	}
	return h, agents
}

// big calls the big tool as agent with an output of n bytes; the call must
// succeed whatever happens to its output.
func big(t *testing.T, h *Host, agent string, n int) *toolhost.Result {
	t.Helper()
	res, err := h.Call(context.Background(), &toolhost.CallRequest{Tool: "big", Arguments: fmt.Appendf(nil, `{"n": %d, "tag": %q}`, n, agent),
		Context: toolhost.CallContext{AgentID: agent}})
	if err != nil || !res.OK {
		t.Fatalf("a call with a %d-byte output: %+v, %v", n, res, err)
	}
	return res
}

// outputFiles are the saved outputs' files of a host and their bytes.
func outputFiles(t *testing.T, h *Host) (map[string]int64, int64) {
	t.Helper()
	entries, err := os.ReadDir(h.outputsDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out, total := map[string]int64{}, int64(0)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = info.Size()
		total += info.Size()
	}
	return out, total
}

// evictions are the storage.evicted events' kinds, keys and quotas.
func evictions(t *testing.T, h *Host) []string {
	t.Helper()
	if err := h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := h.Events().List(context.Background(), store.EventFilter{Type: store.EventStorageEvicted})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s %s %s %s %v", e.Payload["kind"], e.Role, e.Payload["key"], e.Payload["quota"], e.Payload["size"]))
	}
	return out
}

const kib = 1024

// scrape reads the storage metrics, keyed name{kind="…"}.
func scrape(t *testing.T, h *Host) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, name := range []string{"toolhost_storage_bytes", "toolhost_storage_evictions_total"} {
		for _, kind := range []string{"outputs", "artifacts"} {
			v, _ := gathered(t, h.Metrics(), name, "kind="+kind)
			out[fmt.Sprintf("%s{kind=%q}", name, kind)] = int64(v)
		}
	}
	return out
}

// TestSavedOutputQuotas: saved outputs are kept within the role's quota
// and the host's, the oldest (of the role, then of the host) evicted first,
// each eviction an event and counted in /metrics; an output larger than a
// quota is not kept and the call says so; a host started again counts what
// it kept, and reconciles its files with their index.
func TestSavedOutputQuotas(t *testing.T) {
	storageEngines(t, func(t *testing.T, open func(*testing.T, string) *Options) {
		dir := t.TempDir()
		h, agents := quotaHost(t, dir, open(t, dir), 700*kib, 500*kib, "dev", "ops")
		var paths []string
		for range 3 { // 600 KiB for dev: the third evicts the first
			res := big(t, h, agents["dev"], 200*kib)
			path, _ := res.Meta["full_output"].(string)
			if b, err := os.ReadFile(path); err != nil || len(b) != 200*kib {
				t.Fatalf("meta %v: %d bytes, %v", res.Meta, len(b), err)
			}
			paths = append(paths, path)
		}
		if _, err := os.Stat(paths[0]); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the oldest output of dev was not removed: %v", err)
		}
		for range 2 { // 800 KiB on the host: the second evicts the host's oldest, dev's
			paths = append(paths, big(t, h, agents["ops"], 200*kib).Meta["full_output"].(string))
		}
		want := []string{
			fmt.Sprintf("output dev %s role %d", filepath.Base(paths[0]), 200*kib),
			fmt.Sprintf("output dev %s host %d", filepath.Base(paths[1]), 200*kib),
		}
		if got := evictions(t, h); !slices.Equal(got, want) {
			t.Fatalf("evictions %q, want %q", got, want)
		}
		// Larger than the role's quota: not kept, and the call says why.
		res := big(t, h, agents["ops"], 600*kib)
		if res.Meta["full_output"] != nil || !strings.Contains(fmt.Sprint(res.Meta["full_output_not_kept"]), "role quota") || !res.TruncatedLines && !res.TruncatedBytes {
			t.Fatalf("an output over the role quota: meta %v", res.Meta)
		}
		files, total := outputFiles(t, h)
		if len(files) != 3 || total != 600*kib {
			t.Fatalf("files %v (%d bytes), want dev's third and ops's two", files, total)
		}
		m := scrape(t, h)
		if m[`toolhost_storage_bytes{kind="outputs"}`] != 600*kib || m[`toolhost_storage_evictions_total{kind="outputs"}`] != 2 ||
			m[`toolhost_storage_evictions_total{kind="artifacts"}`] != 0 {
			t.Fatalf("metrics %v", m)
		}
		// Started again: the accounting is the index; a stray file is
		// removed, an entry whose file went is dropped.
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "outputs", "stray.log"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(paths[2]); err != nil {
			t.Fatal(err)
		}
		h, _ = quotaHost(t, dir, open(t, dir), 700*kib, 500*kib)
		if _, total := outputFiles(t, h); total != 400*kib || scrape(t, h)[`toolhost_storage_bytes{kind="outputs"}`] != 400*kib {
			t.Fatalf("after a restart: %d bytes on disk, metrics %v", total, scrape(t, h))
		}
		big(t, h, agents["ops"], 200*kib) // ops's 600 KiB: its oldest goes
		if got := evictions(t, h); len(got) != 3 || !strings.HasPrefix(got[2], "output ops "+filepath.Base(paths[3])+" role") {
			t.Fatalf("evictions after a restart %q", got)
		}
	})
}

// TestOutputNotKeptWhenWriteFails: when the outputs directory cannot be
// written, the call succeeds, its meta says the output was not kept and
// why, and nothing is counted.
func TestOutputNotKeptWhenWriteFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "outputs"), nil, 0o600); err != nil { // a file where the directory goes
		t.Fatal(err)
	}
	h, agents := quotaHost(t, dir, nil, 0, 0, "dev")
	res := big(t, h, agents["dev"], 100*kib)
	if why, _ := res.Meta["full_output_not_kept"].(string); res.Meta["full_output"] != nil || !strings.Contains(why, "not written") {
		t.Fatalf("meta %v", res.Meta)
	}
	if u, err := h.Store().StorageUsage(context.Background(), h.storage.id); err != nil || u.Outputs != 0 {
		t.Fatalf("usage %+v, %v", u, err)
	}
}

// TestArtifactQuotas: artifacts count in the same quotas: making room for
// one evicts the oldest saved outputs first, then the role's oldest
// artifacts (files removed, or bytes dropped from the database); an
// artifact larger than a quota is refused with code policy.
func TestArtifactQuotas(t *testing.T) {
	for _, where := range []string{"files", "database"} {
		t.Run(where, func(t *testing.T) {
			storageEngines(t, func(t *testing.T, open func(*testing.T, string) *Options) {
				dir := t.TempDir()
				opts := open(t, dir)
				cfg := &config.Config{DataDir: dir, Plugins: []config.Plugin{testPlugin("bigoutput", "bigoutput", nil)},
					Store: config.Store{Quota: 1000 * kib, RoleQuota: 500 * kib, Artifacts: where}}
				cfg.Limits = config.Limits{Timeout: proctest.Patience, MaxOutputLines: 2000, MaxOutputBytes: 51200}
				h := runHost(t, cfg, opts)
				dev, err := h.Roles().Create(context.Background(), RoleSpec{Name: "dev"})
				if err != nil {
					t.Fatal(err)
				}
				agent, _ := h.Agents().Create(context.Background(), "dev", store.Agent{})
				put := func(fill byte, size int) (store.Artifact, error) {
					data := []byte(strings.Repeat(string(fill), size))
					return h.Artifacts().Put(context.Background(), store.Artifact{Role: "dev", RoleID: dev.ID}, data)
				}
				a1, err := put('a', 150*kib)
				if err != nil {
					t.Fatal(err)
				}
				out := big(t, h, agent.ID, 200*kib).Meta["full_output"].(string)
				if _, err := put('b', 200*kib); err != nil { // 550 KiB: the output goes, not the older artifact
					t.Fatal(err)
				}
				if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the output made room for an artifact is still there: %v", err)
				}
				if _, err := put('c', 200*kib); err != nil { // 550 KiB again: no output left, the oldest artifact goes
					t.Fatal(err)
				}
				if _, err := h.Store().Artifact(context.Background(), a1.ID, dev.ID); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("the oldest artifact: %v", err)
				}
				if where == "files" {
					if _, err := os.Stat(h.Artifacts().Path(a1.ID)); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("the evicted artifact's file: %v", err)
					}
				} else if _, err := h.Store().ArtifactData(context.Background(), a1.ID, dev.ID); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("the evicted artifact's bytes: %v", err)
				}
				ev := evictions(t, h)
				if len(ev) != 2 || !strings.HasPrefix(ev[0], "output dev ") || ev[1] != fmt.Sprintf("artifact dev %s role %d", a1.ID, 150*kib) {
					t.Fatalf("evictions %q", ev)
				}
				if _, err := put('d', 501*kib); !errors.Is(err, toolhost.ErrPolicy) || !strings.Contains(err.Error(), "role quota") {
					t.Fatalf("an artifact over the role quota: %v", err)
				}
				if m := scrape(t, h); m[`toolhost_storage_bytes{kind="artifacts"}`] != 400*kib || m[`toolhost_storage_evictions_total{kind="artifacts"}`] != 1 {
					t.Fatalf("metrics %v", m)
				}
			})
		})
	}
}

// TestArtifactsOfOtherRolesStay: the same bytes stored by two roles are
// two artifacts, with ids of their own that are not the bytes' SHA-256,
// and two files; one role's quota evicts its own copy alone, and the
// host's quota full of other roles' artifacts refuses a role's artifact
// (policy) rather than evict one of theirs.
func TestArtifactsOfOtherRolesStay(t *testing.T) {
	storageEngines(t, func(t *testing.T, open func(*testing.T, string) *Options) {
		dir := t.TempDir()
		h, _ := quotaHost(t, dir, open(t, dir), 300*kib, 200*kib, "dev", "ops", "qa")
		ctx := context.Background()
		put := func(role string, data []byte) (store.Artifact, error) {
			r, err := h.Roles().Get(role)
			if err != nil {
				t.Fatal(err)
			}
			return h.Artifacts().Put(ctx, store.Artifact{Role: role, RoleID: r.ID}, data)
		}
		must := func(a store.Artifact, err error) store.Artifact {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		same := []byte(strings.Repeat("s", 100*kib))
		sum := sha256.Sum256(same)
		ops, dev := must(put("ops", same)), must(put("dev", same))
		if ops.ID == dev.ID || ops.ID == hex.EncodeToString(sum[:]) || dev.ID == hex.EncodeToString(sum[:]) {
			t.Fatalf("ids %s and %s for the same bytes (SHA-256 %x)", ops.ID, dev.ID, sum)
		}
		must(put("dev", make([]byte, 150*kib))) // 250 KiB of dev's: its copy goes
		opsRole, _ := h.Roles().Get("ops")
		if _, err := h.Store().Artifact(ctx, ops.ID, opsRole.ID); err != nil {
			t.Fatalf("ops's copy after dev's eviction: %v", err)
		}
		if _, err := os.Stat(h.Artifacts().Path(ops.ID)); err != nil {
			t.Fatalf("ops's file after dev's eviction: %v", err)
		}
		if _, err := os.Stat(h.Artifacts().Path(dev.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("dev's evicted file: %v", err)
		}
		must(put("ops", make([]byte, 50*kib))) // 300 KiB in all: dev 150, ops 150
		if _, err := put("qa", []byte("x")); !errors.Is(err, toolhost.ErrPolicy) || !errors.Is(err, store.ErrQuotaFull) {
			t.Fatalf("qa's artifact in a host quota full of others': %v", err)
		}
		if ev := evictions(t, h); len(ev) != 1 || ev[0] != fmt.Sprintf("artifact dev %s role %d", dev.ID, 100*kib) {
			t.Fatalf("evictions %q", ev)
		}
	})
}

// TestOutputFloodIsBounded: the output flood, an agent saving big
// outputs call after call, many at once: every call succeeds, and the
// bytes on disk never pass the quotas and always equal what the index
// counts, on each host of a shared store.
func TestOutputFloodIsBounded(t *testing.T) {
	storageEngines(t, func(t *testing.T, open func(*testing.T, string) *Options) {
		dir := t.TempDir()
		h, agents := quotaHost(t, dir, open(t, dir), 1000*kib, 600*kib, "dev", "ops")
		var wg sync.WaitGroup
		for i := range 8 {
			agent := agents[[]string{"dev", "ops"}[i%2]]
			wg.Go(func() {
				for j := range 6 {
					big(t, h, agent, (60+40*((i+j)%5))*kib)
				}
			})
		}
		wg.Wait()
		files, total := outputFiles(t, h)
		outputs, err := h.Store().SavedOutputs(context.Background(), h.storage.id)
		if err != nil {
			t.Fatal(err)
		}
		var indexed int64
		byRole := map[string]int64{}
		for _, o := range outputs {
			indexed += o.Size
			byRole[o.Role] += o.Size
			if files[o.Key] != o.Size {
				t.Errorf("output %s: %d bytes indexed, %d on disk", o.Key, o.Size, files[o.Key])
			}
		}
		if total != indexed || len(files) != len(outputs) || total > 1000*kib || byRole["dev"] > 600*kib || byRole["ops"] > 600*kib {
			t.Fatalf("%d files, %d bytes on disk; %d indexed (%d bytes, by role %v)", len(files), total, len(outputs), indexed, byRole)
		}
		if ev := evictions(t, h); len(ev) < 48-len(outputs)-8 { // every call saved; those not kept evicted, or were refused
			t.Fatalf("%d evictions for 48 saves, %d kept", len(ev), len(outputs))
		}
	})
}

// TestSharedStoreHostsKeepTheirOwnOutputs: two hosts on one PostgreSQL
// database: each evicts only its own saved outputs (whose files it holds),
// counts only its own, and both see the artifacts.
func TestSharedStoreHostsKeepTheirOwnOutputs(t *testing.T) {
	dsn := pgtest.Start(t)
	var hosts []*Host
	var agents []string
	for range 2 {
		dir := t.TempDir()
		st, err := store.OpenWith(context.Background(), dir, store.Options{Driver: store.DriverPostgres, DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		h, a := quotaHost(t, dir, &Options{Store: st}, 500*kib, 500*kib, "dev")
		hosts, agents = append(hosts, h), append(agents, a["dev"])
	}
	a, b := hosts[0], hosts[1]
	first := big(t, a, agents[0], 300*kib).Meta["full_output"].(string)
	big(t, b, agents[1], 300*kib)
	big(t, b, agents[1], 300*kib) // B's 600 KiB: B's own oldest goes, never A's
	if _, err := os.Stat(first); err != nil {
		t.Fatalf("A's output, evicted by B: %v", err)
	}
	if ev := evictions(t, b); len(ev) != 1 {
		t.Fatalf("evictions %q", ev)
	}
	for _, h := range hosts {
		if _, total := outputFiles(t, h); total != 300*kib || scrape(t, h)[`toolhost_storage_bytes{kind="outputs"}`] != 300*kib {
			t.Fatalf("host %s: %d bytes on disk, metrics %v", h.storage.id, total, scrape(t, h))
		}
	}
}

// BenchmarkQuotaCheck measures what keeping a saved output costs beyond
// writing it: the quota check and index entry (the store's transaction
// under the storage lock), with 1000 outputs kept, and the whole save of a
// 64 KiB output (written aside, placed, indexed).
func BenchmarkQuotaCheck(b *testing.B) {
	dir := b.TempDir()
	h := runHost(b, &config.Config{DataDir: dir}, nil)
	ctx := context.Background()
	id, _ := h.storageID()
	for i := range 1000 {
		if _, err := h.Store().KeepOutput(ctx, store.Item{Host: id, Key: fmt.Sprint("seed", i), Role: "dev", Size: 1000}, h.quotas(), func([]store.Eviction) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("index", func(b *testing.B) {
		for i := range b.N {
			if _, err := h.Store().KeepOutput(ctx, store.Item{Host: id, Key: fmt.Sprint("k", i%100), Role: "dev", Size: 1000}, h.quotas(), func([]store.Eviction) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	data := []byte(strings.Repeat("x", 64*kib))
	b.Run("save64KiB", func(b *testing.B) {
		for i := range b.N {
			if _, why := h.saveOutput(ctx, "dev", fmt.Sprint("s", i%100), data); why != "" {
				b.Fatal(why)
			}
		}
	})
}
