-- What a sessionless MCP client holds, shared by the hosts of one store, so
-- that any of them answers any of its requests.
--
-- Its agents: an agent an MCP client names (by its credential and the key it
-- chose) has a client_key, and a role, credential and client_key name one
-- agent not final (agents_client), which every host finds. used_at is when a
-- request last used it (written at most every few minutes): a host ends it
-- idle only when no host has used it for the idle timeout.
ALTER TABLE agents ADD COLUMN client_key TEXT NOT NULL DEFAULT '';
ALTER TABLE agents ADD COLUMN used_at TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX agents_client ON agents (role_id, credential, client_key)
  WHERE client_key != '' AND status NOT IN ('failed', 'terminated');

-- A host run says it lives until alive_until, which it renews every third
-- of the runtime lease: a task or a held call whose run has passed it (or
-- ended) is the work of a host that stopped.
ALTER TABLE host_runs ADD COLUMN alive_until TEXT NOT NULL DEFAULT '';

-- Calls run as tasks (the tasks extension), by the run that runs them: any
-- host answers tasks/get from the row, and tasks/cancel marks it cancelled,
-- which the running host hears and acts on. result is the call's result
-- (JSON) once completed. Rows are deleted an hour after the task ended.
CREATE TABLE mcp_tasks (
  id         TEXT PRIMARY KEY,
  agent_id   TEXT NOT NULL,
  credential TEXT NOT NULL,
  run_id     TEXT NOT NULL,
  status     TEXT NOT NULL CHECK (status IN ('working', 'completed', 'cancelled', 'failed')),
  message    TEXT NOT NULL DEFAULT '',
  result     TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX mcp_tasks_credential ON mcp_tasks (credential, created_at);
CREATE INDEX mcp_tasks_ended ON mcp_tasks (updated_at) WHERE status != 'working';

-- Rounds of held calls: a call waiting for its client's answers (an
-- input_required result, named by its request state) runs on the host that
-- holds it; a retry that reaches another host leaves the client's answers
-- here (answered), the holding host resumes the call with them and leaves
-- its reply (done): the call's result, or its next round. Rows go once
-- past expires_at.
CREATE TABLE mcp_rounds (
  state      TEXT PRIMARY KEY,
  agent_id   TEXT NOT NULL,
  method     TEXT NOT NULL,
  run_id     TEXT NOT NULL,
  status     TEXT NOT NULL CHECK (status IN ('asking', 'answered', 'resuming', 'done', 'cancelled')),
  answers    TEXT NOT NULL DEFAULT '',
  reply      TEXT NOT NULL DEFAULT '',
  expires_at TEXT NOT NULL
);
CREATE INDEX mcp_rounds_run ON mcp_rounds (run_id, status);
