-- What a sessionless MCP client holds, as migrations/sqlite/021. The rows
-- notify toolhost_changes: a cancelled task, a round answered or replied
-- to reach the other hosts at once. A task's progress note,
-- and an agent's used_at, notify nobody.
ALTER TABLE agents ADD COLUMN client_key TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN used_at TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE UNIQUE INDEX agents_client ON agents (role_id, credential, client_key)
  WHERE client_key != '' AND status NOT IN ('failed', 'terminated');

DROP TRIGGER agents_notify_update ON agents;
CREATE TRIGGER agents_notify_update AFTER UPDATE ON agents
  FOR EACH ROW WHEN ((to_jsonb(OLD) - 'lease_until' - 'used_at') IS DISTINCT FROM (to_jsonb(NEW) - 'lease_until' - 'used_at'))
  EXECUTE FUNCTION toolhost_notify();

ALTER TABLE host_runs ADD COLUMN alive_until TEXT COLLATE "C" NOT NULL DEFAULT '';

CREATE TABLE mcp_tasks (
  id         TEXT PRIMARY KEY,
  agent_id   TEXT NOT NULL,
  credential TEXT NOT NULL,
  run_id     TEXT NOT NULL,
  status     TEXT NOT NULL CHECK (status IN ('working', 'completed', 'cancelled', 'failed')),
  message    TEXT NOT NULL DEFAULT '',
  result     TEXT NOT NULL DEFAULT '',
  created_at TEXT COLLATE "C" NOT NULL,
  updated_at TEXT COLLATE "C" NOT NULL
);
CREATE INDEX mcp_tasks_credential ON mcp_tasks (credential, created_at);
CREATE INDEX mcp_tasks_ended ON mcp_tasks (updated_at) WHERE status != 'working';

CREATE TRIGGER mcp_tasks_notify AFTER UPDATE ON mcp_tasks
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION toolhost_notify();

CREATE TABLE mcp_rounds (
  state      TEXT PRIMARY KEY,
  agent_id   TEXT NOT NULL,
  method     TEXT NOT NULL,
  run_id     TEXT NOT NULL,
  status     TEXT NOT NULL CHECK (status IN ('asking', 'answered', 'resuming', 'done', 'cancelled')),
  answers    TEXT NOT NULL DEFAULT '',
  reply      TEXT NOT NULL DEFAULT '',
  expires_at TEXT COLLATE "C" NOT NULL
);
CREATE INDEX mcp_rounds_run ON mcp_rounds (run_id, status);

CREATE TRIGGER mcp_rounds_notify AFTER UPDATE ON mcp_rounds
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION toolhost_notify();
