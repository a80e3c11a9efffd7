-- Leases on runtime agents, as migrations/sqlite/010.
ALTER TABLE agents ADD COLUMN lease_until TEXT COLLATE "C" NOT NULL DEFAULT '';

-- Every running host renews its leases every few seconds, which tells the
-- other hosts nothing: an update of agents notifies only when it changes
-- more than lease_until. The trigger is per row, so an update that changes
-- no row (a claim that lost) is silent too; pg_notify sends a
-- transaction's identical notifications once.
DROP TRIGGER agents_notify ON agents;

CREATE TRIGGER agents_notify AFTER INSERT OR DELETE ON agents
  FOR EACH STATEMENT EXECUTE FUNCTION toolhost_notify();

CREATE TRIGGER agents_notify_update AFTER UPDATE ON agents
  FOR EACH ROW WHEN ((to_jsonb(OLD) - 'lease_until') IS DISTINCT FROM (to_jsonb(NEW) - 'lease_until'))
  EXECUTE FUNCTION toolhost_notify();
