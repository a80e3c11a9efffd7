-- Deferred tool groups, as migrations/sqlite/006.
ALTER TABLE roles ADD COLUMN deferred_groups TEXT NOT NULL DEFAULT '[]';

CREATE TABLE loaded_tools (
  agent_id  TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  tool      TEXT NOT NULL,
  loaded_at TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (agent_id, tool)
);
