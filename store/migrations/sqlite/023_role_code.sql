-- A role's code mode bounds (its code block): a JSON object as
-- rules.CodeBounds encodes it, fields absent where the role says nothing.
ALTER TABLE roles ADD COLUMN code TEXT NOT NULL DEFAULT '{}';
