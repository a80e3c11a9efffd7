package host

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolhost/toolhost"
	"github.com/toolhost/toolhost/config"
	"github.com/toolhost/toolhost/store"
)

// storage keeps the host's saved outputs and artifacts within the store
// block's quotas (store.Store.KeepOutput, store.Store.PutArtifact): the
// host's id, which names the saved outputs it holds among those of the
// hosts sharing the store, and the evictions it made, for /metrics.
type storage struct {
	once  sync.Once
	id    string
	idErr error

	evictedOutputs, evictedArtifacts atomic.Int64
}

// tmpPrefix begins the names of the files being written, before they are
// put in place (under the storage lock) or removed.
const tmpPrefix = ".tmp-"

// staleTmp is the age past which sweepOutputs removes a file left being
// written (a process that died while writing it).
const staleTmp = time.Hour

// storageID is the host's id (see hostID), read once.
func (h *Host) storageID() (string, error) {
	h.storage.once.Do(func() { h.storage.id, h.storage.idErr = hostID(h.store.Dir()) })
	return h.storage.id, h.storage.idErr
}

// quotas are the store block's quotas, defaults applied.
func (h *Host) quotas() store.Quotas {
	return store.Quotas{Host: cmp.Or(h.cfg.Store.Quota, config.DefaultQuota), Role: cmp.Or(h.cfg.Store.RoleQuota, config.DefaultRoleQuota)}
}

// outputsDir is the directory of the host's saved outputs.
func (h *Host) outputsDir() string { return filepath.Join(h.store.Dir(), "outputs") }

// Path is where an artifact's bytes are kept, unless the store
// keeps them (store { artifacts = "database" }): the store block's artifact
// directory, by default <data_dir>/artifacts.
func (arts Artifacts) Path(id string) string {
	h := arts.h
	dir := h.cfg.Store.ArtifactDir
	if dir == "" {
		dir = filepath.Join(h.store.Dir(), "artifacts")
	}
	return filepath.Join(dir, id[:2], id)
}

// artifactsInStore reports whether artifacts' bytes are kept in the
// database.
func (h *Host) artifactsInStore() bool { return h.cfg.Store.Artifacts == "database" }

// overQuota says which quota, if any, an item of size bytes is larger than
// by itself.
func overQuota(q store.Quotas, size int64) string {
	switch {
	case q.Role >= 0 && size > q.Role:
		return fmt.Sprintf("%d bytes, more than the role quota of %d bytes (store { role_quota })", size, q.Role)
	case q.Host >= 0 && size > q.Host:
		return fmt.Sprintf("%d bytes, more than the host quota of %d bytes (store { quota })", size, q.Host)
	}
	return ""
}

// saveOutput keeps a cut output whole as the saved output key of a call
// by role, within the quotas, and returns its path; or "" and why it was
// not kept (too large for a quota, the file or its index entry not
// written).
func (h *Host) saveOutput(ctx context.Context, role, key string, data []byte) (path, notKept string) {
	q := h.quotas()
	if why := overQuota(q, int64(len(data))); why != "" {
		return "", why
	}
	id, err := h.storageID()
	dir := h.outputsDir()
	var tmp string
	if err == nil {
		tmp, err = writeTemp(dir, data)
	}
	if err != nil {
		return "", fmt.Sprintf("not written: %v", err)
	}
	path = filepath.Join(dir, key)
	var placed bool
	evicted, err := h.store.KeepOutput(ctx, store.Item{Kind: store.KindOutput, Host: id, Key: key, Role: role, Size: int64(len(data))}, q,
		func(ev []store.Eviction) error {
			if err := os.Rename(tmp, path); err != nil {
				return err
			}
			placed = true
			h.removeEvicted(ev)
			return nil
		})
	if err != nil {
		removeFile(h, tmp, path, placed)
		if errors.Is(err, store.ErrOverQuota) || errors.Is(err, store.ErrQuotaFull) {
			return "", err.Error()
		}
		return "", fmt.Sprintf("not indexed: %v", err)
	}
	h.evicted(evicted)
	return path, ""
}

// removeFile removes what an item that was not kept left: its file
// written aside, or, when it was put in place before the store's
// transaction failed, the file in place.
func removeFile(h *Host, tmp, path string, placed bool) {
	if placed {
		tmp = path
	}
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		h.log.Error("removing a file not kept", "path", tmp, "error", err)
	}
}

