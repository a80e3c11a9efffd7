-- Audit events (seed 004): every step of a tool call, group and plugin
-- changes. ts is UTC RFC 3339 with a fixed nine-digit fraction, so that text
-- order is time order; payload is a JSON object; parent_id links event trees.
CREATE TABLE events (
  id        INTEGER PRIMARY KEY AUTOINCREMENT,
  ts        TEXT NOT NULL,
  type      TEXT NOT NULL,
  call_id   TEXT NOT NULL DEFAULT '',
  agent_id  TEXT NOT NULL DEFAULT '',
  role      TEXT NOT NULL DEFAULT '',
  tool      TEXT NOT NULL DEFAULT '',
  group_id  TEXT NOT NULL DEFAULT '',
  parent_id TEXT NOT NULL DEFAULT '',
  payload   TEXT NOT NULL DEFAULT '{}'
);

CREATE INDEX events_tool ON events (tool);
CREATE INDEX events_agent ON events (agent_id);
CREATE INDEX events_ts ON events (ts);
CREATE INDEX events_call ON events (call_id);
