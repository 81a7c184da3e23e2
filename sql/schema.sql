-- dpgate's own schema, kept inside the data owner's DuckDB file.
-- Applied by dpgate.owner.Owner.init() (idempotent). Analysts never read or write it directly:
-- they see their quota through SHOW BUDGET and the catalog through the shell's .schema.

CREATE SCHEMA IF NOT EXISTS dpgate;

-- Key/value settings: schema_version, catalog_version (bumped on every owner change).
CREATE TABLE IF NOT EXISTS dpgate.settings (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);

-- One row per protected table. Neighbouring databases differ in all rows of one subject
-- (the privacy unit); each subject contributes at most max_rows rows and max_groups groups.
CREATE TABLE IF NOT EXISTS dpgate.protected_tables (
    table_name          VARCHAR PRIMARY KEY,   -- lower-case, schema main
    kind                VARCHAR NOT NULL,      -- 'table'
    unit_column         VARCHAR NOT NULL,      -- the privacy unit
    max_rows            INTEGER NOT NULL,
    max_groups          INTEGER NOT NULL,
    budget_source       VARCHAR NOT NULL,      -- 'default' | 'column' | 'table'
    budget_column       VARCHAR,               -- source 'column': a column of the table (MIN per subject)
    budget_table        VARCHAR,               -- source 'table': a table of (unit, epsilon) rows
    budget_table_unit   VARCHAR,
    budget_table_column VARCHAR,
    default_epsilon     DECIMAL(38, 18),       -- source 'default', and fallback for source 'table'
    subject_delta       DECIMAL(38, 18) NOT NULL, -- lifetime delta budget of every subject
    roster_table        VARCHAR NOT NULL,      -- dpgate.<roster_table>: the public subject roster
    options             VARCHAR NOT NULL,      -- JSON: mechanism-specific declarations
    declared_at         TIMESTAMP NOT NULL DEFAULT current_timestamp
);

-- Public facts about columns: bounds of numeric columns, domains of categorical ones.
CREATE TABLE IF NOT EXISTS dpgate.columns (
    table_name  VARCHAR NOT NULL,
    column_name VARCHAR NOT NULL,
    lower       DOUBLE,
    upper       DOUBLE,
    domain      VARCHAR,                       -- JSON list of values (null allowed)
    PRIMARY KEY (table_name, column_name)
);

-- The common spending of each subject space (see roster.sql): added to every subject's own.
-- generation counts the roster refreshes: subjects carry the generation that added them.
CREATE TABLE IF NOT EXISTS dpgate.roster_offsets (
    roster        VARCHAR PRIMARY KEY,
    epsilon_spent DECIMAL(38, 18) NOT NULL,
    delta_spent   DECIMAL(38, 18) NOT NULL,
    generation    BIGINT NOT NULL
);

-- Privacy quantities are DECIMAL(38, 18) so that budgets, charges and comparisons are exact:
-- spending 0.1 ten times exhausts a budget of 1.0, with no floating-point drift either way.

-- Analysts and their quotas. Spent totals are kept here for a fast check; the ledger
-- below is the append-only record they are derived from.
CREATE TABLE IF NOT EXISTS dpgate.analysts (
    name              VARCHAR PRIMARY KEY,
    epsilon_quota     DECIMAL(38, 18) NOT NULL,
    delta_quota       DECIMAL(38, 18) NOT NULL,
    epsilon_per_query DECIMAL(38, 18) NOT NULL,
    delta_per_query   DECIMAL(38, 18) NOT NULL,
    epsilon_spent     DECIMAL(38, 18) NOT NULL DEFAULT 0,
    delta_spent       DECIMAL(38, 18) NOT NULL DEFAULT 0,
    allow_test_seed   BOOLEAN NOT NULL DEFAULT false, -- may run seeded, non-private tests
    created_at        TIMESTAMP NOT NULL DEFAULT current_timestamp
);

CREATE SEQUENCE IF NOT EXISTS dpgate.ledger_seq START 1;

-- Append-only: one row per debit, written in the same transaction as the debit itself,
-- before any noisy value is released.
CREATE TABLE IF NOT EXISTS dpgate.ledger (
    entry_id          BIGINT PRIMARY KEY,
    logged_at         TIMESTAMP NOT NULL DEFAULT current_timestamp,
    analyst           VARCHAR NOT NULL,
    query_hash        VARCHAR NOT NULL,
    statement         VARCHAR NOT NULL,
    query_class       VARCHAR NOT NULL,
    mechanism         VARCHAR NOT NULL,
    table_name        VARCHAR,
    epsilon           DECIMAL(38, 18) NOT NULL,
    delta             DECIMAL(38, 18) NOT NULL,
    personalization   VARCHAR,
    subjects_charged  BIGINT NOT NULL,
    subjects_excluded BIGINT NOT NULL,
    subject_epsilon   DECIMAL(38, 18) NOT NULL, -- sum of the charges to subjects
    private           BOOLEAN NOT NULL,        -- false for seeded test runs
    roster            VARCHAR                  -- the subject space charged (budget shares sum on it)
);

-- The release log: written after the noisy rows are ready. A ledger entry without a
-- release is an answer lost to a crash, never an unpaid answer.
CREATE TABLE IF NOT EXISTS dpgate.releases (
    entry_id    BIGINT PRIMARY KEY,
    released_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
    row_count   BIGINT NOT NULL
);

-- The release registry: every table dpgate publishes from protected data (synthetic tables
-- today; histograms and synopses later), with its lineage. A release is public from the moment
-- it is written: any SQL over it is free. DROP SYNTHETIC TABLE drops the table and keeps the
-- row (dropped_at), so the lineage of everything ever published stays.
CREATE TABLE IF NOT EXISTS dpgate.release_registry (
    entry_id   BIGINT PRIMARY KEY,       -- the ledger debit that paid for it
    name       VARCHAR NOT NULL,         -- its table in schema main (lower-case)
    kind       VARCHAR NOT NULL,         -- 'synthetic table'
    sources    VARCHAR NOT NULL,         -- JSON list of the protected tables it was made from
    mechanism  VARCHAR NOT NULL,         -- e.g. 'privbayes'
    parameters VARCHAR NOT NULL,         -- JSON: options, column codings, the released model's structure
    epsilon    DECIMAL(38, 18) NOT NULL,
    delta      DECIMAL(38, 18) NOT NULL,
    analyst    VARCHAR NOT NULL,
    row_count  BIGINT NOT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
    dropped_at TIMESTAMP,
    dropped_by VARCHAR
);
