-- Artifacts belong to roles, as migrations/sqlite/018.
ALTER TABLE artifacts ADD COLUMN role_id TEXT NOT NULL DEFAULT '';

UPDATE artifacts SET role_id = COALESCE((SELECT id FROM roles WHERE roles.name = artifacts.role), '');

CREATE TABLE artifact_shares (
  id      TEXT NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
  role_id TEXT NOT NULL,
  PRIMARY KEY (id, role_id)
);

DROP TABLE evicted_artifacts;

CREATE TABLE evicted_artifacts (
  id         TEXT NOT NULL,
  role_id    TEXT NOT NULL,
  evicted_at TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (id, role_id)
);

CREATE INDEX evicted_artifacts_age ON evicted_artifacts (evicted_at);
