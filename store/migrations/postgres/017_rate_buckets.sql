-- Call limits, as migrations/sqlite/017. UNLOGGED: a bucket is not worth a
-- WAL write per call; after a crash of the database (not of a host) the
-- table is empty, which is every bucket full.
CREATE UNLOGGED TABLE rate_buckets (
  role    TEXT NOT NULL,
  agent   TEXT NOT NULL,
  target  TEXT NOT NULL,
  tat     BIGINT NOT NULL,
  seen    BIGINT NOT NULL,
  granted SMALLINT NOT NULL,
  PRIMARY KEY (role, agent, target)
);

-- The sweep of full buckets.
CREATE INDEX rate_buckets_tat ON rate_buckets (tat);
