-- Results of executed calls by call id, replayed when a call id repeats
-- (idempotency), kept for the configured window.
CREATE TABLE call_results (
  call_id    TEXT PRIMARY KEY,
  args_hash  TEXT NOT NULL,
  result     TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE INDEX call_results_created ON call_results (created_at);
