-- The public subject roster of one subject space (one or more protected tables whose privacy
-- units identify the same people): who the subjects are, their lifetime budgets, what they
-- have spent. {roster}, {offsets}, {view}, {name} and {unit_type} are filled in by
-- dpgate.owner (identifiers quoted by sqlglot).
--
-- What a subject has spent is their own row's *_spent plus the space's common offset: a
-- query that charges every subject of the space the same amount adds it to the offset (one
-- row) instead of to every row. New subjects start at minus the offset, i.e. at zero, and
-- carry the generation of the refresh that added them, so that a query charged "everyone"
-- uses exactly the subjects that were on the roster when it was charged.
-- Read budgets through the view: remaining = epsilon_budget - epsilon_spent.
CREATE TABLE IF NOT EXISTS {roster} (
    unit           {unit_type} PRIMARY KEY,
    epsilon_budget DECIMAL(38, 18) NOT NULL,
    epsilon_spent  DECIMAL(38, 18) NOT NULL DEFAULT 0,
    delta_spent    DECIMAL(38, 18) NOT NULL DEFAULT 0,
    added          BIGINT NOT NULL DEFAULT 0  -- the roster generation that added the subject
);
INSERT INTO {offsets} VALUES ({name}, 0, 0, 0) ON CONFLICT DO NOTHING;
CREATE OR REPLACE VIEW {view} AS
SELECT r.unit, r.epsilon_budget,
       r.epsilon_spent + o.epsilon_spent AS epsilon_spent,
       r.delta_spent + o.delta_spent AS delta_spent
FROM {roster} r CROSS JOIN (SELECT epsilon_spent, delta_spent FROM {offsets} WHERE roster = {name}) o;