// Put keeps an artifact's bytes, stored by an agent of its Role
// (whose id is its RoleID, the role that owns it; both "" for the
// operator), as a new artifact with a new random id, within the quotas: in
// the database or in the artifact directory ([Artifacts.Path]), indexed
// in the store, private to the host. The oldest saved outputs, then the
// role's own oldest artifacts, are evicted to make room, never another
// role's; an artifact larger than a quota by itself, or that only other
// roles' artifacts would make room for, is refused with code policy.
func (arts Artifacts) Put(ctx context.Context, a store.Artifact, data []byte) (store.Artifact, error) {
	h := arts.h
	q := h.quotas()
	a.Size = int64(len(data))
	if why := overQuota(q, a.Size); why != "" {
		return a, toolhost.Errorf(toolhost.CodePolicy, "artifact not kept: %s", why)
	}
	id, err := h.storageID()
	if err != nil {
		return a, toolhost.Errorf(toolhost.CodeInternal, "artifact: %w", err)
	}
	a.ID = newArtifactID()
	kept, tmp, path := data, "", "" // the bytes, when the store keeps them
	if !h.artifactsInStore() {
		path, kept = h.Artifacts().Path(a.ID), nil
		if tmp, err = writeTemp(filepath.Dir(path), data); err != nil {
			return a, toolhost.Errorf(toolhost.CodeInternal, "artifact: %w", err)
		}
	}
	var placed bool
	got, evicted, err := h.store.PutArtifact(ctx, id, a, kept, q, func(ev []store.Eviction) error {
		if tmp != "" {
			if err := os.Rename(tmp, path); err != nil {
				return err
			}
			placed = true
		}
		h.removeEvicted(ev)
		return nil
	})
	if err != nil {
		if tmp != "" {
			removeFile(h, tmp, path, placed)
		}
		if errors.Is(err, store.ErrOverQuota) || errors.Is(err, store.ErrQuotaFull) {
			return a, toolhost.Errorf(toolhost.CodePolicy, "artifact not kept: %w", err)
		}
		return a, toolhost.Errorf(toolhost.CodeInternal, "artifact: %w", err)
	}
	h.evicted(evicted)
	return got, nil
}

// newArtifactID is a new artifact's id: 32 random bytes in hex, which say
// nothing of its bytes. It has the shape of the ids of the artifacts stored
// before (the SHA-256 of their bytes), which keep them.
func newArtifactID() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// writeTemp writes data to a new private file in dir (made private if
// missing), named with tmpPrefix, and returns its path.
func writeTemp(dir string, data []byte) (string, error) {
	if err := os.MkdirAll(dir, store.DirMode); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*") // store.FileMode (0600)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// removeEvicted removes the files of evicted items: saved outputs (all the
// host's own: a quota never evicts another host's) and artifacts kept in
// files (the database drops its own).
func (h *Host) removeEvicted(evicted []store.Eviction) {
	for _, e := range evicted {
		path := filepath.Join(h.outputsDir(), e.Key)
		if e.Kind == store.KindArtifact {
			if h.artifactsInStore() {
				continue
			}
			path = h.Artifacts().Path(e.Key)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.log.Error("removing an evicted item's file", "path", path, "error", err)
		}
	}
}

// evicted records evictions: a storage.evicted event each, and the
// metrics' counts.
func (h *Host) evicted(evicted []store.Eviction) {
	q := h.quotas()
	for _, e := range evicted {
		bound := q.Host
		if e.Quota == store.QuotaRole {
			bound = q.Role
		}
		h.events.Emit(store.Event{Type: store.EventStorageEvicted, Role: e.Role, Payload: map[string]any{
			"kind": e.Kind, "key": e.Key, "role": e.Role, "size": e.Size, "quota": e.Quota, "bound": bound, "created": e.CreatedAt}})
		if e.Kind == store.KindOutput {
			h.storage.evictedOutputs.Add(1)
		} else {
			h.storage.evictedArtifacts.Add(1)
		}
	}
	if len(evicted) > 0 {
		h.log.Info("evicted stored items to keep within the storage quotas", "items", len(evicted))
	}
}

// sweepOutputs makes the host's saved outputs and their index agree after a
// process died between the two: a file the index does not name is removed
// (and a file left being written for over staleTmp), an entry whose file is
// missing is dropped. It runs under the storage lock, so no output being
// saved is mistaken for a stray.
func (h *Host) sweepOutputs(ctx context.Context) error {
	id, err := h.storageID()
	if err != nil {
		return err
	}
	dir := h.outputsDir()
	return h.store.SweepOutputs(ctx, id, func(indexed map[string]bool) ([]string, error) {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		present := make(map[string]bool, len(entries))
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, tmpPrefix) {
				if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < staleTmp {
					continue
				}
			} else if indexed[name] {
				present[name] = true
				continue
			}
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
		var missing []string
		for k := range indexed {
			if !present[k] {
				missing = append(missing, k)
			}
		}
		return missing, nil
	})
}

