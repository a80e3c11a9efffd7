-- Storage quotas, as migrations/sqlite/013.
CREATE TABLE saved_outputs (
  host_id    TEXT NOT NULL,
  key        TEXT NOT NULL,
  role       TEXT NOT NULL DEFAULT '',
  size       BIGINT NOT NULL,
  created_at TEXT COLLATE "C" NOT NULL,
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
  evicted_at TEXT COLLATE "C" NOT NULL
);

CREATE INDEX evicted_artifacts_age ON evicted_artifacts (evicted_at);
