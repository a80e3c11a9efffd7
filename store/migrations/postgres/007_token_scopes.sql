-- Token scopes, as migrations/sqlite/007, which rebuilds the table where
-- PostgreSQL alters it.
ALTER TABLE tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'role' CHECK (scope IN ('role', 'metrics'));
ALTER TABLE tokens ALTER COLUMN role_id DROP NOT NULL;
ALTER TABLE tokens ADD CHECK ((scope = 'role') = (role_id IS NOT NULL));
