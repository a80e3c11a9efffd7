-- Roles and agents, as migrations/sqlite/001. Text columns
-- compared by order (timestamps) use the C collation, so that text order is
-- byte order whatever the database's locale. Tables whose changes other
-- hosts follow notify toolhost_changes with their name.
CREATE FUNCTION toolhost_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('toolhost_changes', TG_TABLE_NAME);
  RETURN NULL;
END
$$;

CREATE TABLE roles (
  id             TEXT PRIMARY KEY,
  name           TEXT NOT NULL UNIQUE,
  description    TEXT NOT NULL DEFAULT '',
  prompt         TEXT NOT NULL DEFAULT '',
  tool_groups    TEXT,
  tools_allow    TEXT NOT NULL DEFAULT '[]',
  tools_deny     TEXT NOT NULL DEFAULT '[]',
  created_by     TEXT NOT NULL DEFAULT '',
  created_at     TEXT COLLATE "C" NOT NULL,
  status         TEXT NOT NULL DEFAULT 'active',
  llm_service_id TEXT NOT NULL DEFAULT '',
  source         TEXT NOT NULL CHECK (source IN ('config', 'store'))
);

CREATE TRIGGER roles_notify AFTER INSERT OR UPDATE OR DELETE ON roles
  FOR EACH STATEMENT EXECUTE FUNCTION toolhost_notify();

CREATE TABLE agents (
  id         TEXT PRIMARY KEY,
  role_id    TEXT NOT NULL REFERENCES roles (id) ON DELETE CASCADE,
  parent_id  TEXT NOT NULL DEFAULT '',
  status     TEXT NOT NULL DEFAULT 'active',
  created_at TEXT COLLATE "C" NOT NULL
);

CREATE INDEX agents_role ON agents (role_id);

CREATE TRIGGER agents_notify AFTER INSERT OR UPDATE OR DELETE ON agents
  FOR EACH STATEMENT EXECUTE FUNCTION toolhost_notify();
