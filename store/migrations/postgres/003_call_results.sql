-- Results of executed calls by call id (idempotency), as
-- migrations/sqlite/003.
CREATE TABLE call_results (
  call_id    TEXT PRIMARY KEY,
  args_hash  TEXT NOT NULL,
  result     TEXT NOT NULL,
  created_at TEXT COLLATE "C" NOT NULL
);

CREATE INDEX call_results_created ON call_results (created_at);
