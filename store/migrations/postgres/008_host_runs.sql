-- The runs of hosts on this store, as migrations/sqlite/008.
CREATE TABLE host_runs (
  run_id     TEXT PRIMARY KEY,
  host_id    TEXT NOT NULL,
  pid        INTEGER NOT NULL,
  proc_start TEXT NOT NULL DEFAULT '',
  from_event BIGINT NOT NULL DEFAULT 0,
  started_at TEXT COLLATE "C" NOT NULL,
  ended_at   TEXT COLLATE "C" NOT NULL DEFAULT ''
);

CREATE INDEX host_runs_host ON host_runs (host_id, ended_at);
