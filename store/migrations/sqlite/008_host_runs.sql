-- The runs of hosts on this store: a host process registers its run at
-- start and ends it at close, so that a later start of the same host (its
-- host_id) can close the calls a run that died left open. proc_start is the
-- process's start time (its /proc stat), which tells a live run from a
-- reused pid; from_event is the newest event id when the run began.
CREATE TABLE host_runs (
  run_id     TEXT PRIMARY KEY,
  host_id    TEXT NOT NULL,
  pid        INTEGER NOT NULL,
  proc_start TEXT NOT NULL DEFAULT '',
  from_event INTEGER NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL,
  ended_at   TEXT NOT NULL DEFAULT ''
);

CREATE INDEX host_runs_host ON host_runs (host_id, ended_at);
