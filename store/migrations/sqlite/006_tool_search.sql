-- Deferred tool groups: a role's groups whose tools an agent loads on
-- demand (tool_search's load_tools), and the tools each agent has loaded.
ALTER TABLE roles ADD COLUMN deferred_groups TEXT NOT NULL DEFAULT '[]';

CREATE TABLE loaded_tools (
  agent_id  TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  tool      TEXT NOT NULL,
  loaded_at TEXT NOT NULL,
  PRIMARY KEY (agent_id, tool)
);
