-- The filters of the audit trail (store.EventFilter): the credential an
-- event's payload names and its approval's decision get columns of their
-- own, filled from the payloads already stored; the agent and tool filters
-- get an index that reads a page of their events backwards from the newest
-- without visiting the others. Each costs the event writer an index entry
-- per row, so role and credential, dear to write and few in number, have
-- none (docs/operating.md).
ALTER TABLE events ADD COLUMN credential TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN approval TEXT NOT NULL DEFAULT '';
UPDATE events SET credential = json_extract(payload, '$.credential')
  WHERE payload LIKE '%"credential":%' AND json_type(payload, '$.credential') = 'text';
UPDATE events SET approval = json_extract(payload, '$.approval.decision')
  WHERE payload LIKE '%"approval":{%' AND json_type(payload, '$.approval.decision') = 'text';

CREATE INDEX events_agent ON events (agent_id, id);
CREATE INDEX events_tool ON events (tool, id);
-- The outcomes (store/events.go, outcomeWhere): failures and approvals are
-- few among the events, so only theirs are indexed, each query naming the
-- index's condition as it is written here; an ok call is found reading
-- backwards, since most calls are. A call's children (the agents it
-- spawned, what it printed): most events have no parent, and are left out.
CREATE INDEX events_failed ON events (id) WHERE type = 'tool_call.failed';
CREATE INDEX events_approved ON events (id) WHERE approval <> '';
CREATE INDEX events_parent ON events (parent_id) WHERE parent_id <> '';
