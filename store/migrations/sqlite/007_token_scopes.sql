-- Token scopes: a token opens its role's routes (scope 'role'), or GET
-- /metrics alone (scope 'metrics', for a Prometheus server, without a role).
-- SQLite cannot drop a NOT NULL, so the table is rebuilt.
CREATE TABLE tokens_scoped (
  name         TEXT PRIMARY KEY,
  scope        TEXT NOT NULL DEFAULT 'role' CHECK (scope IN ('role', 'metrics')),
  role_id      TEXT REFERENCES roles (id) ON DELETE CASCADE,
  hash         TEXT NOT NULL UNIQUE,
  created_at   TEXT NOT NULL,
  last_used_at TEXT NOT NULL DEFAULT '',
  expires_at   TEXT NOT NULL DEFAULT '',
  CHECK ((scope = 'role') = (role_id IS NOT NULL))
);

INSERT INTO tokens_scoped (name, scope, role_id, hash, created_at, last_used_at, expires_at)
  SELECT name, 'role', role_id, hash, created_at, last_used_at, expires_at FROM tokens;

DROP TABLE tokens;

ALTER TABLE tokens_scoped RENAME TO tokens;

CREATE INDEX tokens_role ON tokens (role_id);
