-- Leases on runtime agents: the process that owns an agent (owner) holds
-- it until lease_until, and renews the lease while it runs the agent; once
-- the lease has passed, another process may take the agent over, which is
-- how the agents of a host that died are adopted. '' is no lease: an agent
-- without an owner, or one claimed before leases existed.
ALTER TABLE agents ADD COLUMN lease_until TEXT NOT NULL DEFAULT '';
