-- Calls waiting for a person's approval (host.ApprovalQueue), shared by the
-- hosts of one store: the host whose call waits inserts the row (pending)
-- and waits; any host may decide it (approved, denied, modified) while it is
-- pending and before its deadline; the waiting host marks it expired when
-- its timeout passes first, or cancelled when its call ends. id is the
-- approval's id (appr_…), call_id the call's; arguments are the call's,
-- redacted; modified holds a modify decision's new arguments. run_id is the
-- waiting host's run (host_runs). Rows are forgotten a week past their
-- deadline.
CREATE TABLE approvals (
  id           TEXT PRIMARY KEY,
  call_id      TEXT NOT NULL DEFAULT '',
  tool         TEXT NOT NULL,
  group_id     TEXT NOT NULL,
  agent_id     TEXT NOT NULL DEFAULT '',
  role         TEXT NOT NULL DEFAULT '',
  arguments    TEXT NOT NULL,
  run_id       TEXT NOT NULL DEFAULT '',
  requested_at TEXT NOT NULL,
  deadline     TEXT NOT NULL,
  status       TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'approved', 'denied', 'modified', 'expired', 'cancelled')),
  decided_at   TEXT NOT NULL DEFAULT '',
  reason       TEXT NOT NULL DEFAULT '',
  modified     TEXT NOT NULL DEFAULT ''
);

CREATE INDEX approvals_status ON approvals (status, deadline);
CREATE INDEX approvals_deadline ON approvals (deadline);
