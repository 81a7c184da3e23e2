-- The public subject roster of one protected table: who the subjects are, their lifetime
-- budgets and what they have spent. {roster} and {unit_type} are filled in by
-- dpgate.owner (identifiers quoted by sqlglot). Remaining = epsilon_budget - epsilon_spent.
CREATE TABLE IF NOT EXISTS {roster} (
    unit           {unit_type} PRIMARY KEY,
    epsilon_budget DECIMAL(38, 18) NOT NULL,
    epsilon_spent  DECIMAL(38, 18) NOT NULL DEFAULT 0,
    delta_spent    DECIMAL(38, 18) NOT NULL DEFAULT 0
);
