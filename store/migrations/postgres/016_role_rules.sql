-- A role's rules and limits (rule and limit blocks, or the API's rules and
-- limits): JSON lists, in order, as rules.Rule and rules.Limit encode them.
-- An approval asked by a rule names it and its reason.
ALTER TABLE roles ADD COLUMN rules TEXT NOT NULL DEFAULT '[]';
ALTER TABLE roles ADD COLUMN limits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE approvals ADD COLUMN rule TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN rule_reason TEXT NOT NULL DEFAULT '';
