package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// The kinds of stored items the storage quotas count.
const (
	KindOutput   = "output"   // a cut command output saved whole under a host's data_dir/outputs
	KindArtifact = "artifact" // an artifact (put_artifact), in the artifact directory or the database
)

// The quotas an [Eviction] makes room in.
const (
	QuotaRole = "role" // the bytes of one role's items
	QuotaHost = "host" // the bytes of a host's saved outputs and of every artifact
)

// ErrOverQuota is wrapped by the error of keeping an item larger than a
// quota by itself: evicting everything else would not make room for it.
var ErrOverQuota = errors.New("larger than the quota")

// ErrQuotaFull is wrapped by the error of keeping an item when the host's
// quota is full of what it may not evict for it: other roles' artifacts.
var ErrQuotaFull = errors.New("the quota is full of other roles' artifacts")

// Quotas bound the bytes of saved outputs and artifacts, as
// [Store.KeepOutput] and [Store.PutArtifact] keep them; a negative bound is
// none. Host bounds the bytes of one host's saved outputs and of every
// artifact (which all hosts of a store share); Role those of the items of
// one role among them.
type Quotas struct {
	Host, Role int64
}

// Item is one thing a storage quota counts.
type Item struct {
	// Kind is [KindOutput] or [KindArtifact].
	Kind string `json:"kind"`
	// Key names it: a saved output's file name, an artifact's id.
	Key string `json:"key"`
	// Role is the role of the agent whose call made it.
	Role string `json:"role"`
	// Host is the id of the host holding a saved output's file; "" for an
	// artifact.
	Host string `json:"host,omitempty"`
	// Size is its bytes, on disk or in the database.
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"createdAt"`
}

// Eviction is an item removed to make room for another.
type Eviction struct {
	Item
	// Quota is the quota it made room in: [QuotaRole] or [QuotaHost].
	Quota string `json:"quota"`
}

// Placer puts the bytes of an item being kept in place and removes the
// files of the items evicted for it. [Store.KeepOutput] and
// [Store.PutArtifact] call it inside their transaction, which holds the
// storage lock of every host on the store: what it does to the files is
// never seen half done by another keeper. Its error rolls the transaction
// back, so it should place the new bytes before removing the evicted ones.
type Placer func(evicted []Eviction) error

// KeepOutput indexes a saved output (its Kind, Key, Role, Host and Size)
// within the quotas q, evicting the oldest items in the scope of a quota it
// would pass (saved outputs first, then its role's artifacts), and calls
// place. An output the host indexed under the same key before is replaced.
// An output larger than a quota is not indexed: the error wraps
// [ErrOverQuota]; one that only other roles' artifacts would make room for
// neither: the error wraps [ErrQuotaFull].
func (s *Store) KeepOutput(ctx context.Context, it Item, q Quotas, place Placer) ([]Eviction, error) {
	var evicted []Eviction
	err := s.tx(ctx, func(tx db) (err error) {
		if err := s.eng.lock(ctx, tx, "storage"); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `DELETE FROM saved_outputs WHERE host_id = ? AND key = ?`, it.Host, it.Key); err != nil {
			return err
		}
		if evicted, err = s.makeRoom(ctx, tx, it, q); err != nil {
			return err
		}
		if _, err := tx.exec(ctx, `INSERT INTO saved_outputs (host_id, key, role, size, created_at) VALUES (?, ?, ?, ?, ?)`,
			it.Host, it.Key, it.Role, it.Size, now()); err != nil {
			return err
		}
		return place(evicted)
	})
	if err != nil {
		return nil, fmt.Errorf("store: keep output %s: %w", it.Key, err)
	}
	return evicted, nil
}

// PutArtifact indexes a new artifact a (its ID, new, chosen by the caller;
// its Role and RoleID, the role that owns it), with its bytes when data is
// not nil (a store { artifacts = "database" }; nil: they are kept in the
// artifact directory, which place writes), within the quotas q for the
// role a.Role, as [Store.KeepOutput] keeps an output of host (the host
// putting it, whose saved outputs may be evicted), in one transaction. The
// same bytes stored again, by any role, are a new artifact: nothing is
// shared between entries, so evicting one never touches another.
func (s *Store) PutArtifact(ctx context.Context, host string, a Artifact, data []byte, q Quotas, place Placer) (Artifact, []Eviction, error) {
	var evicted []Eviction
	created := now()
	a.CreatedAt = parseTime(created)
	err := s.tx(ctx, func(tx db) (err error) {
		if err := s.eng.lock(ctx, tx, "storage"); err != nil {
			return err
		}
		if evicted, err = s.makeRoom(ctx, tx, Item{Kind: KindArtifact, Key: a.ID, Role: a.Role, Host: host, Size: a.Size}, q); err != nil {
			return err
		}
		if _, err = tx.exec(ctx, `INSERT INTO artifacts (id, name, mime, size, created_by, role, role_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.Name, a.MIME, a.Size, a.CreatedBy, a.Role, a.RoleID, created); err != nil {
			return err
		}
		if data != nil {
			if _, err = tx.exec(ctx, `INSERT INTO artifact_data (id, data) VALUES (?, ?)`, a.ID, data); err != nil {
				return err
			}
		}
		return place(evicted)
	})
	if err != nil {
		return a, nil, fmt.Errorf("store: put artifact: %w", err)
	}
	return a, evicted, nil
}

