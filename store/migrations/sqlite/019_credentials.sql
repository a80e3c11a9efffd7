-- Who made what. An agent belongs to the credential that made it (its
-- credential: "admin", "cli", "token/NAME/ID" or "oidc/SUBJECT"; "" for
-- the agents of an embedding program, and of rows made before): only that
-- credential, or the admin, may call as it. A call limit's bucket counts
-- per credential (or per role), never per agent: caller is the credential,
-- or "" for a limit shared by the role's callers. An approval records the
-- credential of the call waiting (credential) and of whoever decided it
-- (decided_by), and keeps of the call's arguments only what the approver
-- needs to see: at most a bounded, redacted preview (arguments), their
-- full size and the SHA-256 of the full arguments, which the run checks.
ALTER TABLE agents ADD COLUMN credential TEXT NOT NULL DEFAULT '';
ALTER TABLE rate_buckets RENAME COLUMN agent TO caller;
ALTER TABLE approvals ADD COLUMN credential TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN decided_by TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN arguments_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE approvals ADD COLUMN arguments_sha256 TEXT NOT NULL DEFAULT '';
