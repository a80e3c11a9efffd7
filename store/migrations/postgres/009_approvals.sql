-- Calls waiting for a person's approval, as migrations/sqlite/009. Other
-- hosts follow changes through toolhost_changes: a waiting host learns of a
-- decision made through another at once.
CREATE TABLE approvals (
  id           TEXT PRIMARY KEY,
  call_id      TEXT NOT NULL DEFAULT '',
  tool         TEXT NOT NULL,
  group_id     TEXT NOT NULL,
  agent_id     TEXT NOT NULL DEFAULT '',
  role         TEXT NOT NULL DEFAULT '',
  arguments    TEXT NOT NULL,
  run_id       TEXT NOT NULL DEFAULT '',
  requested_at TEXT COLLATE "C" NOT NULL,
  deadline     TEXT COLLATE "C" NOT NULL,
  status       TEXT NOT NULL DEFAULT 'pending'
    CHECK (status IN ('pending', 'approved', 'denied', 'modified', 'expired', 'cancelled')),
  decided_at   TEXT COLLATE "C" NOT NULL DEFAULT '',
  reason       TEXT NOT NULL DEFAULT '',
  modified     TEXT NOT NULL DEFAULT ''
);

CREATE INDEX approvals_status ON approvals (status, deadline);
CREATE INDEX approvals_deadline ON approvals (deadline);

CREATE TRIGGER approvals_notify AFTER INSERT OR UPDATE OR DELETE ON approvals
  FOR EACH STATEMENT EXECUTE FUNCTION toolhost_notify();
