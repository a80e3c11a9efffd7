package agents_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/host"
	"github.com/toolhost/toolhost/store"
)

// quotas sets the store block's quotas.
func quotas(total, role int64) func(*config.Config, *host.Options) {
	return func(c *config.Config, _ *host.Options) { c.Store.Quota, c.Store.RoleQuota = total, role }
}

// TestCommandOutputFloodIsBounded: the output flood through the real
// command module: run_command printing megabytes, call after call. Every
// call succeeds; the saved outputs on disk never pass the role's quota, the
// oldest evicted as each new one is saved.
func TestCommandOutputFloodIsBounded(t *testing.T) {
	const roleQuota = 3 << 20
	e := start(t, `{"roles": {}}`, "", "", "", quotas(4<<20, roleQuota))
	const calls = 6
	for i := range calls {
		res, err := e.call("", "run_command", map[string]any{"command": "head -c 1500000 /dev/urandom | base64"})
		if err != nil || !res.OK || res.Meta["full_output"] == nil {
			t.Fatalf("call %d: %+v, %v", i, res.Meta, err)
		}
		var total int64
		entries, _ := os.ReadDir(filepath.Join(e.data, "outputs"))
		for _, ent := range entries {
			if info, err := ent.Info(); err == nil {
				total += info.Size()
			}
		}
		if total > roleQuota || len(entries) != 1 {
			t.Fatalf("after call %d: %d files, %d bytes on disk, role quota %d", i, len(entries), total, roleQuota)
		}
	}
	if err := e.h.Events().Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs, err := e.h.Events().List(context.Background(), store.EventFilter{Type: store.EventStorageEvicted})
	if err != nil || len(evs) != calls-1 {
		t.Fatalf("%d evictions, want %d: %v", len(evs), calls-1, err)
	}
}

// TestEvictedArtifact: put_artifact past the role's quota evicts the oldest
// artifact, and get_artifact of it says it was evicted; an artifact larger
// than the quota is refused with code policy.
func TestEvictedArtifact(t *testing.T) {
	e := start(t, `{"roles": {}}`, "", "", "", quotas(1<<20, 16))
	var ids []string
	for _, content := range []string{"aaaaaaaaaa", "bbbbbbbbbb"} {
		res, err := e.call("", "put_artifact", map[string]any{"content": content})
		if err != nil || !res.OK {
			t.Fatalf("put_artifact: %+v, %v", res, err)
		}
		ids = append(ids, res.Meta[toolhost.MetaStructuredContent].(map[string]any)["id"].(string))
	}
	res, err := e.call("", "get_artifact", map[string]string{"id": ids[0]})
	if err != nil || res.OK || res.Error.Code != toolhost.CodeValidation || !strings.Contains(res.Error.Message, "was evicted") {
		t.Fatalf("get_artifact of an evicted artifact: %+v, %v", res, err)
	}
	if res, err := e.call("", "get_artifact", map[string]string{"id": ids[1]}); err != nil || !res.OK || res.Stdout != "bbbbbbbbbb" {
		t.Fatalf("get_artifact of the newer: %+v, %v", res, err)
	}
	res, err = e.call("", "put_artifact", map[string]any{"content": strings.Repeat("c", 17)})
	if err != nil || res.OK || res.Error.Code != toolhost.CodePolicy || !strings.Contains(res.Error.Message, "role quota") {
		t.Fatalf("put_artifact over the role quota: %+v, %v", res, err)
	}
}
