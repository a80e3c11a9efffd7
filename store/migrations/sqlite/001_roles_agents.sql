-- Roles and agents. tool_groups is a JSON array, NULL when the
-- role has none configured (then every group is available).
CREATE TABLE roles (
  id             TEXT PRIMARY KEY,
  name           TEXT NOT NULL UNIQUE,
  description    TEXT NOT NULL DEFAULT '',
  prompt         TEXT NOT NULL DEFAULT '',
  tool_groups    TEXT,
  tools_allow    TEXT NOT NULL DEFAULT '[]',
  tools_deny     TEXT NOT NULL DEFAULT '[]',
  created_by     TEXT NOT NULL DEFAULT '',
  created_at     TEXT NOT NULL,
  status         TEXT NOT NULL DEFAULT 'active',
  llm_service_id TEXT NOT NULL DEFAULT '',
  source         TEXT NOT NULL CHECK (source IN ('config', 'store'))
);

CREATE TABLE agents (
  id         TEXT PRIMARY KEY,
  role_id    TEXT NOT NULL REFERENCES roles (id) ON DELETE CASCADE,
  parent_id  TEXT NOT NULL DEFAULT '',
  status     TEXT NOT NULL DEFAULT 'active',
  created_at TEXT NOT NULL
);

CREATE INDEX agents_role ON agents (role_id);
