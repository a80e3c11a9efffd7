-- Artifacts belong to roles. An artifact is read by the role that stored it
-- (role_id: the role's id, so that a role made later under a deleted role's
-- name reads none of its artifacts; '' for the operator, who has no role)
-- and by the roles it was shared with (artifact_shares). Ids are random
-- from now on, saying nothing of the bytes; an artifact stored before keeps
-- its id (the SHA-256 of its bytes) and belongs to the role that stored
-- those bytes first. A role that stored the same bytes later puts them again.
ALTER TABLE artifacts ADD COLUMN role_id TEXT NOT NULL DEFAULT '';

UPDATE artifacts SET role_id = COALESCE((SELECT id FROM roles WHERE roles.name = artifacts.role), '');

CREATE TABLE artifact_shares (
  id      TEXT NOT NULL REFERENCES artifacts (id) ON DELETE CASCADE,
  role_id TEXT NOT NULL,
  PRIMARY KEY (id, role_id)
) WITHOUT ROWID;

-- An eviction is told to the roles that could read the artifact, one row
-- each; to any other, the id is unknown. The evictions remembered before
-- named no role, and are dropped.
DROP TABLE evicted_artifacts;

CREATE TABLE evicted_artifacts (
  id         TEXT NOT NULL,
  role_id    TEXT NOT NULL,
  evicted_at TEXT NOT NULL,
  PRIMARY KEY (id, role_id)
) WITHOUT ROWID;

CREATE INDEX evicted_artifacts_age ON evicted_artifacts (evicted_at);