// StorageUsage is what the storage quotas count now, against them.
type StorageUsage struct {
	// Outputs is the bytes of this host's saved outputs, Artifacts those
	// of every artifact: together what the host quota counts.
	Outputs   int64 `json:"outputs"`
	Artifacts int64 `json:"artifacts"`
	// Quota and RoleQuota are the store block's quotas, defaults applied
	// ([config.QuotaOff]: no bound).
	Quota     int64 `json:"quota"`
	RoleQuota int64 `json:"roleQuota"`
	// Roles are the roles whose items take the most, most first (at most
	// maxUsageRoles), as the role quota counts them.
	Roles []store.RoleBytes `json:"roles"`
	// Events is the bytes the audit events take, measured at the last
	// retention pass; 0 before the first.
	Events int64 `json:"events"`
}

// maxUsageRoles bounds the roles [Artifacts.Usage] lists.
const maxUsageRoles = 10

// Usage returns what the storage quotas count now (this host's saved
// outputs and every artifact), the quotas, and the roles that take the
// most.
func (arts Artifacts) Usage(ctx context.Context) (StorageUsage, error) {
	h := arts.h
	q := h.quotas()
	out := StorageUsage{Quota: q.Host, RoleQuota: q.Role, Events: h.retention.bytes.Load()}
	id, err := h.storageID()
	if err != nil {
		return out, toolhost.Errorf(toolhost.CodeInternal, "storage: %w", err)
	}
	u, err := h.store.StorageUsage(ctx, id)
	if err != nil {
		return out, toolhost.Errorf(toolhost.CodeInternal, "%w", err)
	}
	out.Outputs, out.Artifacts = u.Outputs, u.Artifacts
	if out.Roles, err = h.store.StorageByRole(ctx, id, maxUsageRoles); err != nil {
		return out, toolhost.Errorf(toolhost.CodeInternal, "%w", err)
	}
	if out.Roles == nil {
		out.Roles = []store.RoleBytes{}
	}
	return out, nil
}

// The storage metrics, read at each scrape.
var (
	storageBytesDesc = prometheus.NewDesc("toolhost_storage_bytes",
		"Bytes the host's state takes, by kind: outputs (this host's saved outputs) and artifacts (every artifact on the store), which the storage quotas count; events (the audit events in the store, measured at the last retention pass).", []string{"kind"}, nil)
	storageEvictionsDesc = prometheus.NewDesc("toolhost_storage_evictions_total",
		"Items this host evicted to keep within the storage quotas, by kind: outputs or artifacts.", []string{"kind"}, nil)
)

// storageCollector reads the storage metrics: the bytes of events once a
// retention pass measured them.
type storageCollector struct{ h *Host }

// Describe implements prometheus.Collector.
func (storageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- storageBytesDesc
	ch <- storageEvictionsDesc
}

// Collect implements prometheus.Collector.
func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.h
	if id, err := h.storageID(); err == nil {
		if u, err := h.store.StorageUsage(context.Background(), id); err == nil {
			ch <- prometheus.MustNewConstMetric(storageBytesDesc, prometheus.GaugeValue, float64(u.Outputs), "outputs")
			ch <- prometheus.MustNewConstMetric(storageBytesDesc, prometheus.GaugeValue, float64(u.Artifacts), "artifacts")
		}
	}
	if h.retention.lastPass.Load() != 0 {
		ch <- prometheus.MustNewConstMetric(storageBytesDesc, prometheus.GaugeValue, float64(h.retention.bytes.Load()), "events")
	}
	ch <- prometheus.MustNewConstMetric(storageEvictionsDesc, prometheus.CounterValue, float64(h.storage.evictedOutputs.Load()), "outputs")
	ch <- prometheus.MustNewConstMetric(storageEvictionsDesc, prometheus.CounterValue, float64(h.storage.evictedArtifacts.Load()), "artifacts")
}