// makeRoom evicts, in tx, the oldest items in the scope of each quota that
// keeping it would pass, the role's first: saved outputs of it.Host first,
// then artifacts, of it.Role alone whatever the quota, since one role's
// storing never evicts another role's artifact. It returns what it evicted;
// the host's quota full of what it may not evict is an error that wraps
// [ErrQuotaFull].
func (s *Store) makeRoom(ctx context.Context, tx db, it Item, q Quotas) ([]Eviction, error) {
	var evicted []Eviction
	for _, sc := range []struct {
		quota string
		bound int64
	}{{QuotaRole, q.Role}, {QuotaHost, q.Host}} {
		if sc.bound < 0 {
			continue
		}
		if it.Size > sc.bound {
			return nil, fmt.Errorf("%d bytes, %s quota %d: %w", it.Size, sc.quota, sc.bound, ErrOverQuota)
		}
		role, byRole := it.Role, sc.quota == QuotaRole
		used, err := s.used(ctx, tx, it.Host, role, byRole)
		if err != nil {
			return nil, err
		}
		need := used + it.Size - sc.bound
		for _, kind := range []string{KindOutput, KindArtifact} {
			if need <= 0 {
				break
			}
			items, err := oldest(ctx, tx, kind, it.Host, role, byRole || kind == KindArtifact, need)
			if err != nil {
				return nil, err
			}
			for _, e := range items {
				if err := evict(ctx, tx, e); err != nil {
					return nil, err
				}
				evicted = append(evicted, Eviction{Item: e, Quota: sc.quota})
				need -= e.Size
			}
		}
		if need > 0 {
			return nil, fmt.Errorf("%d bytes, %s quota %d, %d bytes short: %w", it.Size, sc.quota, sc.bound, need, ErrQuotaFull)
		}
	}
	return evicted, nil
}

// used is the bytes a quota counts: the saved outputs of host and every
// artifact, of role alone when byRole.
func (s *Store) used(ctx context.Context, tx db, host, role string, byRole bool) (int64, error) {
	var n int64
	q := `SELECT (SELECT COALESCE(SUM(size), 0) FROM saved_outputs WHERE host_id = ?) + (SELECT COALESCE(SUM(size), 0) FROM artifacts)`
	args := []any{host}
	if byRole {
		q = `SELECT (SELECT COALESCE(SUM(size), 0) FROM saved_outputs WHERE host_id = ? AND role = ?) + (SELECT COALESCE(SUM(size), 0) FROM artifacts WHERE role = ?)`
		args = []any{host, role, role}
	}
	err := tx.queryRow(ctx, q, args...).Scan(&n)
	return n, err
}

// oldest returns the oldest items of kind in a quota's scope (see used)
// whose sizes add up to need bytes, or all of them if they add up to less.
func oldest(ctx context.Context, tx db, kind, host, role string, byRole bool, need int64) ([]Item, error) {
	from, args := `SELECT id AS key, role, size, created_at, '' AS host_id FROM artifacts`, []any{}
	if kind == KindOutput {
		from, args = `SELECT key, role, size, created_at, host_id FROM saved_outputs WHERE host_id = ?`, []any{host}
	}
	if byRole {
		if kind == KindOutput {
			from += ` AND role = ?`
		} else {
			from += ` WHERE role = ?`
		}
		args = append(args, role)
	}
	return queryAll(ctx, tx, "oldest "+kind+"s", func(row scanner) (Item, error) {
		it := Item{Kind: kind}
		var created string
		err := row.Scan(&it.Key, &it.Role, &it.Size, &created, &it.Host)
		it.CreatedAt = parseTime(created)
		return it, err
	}, `SELECT key, role, size, created_at, host_id FROM (SELECT key, role, size, created_at, host_id, SUM(size) OVER (ORDER BY created_at, key) AS run FROM (`+
		from+`) s) t WHERE run - size < ? ORDER BY created_at, key`, append(args, need)...)
}

