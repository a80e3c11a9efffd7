-- Role-scoped API tokens, as migrations/sqlite/005.
CREATE TABLE tokens (
  name         TEXT PRIMARY KEY,
  role_id      TEXT NOT NULL REFERENCES roles (id) ON DELETE CASCADE,
  hash         TEXT NOT NULL UNIQUE,
  created_at   TEXT COLLATE "C" NOT NULL,
  last_used_at TEXT COLLATE "C" NOT NULL DEFAULT '',
  expires_at   TEXT COLLATE "C" NOT NULL DEFAULT ''
);

CREATE INDEX tokens_role ON tokens (role_id);

-- Only deletions matter to other hosts' caches (last_used_at changes often).
CREATE TRIGGER tokens_notify AFTER DELETE ON tokens
  FOR EACH STATEMENT EXECUTE FUNCTION toolhost_notify();
