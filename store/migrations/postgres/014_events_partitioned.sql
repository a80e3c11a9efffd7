-- Audit events partitioned by day on ts (store/retention_postgres.go), so
-- that retention drops a day's partition instead of deleting rows. Each
-- day's partition, events_pYYYYMMDD, is made by the hosts ahead of time;
-- events_default holds whatever no partition does, so an insert never
-- fails. The key includes ts, as a partitioned table's must; ids still
-- come from events_id_seq. Existing rows keep their ids: they land in the
-- default partition, which the first host to start splits into days.
ALTER SEQUENCE events_id_seq OWNED BY NONE;
ALTER TABLE events RENAME TO events_unpartitioned;
ALTER TABLE events_unpartitioned RENAME CONSTRAINT events_pkey TO events_unpartitioned_pkey;
ALTER INDEX events_call RENAME TO events_unpartitioned_call;

CREATE TABLE events (
  id        BIGINT NOT NULL DEFAULT nextval('events_id_seq'),
  ts        TEXT COLLATE "C" NOT NULL,
  type      TEXT COLLATE "C" NOT NULL,
  call_id   TEXT NOT NULL DEFAULT '',
  agent_id  TEXT NOT NULL DEFAULT '',
  role      TEXT NOT NULL DEFAULT '',
  tool      TEXT NOT NULL DEFAULT '',
  group_id  TEXT NOT NULL DEFAULT '',
  parent_id TEXT NOT NULL DEFAULT '',
  payload   TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (id, ts)
) PARTITION BY RANGE (ts);
ALTER SEQUENCE events_id_seq OWNED BY events.id;
CREATE TABLE events_default PARTITION OF events DEFAULT;
CREATE INDEX events_call ON events (call_id);

INSERT INTO events SELECT * FROM events_unpartitioned;
DROP TABLE events_unpartitioned;