// evict removes an item's index entry (and an artifact's bytes kept in the
// database, and its shares), remembering an evicted artifact for each role
// that could read it.
func evict(ctx context.Context, tx db, it Item) error {
	if it.Kind == KindOutput {
		_, err := tx.exec(ctx, `DELETE FROM saved_outputs WHERE host_id = ? AND key = ?`, it.Host, it.Key)
		return err
	}
	at := now()
	if _, err := tx.exec(ctx, `INSERT INTO evicted_artifacts (id, role_id, evicted_at) SELECT id, role_id, ? FROM artifacts WHERE id = ?
		UNION SELECT id, role_id, ? FROM artifact_shares WHERE id = ? ON CONFLICT DO NOTHING`, at, it.Key, at, it.Key); err != nil {
		return err
	}
	if _, err := tx.exec(ctx, `DELETE FROM artifacts WHERE id = ?`, it.Key); err != nil {
		return err
	}
	// The newest maxTombstones are enough to tell an eviction from a mistyped id.
	_, err := tx.exec(ctx, `DELETE FROM evicted_artifacts WHERE evicted_at < (SELECT evicted_at FROM evicted_artifacts ORDER BY evicted_at DESC LIMIT 1 OFFSET ?)`, maxTombstones)
	return err
}

// maxTombstones bounds the evictions remembered.
const maxTombstones = 10000

// Evicted returns when a quota evicted the artifact id that the role with
// the id roleID could read, among the latest evictions; the error wraps
// [ErrNotFound] when it does not remember one, or the role could not read
// it.
func (s *Store) Evicted(ctx context.Context, id, roleID string) (time.Time, error) {
	var at string
	err := s.db.queryRow(ctx, `SELECT evicted_at FROM evicted_artifacts WHERE id = ? AND role_id = ?`, id, roleID).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("store: evicted artifact %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("store: evicted artifact %s: %w", id, err)
	}
	return parseTime(at), nil
}

// Usage is the bytes the storage quotas count, by kind.
type Usage struct {
	// Outputs is the bytes of one host's saved outputs.
	Outputs int64
	// Artifacts is the bytes of every artifact.
	Artifacts int64
}

// StorageUsage returns the bytes of the saved outputs of host and of the
// artifacts, as the quotas count them.
func (s *Store) StorageUsage(ctx context.Context, host string) (Usage, error) {
	var u Usage
	err := s.db.queryRow(ctx, `SELECT (SELECT COALESCE(SUM(size), 0) FROM saved_outputs WHERE host_id = ?), (SELECT COALESCE(SUM(size), 0) FROM artifacts)`, host).
		Scan(&u.Outputs, &u.Artifacts)
	if err != nil {
		return u, fmt.Errorf("store: storage usage: %w", err)
	}
	return u, nil
}

// RoleBytes is the bytes of one role's items, as its role quota counts
// them.
type RoleBytes struct {
	Role  string `json:"role"`  // the role's name ("" for the operator's items)
	Bytes int64  `json:"bytes"` // the bytes of its items
}

// StorageByRole returns the bytes each role's items take, as the role quota
// counts them (the role's saved outputs of host and its artifacts): the
// limit roles that take the most, most first.
func (s *Store) StorageByRole(ctx context.Context, host string, limit int) ([]RoleBytes, error) {
	return queryAll(ctx, s.db, "storage by role", func(row scanner) (r RoleBytes, err error) {
		err = row.Scan(&r.Role, &r.Bytes)
		return r, err
	}, `SELECT role, SUM(size) AS bytes FROM (SELECT role, size FROM saved_outputs WHERE host_id = ? UNION ALL SELECT role, size FROM artifacts) u
		GROUP BY role ORDER BY bytes DESC, role LIMIT ?`, host, limit)
}

// SavedOutputs returns the saved outputs of host, oldest first.
func (s *Store) SavedOutputs(ctx context.Context, host string) ([]Item, error) {
	return queryAll(ctx, s.db, "saved outputs", func(row scanner) (Item, error) {
		it := Item{Kind: KindOutput, Host: host}
		var created string
		err := row.Scan(&it.Key, &it.Role, &it.Size, &created)
		it.CreatedAt = parseTime(created)
		return it, err
	}, `SELECT key, role, size, created_at FROM saved_outputs WHERE host_id = ? ORDER BY created_at, key`, host)
}

// SweepOutputs reconciles the index of host's saved outputs with its files
// after a crash, under the storage lock: sweep gets the keys indexed, removes
// the files that are not among them, and returns the keys whose files are
// missing, whose entries are removed.
func (s *Store) SweepOutputs(ctx context.Context, host string, sweep func(indexed map[string]bool) (missing []string, err error)) error {
	err := s.tx(ctx, func(tx db) error {
		if err := s.eng.lock(ctx, tx, "storage"); err != nil {
			return err
		}
		keys, err := queryAll(ctx, tx, "saved outputs", func(row scanner) (k string, err error) {
			err = row.Scan(&k)
			return k, err
		}, `SELECT key FROM saved_outputs WHERE host_id = ?`, host)
		if err != nil {
			return err
		}
		indexed := make(map[string]bool, len(keys))
		for _, k := range keys {
			indexed[k] = true
		}
		missing, err := sweep(indexed)
		if err != nil {
			return err
		}
		for _, k := range missing {
			if _, err := tx.exec(ctx, `DELETE FROM saved_outputs WHERE host_id = ? AND key = ?`, host, k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: sweep saved outputs: %w", err)
	}
	return nil
}
