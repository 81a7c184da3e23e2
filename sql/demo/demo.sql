-- The demo database: UCI Adult as the protected table `adult`, a budget table, and a public
-- lookup table; supermarket baskets (long and wide); places; two graphs. Run by `dpgate demo` with
-- {adult}, {baskets}, {cities}, {careers} and {wormnet} replaced by the paths of the files shipped in
-- examples/data/ (licences there: Adult CC BY 4.0, UCI Machine Learning Repository, Becker & Kohavi
-- 1996; baskets GPL-2+, Weka's supermarket.arff; places: GeoNames cities1000, CC BY 4.0; careers:
-- the mvad school-to-work sequences via sequenzo, BSD-3-Clause; WormNet v3 via networkx,
-- BSD-3-Clause). The wide
-- table basket_flags is built by dpgate/demo.py from the item catalogue declared in
-- policy.toml, and the karate club graph (Zachary 1977) from networkx.karate_club_graph().

CREATE TABLE adult AS SELECT * FROM read_parquet({adult}) ORDER BY person_id;
-- The UCI documentation lists missing values in workclass, occupation and native_country only;
-- the other columns are declared NOT NULL (a schema fact: synthetic releases then give them no
-- NULL code).
ALTER TABLE adult ALTER COLUMN person_id SET NOT NULL;
ALTER TABLE adult ALTER COLUMN age SET NOT NULL;
ALTER TABLE adult ALTER COLUMN fnlwgt SET NOT NULL;
ALTER TABLE adult ALTER COLUMN education SET NOT NULL;
ALTER TABLE adult ALTER COLUMN education_num SET NOT NULL;
ALTER TABLE adult ALTER COLUMN marital_status SET NOT NULL;
ALTER TABLE adult ALTER COLUMN relationship SET NOT NULL;
ALTER TABLE adult ALTER COLUMN race SET NOT NULL;
ALTER TABLE adult ALTER COLUMN sex SET NOT NULL;
ALTER TABLE adult ALTER COLUMN capital_gain SET NOT NULL;
ALTER TABLE adult ALTER COLUMN capital_loss SET NOT NULL;
ALTER TABLE adult ALTER COLUMN hours_per_week SET NOT NULL;
ALTER TABLE adult ALTER COLUMN income SET NOT NULL;

-- One row per (basket, item) of 4,627 supermarket baskets. The key tells dpgate that a basket
-- lists an item once, so top-k queries skip a DISTINCT pass.
CREATE TABLE baskets (basket_id INTEGER NOT NULL, item VARCHAR NOT NULL, PRIMARY KEY (basket_id, item));
INSERT INTO baskets SELECT basket_id, item FROM read_parquet({baskets}) ORDER BY basket_id, item;

-- Personalized lifetime budgets, varying across subjects (a public fact in dpgate's model):
-- 10% of the people at ε = 3, 30% at 5, 40% at 10, 20% at 20. The tour (dpgate demo) spends
-- ε = 1.1 of each person, well below the smallest, so after it every answer is still about
-- everyone; the spread shows in the personalization rules once the cheaper budgets run low
-- (EXPLAIN PRIVACY SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 2, personalization =
-- 'partition') ... after a few queries).
CREATE TABLE subject_budgets AS
SELECT person_id,
       CASE WHEN h < 10 THEN 3.0 WHEN h < 40 THEN 5.0 WHEN h < 80 THEN 10.0 ELSE 20.0 END AS epsilon
FROM (SELECT person_id, (person_id * 7919) % 100 AS h FROM adult);

-- A public lookup table (no personal data): world region of each native country.
CREATE TABLE country_regions (native_country VARCHAR PRIMARY KEY, region VARCHAR NOT NULL);
INSERT INTO country_regions VALUES
    ('Cambodia', 'Asia'),
    ('Canada', 'North America'),
    ('China', 'Asia'),
    ('Columbia', 'South America'),
    ('Cuba', 'Central America & Caribbean'),
    ('Dominican-Republic', 'Central America & Caribbean'),
    ('Ecuador', 'South America'),
    ('El-Salvador', 'Central America & Caribbean'),
    ('England', 'Europe'),
    ('France', 'Europe'),
    ('Germany', 'Europe'),
    ('Greece', 'Europe'),
    ('Guatemala', 'Central America & Caribbean'),
    ('Haiti', 'Central America & Caribbean'),
    ('Holand-Netherlands', 'Europe'),
    ('Honduras', 'Central America & Caribbean'),
    ('Hong', 'Asia'),
    ('Hungary', 'Europe'),
    ('India', 'Asia'),
    ('Iran', 'Asia'),
    ('Ireland', 'Europe'),
    ('Italy', 'Europe'),
    ('Jamaica', 'Central America & Caribbean'),
    ('Japan', 'Asia'),
    ('Laos', 'Asia'),
    ('Mexico', 'Central America & Caribbean'),
    ('Nicaragua', 'Central America & Caribbean'),
    ('Outlying-US(Guam-USVI-etc)', 'North America'),
    ('Peru', 'South America'),
    ('Philippines', 'Asia'),
    ('Poland', 'Europe'),
    ('Portugal', 'Europe'),
    ('Puerto-Rico', 'Central America & Caribbean'),
    ('Scotland', 'Europe'),
    ('South', 'Asia'),
    ('Taiwan', 'Asia'),
    ('Thailand', 'Asia'),
    ('Trinadad&Tobago', 'Central America & Caribbean'),
    ('United-States', 'North America'),
    ('Vietnam', 'Asia'),
    ('Yugoslavia', 'Europe');

-- The WormNet v3 gold-standard gene network of C. elegans: one row per undirected edge.
CREATE TABLE wormnet AS SELECT src, dst FROM read_parquet({wormnet}) ORDER BY src, dst;

-- Its public node universe: the 2,445 genes of the benchmark (the owner's declaration; the
-- graph's node count is never read from the edges by dpgate).
CREATE TABLE wormnet_genes (gene VARCHAR PRIMARY KEY);
INSERT INTO wormnet_genes SELECT gene FROM (SELECT src AS gene FROM wormnet UNION SELECT dst FROM wormnet) ORDER BY gene;

-- Places (GeoNames cities1000, CC BY 4.0): one row per place, with a synthetic privacy unit
-- place_id (1..170,391 in GeoNames id order). Their coordinates are what a PrivTree synopsis covers.
CREATE TABLE cities AS
SELECT CAST(row_number() OVER (ORDER BY city_id) AS INTEGER) AS place_id, name, country, lon, lat, population
FROM read_parquet({cities}) ORDER BY place_id;
ALTER TABLE cities ALTER COLUMN place_id SET NOT NULL;

-- School-to-work careers (McVicar & Anyadike-Danes' mvad data, via sequenzo, BSD-3-Clause): one row
-- per person and month (month 1 = July 1993 .. 72 = June 1999), the person's state that month.
CREATE TABLE careers AS
SELECT person_id, t AS month, state FROM read_parquet({careers}) ORDER BY person_id, month;
ALTER TABLE careers ALTER COLUMN person_id SET NOT NULL;
