-- Audit events, as migrations/sqlite/002: ids from a sequence,
-- so they grow with time within each host's commits.
CREATE TABLE events (
  id        BIGSERIAL PRIMARY KEY,
  ts        TEXT COLLATE "C" NOT NULL,
  type      TEXT COLLATE "C" NOT NULL,
  call_id   TEXT NOT NULL DEFAULT '',
  agent_id  TEXT NOT NULL DEFAULT '',
  role      TEXT NOT NULL DEFAULT '',
  tool      TEXT NOT NULL DEFAULT '',
  group_id  TEXT NOT NULL DEFAULT '',
  parent_id TEXT NOT NULL DEFAULT '',
  payload   TEXT NOT NULL DEFAULT '{}'
);

CREATE INDEX events_call ON events (call_id);
