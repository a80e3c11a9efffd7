-- As migrations/sqlite/022: the credential and approval columns, filled
-- from the payloads already stored (but those holding \u0000, which json's
-- ->> cannot read as text), and the agent and tool indexes, made on every
-- partition.
ALTER TABLE events ADD COLUMN credential TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN approval TEXT NOT NULL DEFAULT '';
UPDATE events SET credential = payload::json ->> 'credential'
  WHERE payload LIKE '%"credential":"%' AND payload NOT LIKE '%\\u0000%';
UPDATE events SET approval = COALESCE(payload::json -> 'approval' ->> 'decision', '')
  WHERE payload LIKE '%"approval":{%' AND payload NOT LIKE '%\\u0000%';

CREATE INDEX events_agent ON events (agent_id, id);
CREATE INDEX events_tool ON events (tool, id);
CREATE INDEX events_failed ON events (id) WHERE type = 'tool_call.failed';
CREATE INDEX events_approved ON events (id) WHERE approval <> '';
CREATE INDEX events_parent ON events (parent_id) WHERE parent_id <> '';
