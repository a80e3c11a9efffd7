-- Call limits (a role's limit blocks): one token bucket per role, agent and
-- limit target, kept as GCRA's theoretical arrival time (tat, microseconds
-- since the epoch on the database's clock): the bucket is full once tat is
-- past, so a row whose tat is past is the same as no row, and is swept.
-- seen is the clock of the last take, granted its verdict (for RETURNING).
CREATE TABLE rate_buckets (
  role    TEXT NOT NULL,
  agent   TEXT NOT NULL,
  target  TEXT NOT NULL,
  tat     INTEGER NOT NULL,
  seen    INTEGER NOT NULL,
  granted INTEGER NOT NULL,
  PRIMARY KEY (role, agent, target)
) WITHOUT ROWID;

-- The sweep of full buckets.
CREATE INDEX rate_buckets_tat ON rate_buckets (tat);
