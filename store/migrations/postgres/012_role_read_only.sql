-- A read-only role, as migrations/sqlite/012.
ALTER TABLE roles ADD COLUMN tools_read_only BOOLEAN NOT NULL DEFAULT FALSE;
