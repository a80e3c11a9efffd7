-- The filters of the audit trail (store.EventFilter): the credential an
-- event's payload names gets a column of its own, filled from the payloads
-- already stored, and each filter an index that reads a page of its events
-- backwards from the newest without visiting the others. These cost the
-- event writer an index entry each per row (docs/operating.md).
ALTER TABLE events ADD COLUMN credential TEXT NOT NULL DEFAULT '';
UPDATE events SET credential = json_extract(payload, '$.credential')
  WHERE payload LIKE '%"credential":%' AND json_type(payload, '$.credential') = 'text';

CREATE INDEX events_agent ON events (agent_id, id);
CREATE INDEX events_role ON events (role, id);
CREATE INDEX events_tool ON events (tool, id);
CREATE INDEX events_credential ON events (credential, id);
CREATE INDEX events_type ON events (type, id);
-- A call's children (the agents it spawned, what it printed): most events
-- have no parent, and are left out.
CREATE INDEX events_parent ON events (parent_id) WHERE parent_id <> '';
