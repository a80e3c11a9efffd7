-- Agents end, and are forgotten: the agents not final, newest first, lead
-- the page's list (agents_live); the final ones follow, the most recently
-- ended first, and are removed once they have been final for the store
-- block's agent_retention (agents_ended: a final agent's updated_at is when
-- it ended, and no longer changes).
CREATE INDEX agents_live ON agents (created_at, id) WHERE status NOT IN ('failed', 'terminated');
CREATE INDEX agents_ended ON agents (updated_at, id) WHERE status IN ('failed', 'terminated');
