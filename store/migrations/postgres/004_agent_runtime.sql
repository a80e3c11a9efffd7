-- The agent runtime, as migrations/sqlite/004.
ALTER TABLE agents ADD COLUMN kind       TEXT NOT NULL DEFAULT 'external';
ALTER TABLE agents ADD COLUMN task       TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN answer     TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN error_code TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN error      TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN turns      BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN tokens     BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN updated_at TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN owner      TEXT NOT NULL DEFAULT '';

CREATE INDEX agents_parent ON agents (parent_id);

CREATE TABLE agent_messages (
  agent_id     TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  seq          INTEGER NOT NULL,
  role         TEXT NOT NULL,
  content      TEXT NOT NULL DEFAULT '',
  tool_calls   TEXT NOT NULL DEFAULT '',
  tool_call_id TEXT NOT NULL DEFAULT '',
  name         TEXT NOT NULL DEFAULT '',
  ts           TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (agent_id, seq)
);

CREATE TABLE mailbox (
  id         BIGSERIAL PRIMARY KEY,
  to_agent   TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  from_agent TEXT NOT NULL DEFAULT '',
  body       TEXT NOT NULL,
  created_at TEXT COLLATE "C" NOT NULL,
  read_at    TEXT COLLATE "C" NOT NULL DEFAULT ''
);

CREATE INDEX mailbox_to ON mailbox (to_agent, read_at);

CREATE TRIGGER mailbox_notify AFTER INSERT OR UPDATE OR DELETE ON mailbox
  FOR EACH STATEMENT EXECUTE FUNCTION toolhost_notify();

CREATE TABLE artifacts (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL DEFAULT '',
  mime       TEXT NOT NULL DEFAULT '',
  size       BIGINT NOT NULL,
  created_by TEXT NOT NULL DEFAULT '',
  created_at TEXT COLLATE "C" NOT NULL
);
