-- The agent runtime: what an agent is doing, its
-- conversation, its mailbox, and the artifacts agents store.
-- kind is 'runtime' for an agent the runtime runs (spawned with a model
-- loop), 'external' for an identity only (an MCP client, the root agent).
ALTER TABLE agents ADD COLUMN kind       TEXT NOT NULL DEFAULT 'external';
ALTER TABLE agents ADD COLUMN task       TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN answer     TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN error_code TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN error      TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN turns      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN tokens     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN updated_at TEXT NOT NULL DEFAULT '';
-- owner names the process running a runtime agent ('' while none does), so
-- that two processes sharing the data directory never run one agent twice.
ALTER TABLE agents ADD COLUMN owner      TEXT NOT NULL DEFAULT '';

CREATE INDEX agents_parent ON agents (parent_id);

-- An agent's conversation with its model, in order. tool_calls is a JSON
-- array (assistant messages), '' otherwise.
CREATE TABLE agent_messages (
  agent_id     TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  seq          INTEGER NOT NULL,
  role         TEXT NOT NULL,
  content      TEXT NOT NULL DEFAULT '',
  tool_calls   TEXT NOT NULL DEFAULT '',
  tool_call_id TEXT NOT NULL DEFAULT '',
  name         TEXT NOT NULL DEFAULT '',
  ts           TEXT NOT NULL,
  PRIMARY KEY (agent_id, seq)
) WITHOUT ROWID;

-- Messages between agents (send_message); read_at is '' until the
-- recipient takes the message into its conversation.
CREATE TABLE mailbox (
  id         INTEGER PRIMARY KEY,
  to_agent   TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  from_agent TEXT NOT NULL DEFAULT '',
  body       TEXT NOT NULL,
  created_at TEXT NOT NULL,
  read_at    TEXT NOT NULL DEFAULT ''
);

CREATE INDEX mailbox_to ON mailbox (to_agent, read_at);

-- Artifacts: content-addressed (id is the SHA-256 of the bytes, which live
-- under data_dir/artifacts); the first put's name and type are kept.
CREATE TABLE artifacts (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL DEFAULT '',
  mime       TEXT NOT NULL DEFAULT '',
  size       INTEGER NOT NULL,
  created_by TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL
);
