-- Role-scoped API tokens. Only the SHA-256 of a token is kept; a token dies
-- with its role.
CREATE TABLE tokens (
  name         TEXT PRIMARY KEY,
  role_id      TEXT NOT NULL REFERENCES roles (id) ON DELETE CASCADE,
  hash         TEXT NOT NULL UNIQUE,
  created_at   TEXT NOT NULL,
  last_used_at TEXT NOT NULL DEFAULT '',
  expires_at   TEXT NOT NULL DEFAULT ''
);

CREATE INDEX tokens_role ON tokens (role_id);
