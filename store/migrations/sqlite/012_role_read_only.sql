-- A read-only role (tools { read_only = true }): it keeps only the tools
-- whose readOnlyHint says so. 0 or 1.
ALTER TABLE roles ADD COLUMN tools_read_only INTEGER NOT NULL DEFAULT 0;
