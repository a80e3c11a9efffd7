-- Artifacts' bytes in the database, as migrations/sqlite/011.
CREATE TABLE artifact_data (
  id   TEXT PRIMARY KEY REFERENCES artifacts (id) ON DELETE CASCADE,
  data BYTEA NOT NULL
);
