-- Artifacts' bytes, for a store { artifacts = "database" }: kept in the
-- database instead of under the artifact directory.
CREATE TABLE artifact_data (
  id   TEXT PRIMARY KEY REFERENCES artifacts (id) ON DELETE CASCADE,
  data BLOB NOT NULL
);
