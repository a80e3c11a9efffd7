-- Storage quotas (store { quota, role_quota }): what the quotas count.
-- saved_outputs indexes the cut command outputs a host saved whole under
-- its data_dir/outputs (key is the file's name; host_id the host holding
-- it, several hosts may share a store); artifacts gain the role of the
-- agent that stored them. evicted_artifacts remembers the artifacts a quota
-- evicted, so that reading one says so rather than "not found".
CREATE TABLE saved_outputs (
  host_id    TEXT NOT NULL,
  key        TEXT NOT NULL,
  role       TEXT NOT NULL DEFAULT '',
  size       INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (host_id, key)
);

-- The quotas' sums and their oldest-first order, by host and by role.
CREATE INDEX saved_outputs_age ON saved_outputs (host_id, created_at);

CREATE INDEX saved_outputs_role ON saved_outputs (host_id, role, created_at, size);

ALTER TABLE artifacts ADD COLUMN role TEXT NOT NULL DEFAULT '';

CREATE INDEX artifacts_age ON artifacts (created_at);

CREATE INDEX artifacts_role ON artifacts (role, created_at, size);

CREATE TABLE evicted_artifacts (
  id         TEXT PRIMARY KEY,
  evicted_at TEXT NOT NULL
);

CREATE INDEX evicted_artifacts_age ON evicted_artifacts (evicted_at);
