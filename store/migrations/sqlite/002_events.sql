-- Audit events: every step of a tool call, group and plugin
-- changes. ts is UTC RFC 3339 with a fixed nine-digit fraction, so that text
-- order is time order; payload is a JSON object; parent_id links event trees.
-- Writes are the hot path (two rows per tool call), so the table keeps one
-- secondary index, by call id; the other filters read backwards from the
-- newest row (ids grow with time) until they have their limit.
CREATE TABLE events (
  id        INTEGER PRIMARY KEY,
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

CREATE INDEX events_call ON events (call_id);
